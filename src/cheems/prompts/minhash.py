"""Near-duplicate prompts: MinHash over character n-grams of the normalised text, found with LSH.

The signatures are ``datasketch``'s MinHash: the library the large dedup pipelines build on (text-dedup, the
BigCode and RedPajama near-dedup), vectorised with numpy. The LSH banding is :class:`NearIndex`'s own (a few
lines), for memory. Shingles are characters, not words: Chinese has no spaces, and one character is about
one token of a Chinese tokenizer.

Two prompts are near duplicates when the estimated Jaccard similarity of their shingle sets reaches the threshold
AND they are in one group (:attr:`PromptKey.group`): the same numbers, the same system prompt and the same turns. A
template filled with other numbers (计算 3+5 / 计算 7+9) is another question, however alike the text around them,
and one question under two system prompts is two prompts. The group is mixed into every LSH bucket's key, so
prompts of two groups never become candidates: a pool of one template filled with many numbers costs no more
than a pool of different prompts (comparing every candidate's numbers after LSH made it quadratic).
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Any, NamedTuple, cast

import numpy as np
from pydantic import Field

from cheems.data.schema import Record
from cheems.prompts.textnorm import prompt_turns
from cheems.settings import Settings

NUM_PERM = 128
"""Hash functions per signature: the similarity estimate's standard error is at most 0.045 (√(J(1−J)/128))."""
SEED = 1
SCHEME = "affine32"  # datasketch 2's default: 32-bit values, unbiased for sets of a prompt's size
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")  # in normalised text, which keeps signs and decimal points


class NearSettings(Settings):
    """When two prompts are near duplicates (``dedup``, ``decontaminate``)."""

    threshold: float = Field(
        0.8, ge=0.1, le=1, description="Near duplicates: estimated Jaccard similarity of character shingles, at least."
    )
    # 3 characters: prompts are short (a few dozen characters), and one changed character breaks n shingles of a
    # prompt's ~length ones, so 5-grams (the usual web-text size) miss one-character edits of short prompts, while
    # 2-grams (about one Chinese word each) make prompts on the same topic look alike.
    shingle: int = Field(3, ge=1, le=50, description="Characters per shingle of the near-duplicate MinHash.")


class PromptKey(NamedTuple):
    """What comparing a prompt needs: the hash of the normalised prompt (every turn, the system prompt among them),
    its group, its numbers, the MinHash signature of its text, and that text (the normalised content of the
    turns other than the system prompt: what n-grams and shingles are read from)."""

    id: str
    exact: bytes
    group: int  # near duplicates share it: a hash of the numbers, the system prompt and the turns' roles
    numbers: tuple[str, ...]
    signature: bytes
    text: str


@functools.cache
def _permutations(num_perm: int, seed: int) -> tuple[Any, ...]:
    from datasketch import MinHash

    # made once: making them costs more than hashing a prompt
    return cast("tuple[Any, ...]", MinHash(num_perm=num_perm, seed=seed, scheme=SCHEME).permutations)


def shingles(text: str, n: int) -> set[bytes]:
    """The character ``n``-grams of ``text`` (a text shorter than ``n`` is its own one shingle)."""
    if len(text) <= n:
        return {text.encode("utf-8")}
    return {text[i : i + n].encode("utf-8") for i in range(len(text) - n + 1)}


def signature(text: str, n: int) -> bytes:
    """The MinHash signature of ``text``'s ``n``-character shingles (``NUM_PERM`` 32-bit values)."""
    from datasketch import MinHash

    minhash = MinHash(num_perm=NUM_PERM, seed=SEED, permutations=_permutations(NUM_PERM, SEED), scheme=SCHEME)
    minhash.update_batch(list(shingles(text, n)))
    return cast("bytes", minhash.hashvalues.astype(np.uint32).tobytes())  # affine32 values are below 2**32


def _digest(parts: list[str], size: int) -> bytes:
    # \x1e and \x1f never survive normalisation (control characters), so the joined parts cannot be confused
    return hashlib.blake2b("\x1e".join(parts).encode("utf-8"), digest_size=size).digest()


def _exact(turns: list[tuple[str, str]]) -> bytes:
    return _digest([f"{role}\x1f{content}" for role, content in turns], 16)


def exact_key(record: Record) -> bytes:
    """What two exact duplicates share: the hash of every turn's role and normalised content, the system prompt's
    among them (:attr:`PromptKey.exact`)."""
    return _exact(prompt_turns(record))


def prompt_key(shingle: int, record: Record) -> PromptKey:
    """A record's :class:`PromptKey` (runs in the data workers)."""
    turns = prompt_turns(record)
    text = "".join(content for role, content in turns if role != "system")
    numbers = tuple(_NUMBER.findall(text))
    exact = _exact(turns)
    context = [content for role, content in turns if role == "system"] + ["\x1f".join(r for r, _ in turns)]
    group = int.from_bytes(_digest([*context, "\x1f".join(numbers)], 8), "little")
    return PromptKey(record.id, exact, group, numbers, signature(text, shingle), text)


def similarity(a: bytes, b: bytes) -> float:
    """Estimated Jaccard similarity of two signatures (the share of equal values), rounded to 3 places."""
    return round(float(np.mean(np.frombuffer(a, np.uint32) == np.frombuffer(b, np.uint32))), 3)


def bands(threshold: float) -> tuple[int, int]:
    """LSH (bands, rows per band) for ``threshold``: as many rows as keep a pair at the threshold a candidate with
    probability 99.5 % or more. Every candidate's similarity is then computed, so recall is worth the extra ones
    (datasketch's ``MinHashLSH`` balances misses and extra candidates, and misses half the pairs at the threshold)."""
    for rows in range(NUM_PERM, 0, -1):
        if 1 - (1 - threshold**rows) ** (NUM_PERM // rows) >= 0.995:
            return NUM_PERM // rows, rows
    return NUM_PERM, 1


class NearIndex:
    """Prompts added one by one; :meth:`match` finds the most similar one added, if it is a near duplicate.

    The LSH banding is done here, over plain integers: datasketch's ``MinHashLSH`` keeps a bytes key and a set per
    band and prompt (about 8 KB a prompt; 2 GB for 10x the paper's pool), this about a quarter of that. A band's
    key is its values mixed by fixed odd multipliers (the same in every run); a collision only adds a candidate,
    whose similarity is then computed.
    """

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._bands, self._rows = bands(threshold)
        self._mix = np.random.default_rng(SEED).integers(1, 2**63, self._rows, dtype=np.uint64) * 2 + 1
        self._buckets: list[dict[int, int | list[int]]] = [{} for _ in range(self._bands)]
        self._keys: list[tuple[bytes, int]] = []

    def _band_keys(self, key: PromptKey) -> list[int]:
        """The LSH bucket of each band: its values and the prompt's group, so two groups never share one."""
        values = np.frombuffer(key.signature, np.uint32)[: self._bands * self._rows].astype(np.uint64)
        mixed = (values.reshape(self._bands, self._rows) * self._mix).sum(axis=1)  # wraps around 2**64
        return cast("list[int]", (mixed ^ np.uint64(key.group)).tolist())

    def add(self, key: PromptKey) -> int:
        """Add a prompt; its number in this index."""
        number = len(self._keys)
        self._keys.append((key.signature, key.group))
        for buckets, band in zip(self._buckets, self._band_keys(key)):
            there = buckets.get(band)
            if there is None:
                buckets[band] = number
            elif isinstance(there, list):
                there.append(number)
            else:
                buckets[band] = [there, number]
        return number

    def candidates(self, key: PromptKey) -> set[int]:
        """The numbers of the prompts added that share an LSH bucket with ``key``: the only ones compared with it."""
        found: set[int] = set()
        for buckets, band in zip(self._buckets, self._band_keys(key)):
            there = buckets.get(band)
            if there is not None:
                found.update(there if isinstance(there, list) else (there,))
        return found

    def match(self, key: PromptKey) -> tuple[int, float] | None:
        """(number, similarity) of the most similar prompt added that is a near duplicate of ``key`` (the first
        added on a tie), or None."""
        best: tuple[int, float] | None = None
        for i in sorted(self.candidates(key)):
            sig, group = self._keys[i]
            if group != key.group:  # a collision of two groups' bucket keys
                continue
            sim = similarity(sig, key.signature)
            if sim >= self.threshold and (best is None or sim > best[1]):
                best = (i, sim)
        return best
