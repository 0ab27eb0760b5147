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
"label": "a", "source": "rank"}``. A record left with no pair is left out (counted). As DESIGN.md
fixes for ``rank``, a response that no surviving pair mentions sits at rank 1.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cheems.data.schema import Comparison, Record
from cheems.errors import InputError
from cheems.ranking.pairs import training_pairs
from cheems.ranking.resolve import resolve_record

LONGER = "chosen_longer"
SHORTER = "chosen_shorter"
EQUAL = "equal_length"
GROUPS = (LONGER, SHORTER, EQUAL)
UNITS = ("chars", "tokens")

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
        raise InputError("length in tokens needs a tokenizer", field="tokenizer", hint="give --tokenizer PATH")
    return token_counter(tokenizer)


@dataclass
class Pair:
    """One implied (chosen, rejected) pair and the comparison that stands for it in the output."""

    record: int  # index into the input records
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


def downsample(longer: list[Pair], shorter: list[Pair], seed: int) -> tuple[list[Pair], list[Pair]]:
    """Cut the larger list to the size of the smaller: a seeded sample, kept in input order."""
    if len(longer) == len(shorter):
        return longer, shorter
    big, small = (longer, shorter) if len(longer) > len(shorter) else (shorter, longer)
    keep = sorted(random.Random(seed).sample(range(len(big)), len(small)))
    sampled = [big[i] for i in keep]
    return (sampled, shorter) if big is longer else (longer, sampled)


def _rebuild(record: Record, pairs: list[Pair]) -> Record:
    """The record with exactly ``pairs`` as comparisons and the ranks they resolve to."""
    new = record.model_copy(update={"comparisons": [p.comparison for p in pairs], "rank": None})
    return new.model_copy(update={"rank": resolve_record(new).rank})


def length_debias(
    records: list[Record],
    seed: int = 0,
    unit: str = "chars",
    tokenizer: str | Path | None = None,
) -> tuple[list[Record], DebiasReport]:
    """Balance chosen-longer and chosen-shorter pairs by downsampling the larger group (seeded).

    ``unit`` is ``chars`` (default) or ``tokens`` (with ``tokenizer``, a tokenizer folder or hub id).
    """
    length = length_function(unit, tokenizer)
    report = DebiasReport(seed=seed, unit=unit, records_in=len(records))
    pairs: list[Pair] = []
    for index, record in enumerate(records):
        sizes = {r.id: length(r.content) for r in record.responses}
        for chosen, rejected, comparison in implied_pairs(record):
            pairs.append(Pair(index, chosen, rejected, comparison, _group(sizes[chosen], sizes[rejected])))
    by_group = {g: [p for p in pairs if p.group == g] for g in GROUPS}
    longer, shorter = downsample(by_group[LONGER], by_group[SHORTER], seed)
    kept = {id(p) for p in (*longer, *shorter, *by_group[EQUAL])}
    for g in GROUPS:
        report.before[g] = len(by_group[g])
    report.after.update({LONGER: len(longer), SHORTER: len(shorter), EQUAL: len(by_group[EQUAL])})

    survivors: dict[int, list[Pair]] = {}
    for p in pairs:  # input order, so each record's pairs keep their order
        if id(p) in kept:
            survivors.setdefault(p.record, []).append(p)
    out: list[Record] = []
    for index, record in enumerate(records):
        mine = survivors.get(index)
        if not mine:
            report.records_emptied += 1
            if len(report.records_emptied_examples) < 5:
                report.records_emptied_examples.append(record.id)
            continue
        new = _rebuild(record, mine)
        _check_pairs(new, [(p.chosen, p.rejected) for p in mine])
        out.append(new)
    report.records_out = len(out)
    return out, report


def _check_pairs(record: Record, expected: list[tuple[str, str]]) -> None:
    """The promise of this module: training on the output uses exactly the surviving pairs."""
    got = training_pairs(record)
    if got != expected:  # pragma: no cover - an internal invariant, not a user error
        raise RuntimeError(f"length debias: record '{record.id}' would train on {got}, expected {expected}")
