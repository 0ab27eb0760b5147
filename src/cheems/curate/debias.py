"""Length debiasing (paper part 2.5): as many "chosen is longer" pairs as "chosen is shorter" ones.

The pairs are the ones training would use, :func:`cheems.ranking.pairs.training_pairs` of each
record. They fall into three groups by the length of chosen vs rejected: ``chosen_longer``,
``chosen_shorter`` and ``equal_length`` (kept untouched). The larger of the first two is
downsampled, pooled over all records, to the size of the smaller with ``random.Random(seed)``
(deterministic, whatever ``PYTHONHASHSEED`` is).

Output records carry exactly the surviving pairs as ``comparisons`` and ``rank`` resolved from
them (Algorithm 1), so ``training_pairs`` of an output record is its surviving pairs, in order.
A pair that came from a comparison keeps that comparison as it is (the first one giving the pair:
its label, annotator, source and extra keys such as the judge's ``shown`` order, which relabelling
it as ``a`` would falsify); a pair that came from a rank becomes ``{"a": chosen, "b": rejected,
"label": "a", "source": "rank"}``. A record left with no pair is left out (counted). As Algorithm 1
ranks it, a response that no surviving pair mentions sits at rank 1.

:func:`debias_step` runs over :class:`~cheems.data.stream.Records` (a list, or files streamed), reading
them twice (pass 1: one byte per pair, its group; pass 2: the records rebuilt, in the worker processes
for files), so memory does not grow with the file's text; :func:`length_debias` is that step over a list.
"""

from __future__ import annotations

import functools
import random
import tempfile
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from cheems.data.io import ReadResult, write_lines_and_report
from cheems.data.keytable import key_digest, load_table, sort_keys
from cheems.data.schema import Comparison, Record
from cheems.data.stream import Records
from cheems.errors import InputError
from cheems.outputs import claim_outputs
from cheems.ranking.pairs import training_pairs
from cheems.ranking.resolve import resolve_record
from cheems.settings import Settings

LONGER = "chosen_longer"
SHORTER = "chosen_shorter"
EQUAL = "equal_length"
GROUPS = (LONGER, SHORTER, EQUAL)
UNITS = ("chars", "tokens")


class DebiasSettings(Settings):
    """How length debias draws (``cheems curate debias``, a recipe's ``debias:``)."""

    seed: int = Field(0, description="Seed of the downsampling.")
    tokenizer: str | None = Field(
        None, description="Measure length in tokens of this tokenizer (folder or hub id) instead of characters."
    )


LengthFn = Callable[[str], int]


def token_counter(tokenizer: str | Path) -> LengthFn:
    """Length in tokens of a Hugging Face tokenizer (a local folder or hub id); transformers loads lazily."""
    try:
        from transformers import AutoTokenizer
    except ImportError as e:  # pragma: no cover - transformers is a core dependency
        raise InputError(f"token lengths need transformers ({e})", hint="pip install transformers") from None
    try:
        tok = AutoTokenizer.from_pretrained(str(tokenizer))
    except (OSError, ValueError) as e:
        raise InputError(
            f"cannot load a tokenizer: {str(e).splitlines()[0]}",
            path=str(tokenizer),
            hint="give a folder with tokenizer files (or a hub id)",
        ) from None
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def length_function(unit: str = "chars", tokenizer: str | Path | None = None) -> LengthFn:
    """``len`` for ``chars``; a tokenizer's token count for ``tokens`` (which needs ``tokenizer``)."""
    if unit not in UNITS:
        raise InputError(f"unknown length unit '{unit}'", field="unit", hint=f"use one of {', '.join(UNITS)}")
    if unit == "chars":
        return len
    if tokenizer is None:
        raise InputError("length in tokens needs a tokenizer", path="--tokenizer", hint="give --tokenizer PATH")
    return token_counter(tokenizer)


@dataclass
class Pair:
    """One implied (chosen, rejected) pair and the comparison that stands for it in the output."""

    chosen: str
    rejected: str
    comparison: Comparison
    group: str = EQUAL


def implied_pairs(record: Record) -> list[tuple[str, str, Comparison]]:
    """(chosen, rejected, comparison) for every pair ``training_pairs`` gives the record.

    The comparison is the record's first one with that outcome, unchanged; for a pair that only
    the rank implies, a new ``label: a`` comparison with ``source: rank``.
    """
    first: dict[tuple[str, str], Comparison] = {}
    for c in record.comparisons:
        outcome = c.winner_loser()
        if outcome is not None and c.a != c.b:
            first.setdefault(outcome, c)
    out = []
    for chosen, rejected in training_pairs(record):
        comparison = first.get((chosen, rejected)) or Comparison(a=chosen, b=rejected, label="a", source="rank")
        out.append((chosen, rejected, comparison))
    return out


def _group(chosen_len: int, rejected_len: int) -> str:
    if chosen_len > rejected_len:
        return LONGER
    if chosen_len < rejected_len:
        return SHORTER
    return EQUAL


def record_pairs(record: Record, length: LengthFn) -> list[Pair]:
    """The record's implied pairs (:func:`implied_pairs`) with their length group."""
    sizes = {r.id: length(r.content) for r in record.responses}
    return [
        Pair(chosen, rejected, comparison, _group(sizes[chosen], sizes[rejected]))
        for chosen, rejected, comparison in implied_pairs(record)
    ]


def group_codes(pairs: list[Pair]) -> bytes:
    """The pairs' groups as one byte each (the position in :data:`GROUPS`): what the first pass keeps."""
    return bytes(GROUPS.index(p.group) for p in pairs)


@dataclass
class DebiasReport:
    """Group sizes before and after length debiasing."""

    seed: int = 0
    unit: str = "chars"
    records_in: int = 0
    records_out: int = 0
    records_emptied: int = 0  # no pair left (or none to begin with): left out of the output
    records_emptied_examples: list[str] = field(default_factory=list)
    before: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))
    after: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        return {
            "seed": self.seed,
            "unit": self.unit,
            "records_in": self.records_in,
            "records_out": self.records_out,
            "records_with_no_pair_left": self.records_emptied,
            "records_with_no_pair_left_examples": self.records_emptied_examples,
            "pairs_before": dict(self.before),
            "pairs_after": dict(self.after),
            "pairs_dropped": sum(self.before.values()) - sum(self.after.values()),
        }


def survivors(codes: bytes | bytearray, seed: int) -> np.ndarray:
    """Which pairs stay (a bool per pair, in input order), given every pair's group code (:func:`group_codes`).

    The larger of the longer / shorter groups is cut to the size of the smaller by a seeded sample
    of its positions; equal-length pairs all stay.
    """
    groups = np.frombuffer(bytes(codes), dtype=np.int8)
    longer, shorter = (np.flatnonzero(groups == GROUPS.index(g)) for g in (LONGER, SHORTER))
    keep = np.ones(len(groups), dtype=bool)
    if len(longer) != len(shorter):
        big, small = (longer, shorter) if len(longer) > len(shorter) else (shorter, longer)
        chosen = random.Random(seed).sample(range(len(big)), len(small))
        keep[big] = False
        keep[big[np.asarray(chosen, dtype=np.int64)]] = True
    return keep


def count_groups(report: DebiasReport, codes: bytes | bytearray, keep: np.ndarray) -> None:
    """Fill the report's group sizes before and after."""
    groups = np.frombuffer(bytes(codes), dtype=np.int8)
    for i, g in enumerate(GROUPS):
        report.before[g] = int((groups == i).sum())
        report.after[g] = int(((groups == i) & keep).sum())


def debiased_record(record: Record, pairs: list[Pair]) -> Record:
    """The record with exactly ``pairs`` (its surviving implied pairs, in order) as comparisons and the
    ranks they resolve to."""
    new = record.model_copy(update={"comparisons": [p.comparison for p in pairs], "rank": None})
    new = new.model_copy(update={"rank": resolve_record(new).rank})
    got = training_pairs(new)  # the promise of this module: training on the output uses exactly these pairs
    if got != [(p.chosen, p.rejected) for p in pairs]:  # pragma: no cover - an internal invariant
        raise RuntimeError(f"length debias: record '{record.id}' would train on {got}, expected pairs {pairs}")
    return new


def note_emptied(report: DebiasReport, record_id: str) -> None:
    """Count a record with no pair left."""
    report.records_emptied += 1
    if len(report.records_emptied_examples) < 5:
        report.records_emptied_examples.append(record_id)


def length_debias(
    records: list[Record],
    seed: int = 0,
    unit: str = "chars",
    tokenizer: str | Path | None = None,
) -> tuple[list[Record], DebiasReport]:
    """Balance chosen-longer and chosen-shorter pairs by downsampling the larger group (seeded).

    ``unit`` is ``chars`` (default) or ``tokens`` (with ``tokenizer``, a tokenizer folder or hub id).
    This is :func:`debias_step` over the list.
    """
    report = DebiasReport(seed=seed, unit=unit)
    return list(debias_step(Records(records), report, None if tokenizer is None else str(tokenizer))), report


# ---------------------------------------------------------------- the step, in two passes


@lru_cache(maxsize=2)
def _length(unit: str, tokenizer: str | None) -> LengthFn:
    """The length function, built once per process (a tokenizer loads once in each worker)."""
    return length_function(unit, tokenizer)


def pair_codes(unit: str, tokenizer: str | None, record: Record) -> tuple[bytes, bytes]:
    """Pass 1, per record: the digest of its id and the group codes of its pairs (run in the workers)."""
    return key_digest(record.id), group_codes(record_pairs(record, _length(unit, tokenizer)))


def debias_record(folder: str, unit: str, tokenizer: str | None, record: Record) -> tuple[Record | None, str]:
    """Pass 2, per record: the record rebuilt from its survivors saved in ``folder`` (None: no pair left),
    and its id."""
    table, arrays = load_table(folder)
    pairs = record_pairs(record, _length(unit, tokenizer))
    offset = table.get((record.id,))
    kept = [p for p, k in zip(pairs, arrays["keep"][offset : offset + len(pairs)]) if k]
    return (debiased_record(record, kept) if kept else None), record.id


def debias_step(records: Records, report: DebiasReport, tokenizer: str | None = None) -> Iterator[Any]:
    """Length debias over ``records`` (a list, or files read twice), in bounded memory: the output records
    (their lines when streamed from files).

    Pass 1 keeps one byte per pair (its group) and the offset of each record's pairs by id; the
    survivors are drawn (:func:`survivors`); pass 2 rebuilds the records. ``report`` (its seed and unit
    set) is filled in as the outputs pass.
    """
    _length(report.unit, tokenizer)  # a bad unit or tokenizer fails here, before any record is read
    codes, ids, offsets = bytearray(), bytearray(), array("q")
    for digest, mine in records.map(functools.partial(pair_codes, report.unit, tokenizer)):
        ids += digest
        offsets.append(len(codes))
        codes += mine
    report.records_in = len(offsets)
    keep = survivors(codes, report.seed)
    count_groups(report, codes, keep)
    table, repeat, _ = sort_keys(ids, np.frombuffer(offsets, dtype=np.int64) if offsets else np.zeros(0, np.int64))
    if repeat is not None:  # only official pairwise groups can share an id (it comes from their text)
        raise InputError("two records share a prompt id", hint="give every prompt its own id")
    del codes, ids, offsets
    with tempfile.TemporaryDirectory(prefix="cheems-debias-") as folder:
        table.save(folder, keep=keep)
        del table, keep
        for out, record_id in records.step(functools.partial(debias_record, folder, report.unit, tokenizer)):
            if out is None:
                note_emptied(report, record_id)
                continue
            report.records_out += 1
            yield out


def debias_file(
    source: str | Path,
    output: str | Path,
    settings: DebiasSettings | None = None,
    report_json: str | Path | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> tuple[DebiasReport, ReadResult]:
    """:func:`debias_step` from a record file into ``output`` (and its report into ``report_json``), streamed,
    as ``cheems curate debias``: lengths in tokens with a tokenizer, else in characters. The outputs are claimed
    first (:func:`cheems.outputs.claim_outputs`): never ``source``."""
    claim_outputs(inputs=[("IN", source)], files=[("--output", output), ("--report-json", report_json)])
    settings = settings or DebiasSettings()
    report = DebiasReport(seed=settings.seed, unit="tokens" if settings.tokenizer else "chars")
    records = Records([source], skip_invalid=skip_invalid, workers=workers, label="curate debias")
    write_lines_and_report(output, debias_step(records, report, settings.tokenizer), report_json, report.to_dict)
    return report, records.issues
