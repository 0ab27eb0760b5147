"""Compact lookup tables keyed by strings, for data steps that stream records at 10× paper scale.

A Python ``dict`` keyed by ``(prompt_id, response_id)`` tuples costs about 300 bytes an entry (the
tuple, two strings, a float and the hash slot): 1.47M scores take ~450 MB. :class:`KeyTable` holds
a sorted array of 16-byte BLAKE2b digests of the keys and a numpy array of values (24 bytes an
entry for float64), and is saved as ``.npy`` files that worker processes map read-only
(:func:`load_table`, once per process) instead of receiving a pickled copy with every chunk.

:func:`read_score_table` reads a scores file into one, with the errors of
:func:`cheems.data.io.read_scores` (a row's checks, the first repeated response by line, an empty file).
"""

from __future__ import annotations

import hashlib
from array import array
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cheems.data.io import iter_rows, repeated_score, score_row
from cheems.errors import InputError

DIGEST_BYTES = 16  # 2**-128 per pair of keys: no two keys of any real file share a digest


def key_digest(*parts: str) -> bytes:
    """The digest of a key of strings (length-prefixed, so ``("ab", "c")`` and ``("a", "bc")`` differ)."""
    text = "".join(f"{len(p)}:{p}" for p in parts)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES).digest()


def _digests(raw: bytes | bytearray) -> np.ndarray:
    return np.frombuffer(raw, dtype=f"S{DIGEST_BYTES}")  # a view: the caller's buffer is not copied


class KeyTable:
    """Values looked up by a tuple of strings; built once, read many times."""

    def __init__(self, digests: np.ndarray, values: np.ndarray) -> None:
        """``digests`` sorted and distinct (see :func:`sort_keys`), ``values`` in the same order."""
        self.digests, self.values = digests, values

    def __len__(self) -> int:
        return len(self.digests)

    def get(self, key: tuple[str, ...]) -> Any:
        """The value of ``key`` as a Python number, or ``None`` when the table has no such key."""
        i = self._index(key)
        return None if i is None else self.values[i].item()

    def _index(self, key: tuple[str, ...]) -> int | None:
        return self._find(key_digest(*key))

    def _find(self, digest: bytes) -> int | None:
        i = int(np.searchsorted(self.digests, digest))
        # numpy's S dtype drops trailing NUL bytes when it hands out an item: compare without them
        return i if i < len(self.digests) and self.digests[i] == digest.rstrip(b"\0") else None

    def save(self, folder: str | Path, **more: np.ndarray) -> Path:
        """Write the table (and ``more`` arrays) as ``.npy`` files in ``folder``; return the folder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name, arr in {"digests": self.digests, "values": self.values, **more}.items():
            np.save(folder / f"{name}.npy", arr)
        return folder


class KeyLog:
    """The keys seen so far in a stream, each with the value it was first seen with (an int): a duplicate
    check at about 24 bytes a key (a ``dict`` of string ids: about 180). The newest keys wait in a small
    ``dict``; every :attr:`BATCH` of them are merged into a sorted :class:`KeyTable`."""

    BATCH = 1 << 16

    def __init__(self) -> None:
        self._table = KeyTable(np.empty(0, dtype=f"S{DIGEST_BYTES}"), np.empty(0, dtype=np.int64))
        self._recent: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._table) + len(self._recent)

    def first(self, key: tuple[str, ...], value: int) -> int | None:
        """The value ``key`` was first seen with, or ``None`` when it is new (it is then kept, with ``value``)."""
        digest = key_digest(*key)
        seen = self._recent.get(digest)
        if seen is not None:
            return seen
        i = self._table._find(digest)
        if i is not None:
            return int(self._table.values[i])
        self._recent[digest] = value
        if len(self._recent) >= self.BATCH:
            self._merge()
        return None

    def _merge(self) -> None:
        digests = np.array(list(self._recent), dtype=f"S{DIGEST_BYTES}")
        values = np.fromiter(self._recent.values(), dtype=np.int64, count=len(self._recent))
        order = np.argsort(digests)
        at = np.searchsorted(self._table.digests, digests[order])  # an insert, not a sort of the whole table
        self._table = KeyTable(
            np.insert(self._table.digests, at, digests[order]), np.insert(self._table.values, at, values[order])
        )
        self._recent.clear()


def sort_keys(digests: bytes | bytearray, values: np.ndarray) -> tuple[KeyTable, int | None, np.ndarray]:
    """A table of ``digests`` (concatenated, in input order) and their values, the input position of
    the first key (in input order) that repeats an earlier one, or ``None``, and the sorting permutation
    (to put other per-key arrays in the table's order)."""
    keys = _digests(digests)
    order = np.argsort(keys, kind="stable")  # equal keys stay in input order: the later one is the repeat
    ranked = keys[order]
    repeats = np.flatnonzero(ranked[1:] == ranked[:-1]) + 1
    first_repeat = int(order[repeats].min()) if len(repeats) else None
    return KeyTable(ranked, np.asarray(values)[order]), first_repeat, order


@lru_cache(maxsize=4)
def load_table(folder: str) -> tuple[KeyTable, dict[str, np.ndarray]]:
    """A table saved by :meth:`KeyTable.save` (mapped read-only, once per process) and its other arrays."""
    arrays = {p.stem: np.load(p, mmap_mode="r") for p in Path(folder).glob("*.npy")}
    return KeyTable(arrays.pop("digests"), arrays.pop("values")), arrays


class ScoreTable(KeyTable):
    """A scores file's table that also records which scores were looked up, so that the others can be listed
    (``eval`` warns about scores of no bench response)."""

    def __init__(self, table: KeyTable, path: str | Path) -> None:
        super().__init__(table.digests, table.values)
        self.path = path
        self.used = np.zeros(len(table), dtype=bool)

    def get_many(self, prompt_id: str, response_ids: list[str]) -> dict[tuple[str, str], float]:
        """The scores of these responses of one prompt that the file has (marked used)."""
        found = {}
        for rid in response_ids:
            i = self._index((prompt_id, rid))
            if i is not None:
                self.used[i] = True
                found[(prompt_id, rid)] = self.values[i].item()
        return found

    def unused(self) -> list[tuple[str, str]]:
        """The keys never looked up, in file order (read again from the file: only digests are kept)."""
        if self.used.all():
            return []
        keys = (score_row(row, self.path, n)[0] for n, row in iter_rows(self.path))
        return [key for key in keys if not self.used[self._index(key)]]


def read_score_table(path: str | Path) -> ScoreTable:
    """A scores file (rows ``{prompt_id, response_id, score}``) as a table keyed by (prompt_id, response_id)."""
    digests, values = bytearray(), array("d")
    try:
        for line, row in iter_rows(path):
            key, value = score_row(row, path, line)
            digests += key_digest(*key)
            values.append(value)
    except InputError:
        _no_repeat(path, digests, values)  # read_scores stops at a repeat before a later bad row
        raise
    return _no_repeat(path, digests, values)


def _no_repeat(path: str | Path, digests: bytearray, values: array[Any]) -> ScoreTable:
    """The table of the rows read so far; raise read_scores' error at the first repeated response."""
    table, repeat, _ = sort_keys(digests, np.frombuffer(values, dtype=np.float64) if values else np.zeros(0))
    if repeat is not None:  # the row of that position, read again (no line numbers are kept)
        line, row = next(item for position, item in enumerate(iter_rows(path)) if position == repeat)
        raise repeated_score(score_row(row, path, line)[0], path, line)
    return ScoreTable(table, path)
