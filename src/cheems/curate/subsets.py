"""Merging the human (gold) subset and the processed judge subset (paper part 2.6)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cheems.data.io import record_line
from cheems.data.schema import Record
from cheems.data.stream import Records


@dataclass
class MergeReport:
    """How many records came from each subset, and the prompt ids both had."""

    human: int = 0
    judge: int = 0
    overlap: int = 0  # prompt ids in both subsets: the human record is kept
    overlap_examples: list[str] = field(default_factory=list)
    total: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        return {
            "human": self.human,
            "judge_kept": self.judge - self.overlap,
            "judge": self.judge,
            "overlap": self.overlap,
            "overlap_examples": self.overlap_examples,
            "total": self.total,
        }


def merge_subsets(human: list[Record], judge: list[Record], max_examples: int = 5) -> tuple[list[Record], MergeReport]:
    """Human records first, then the judge records whose prompt id the human subset lacks
    (:func:`merge_step` over the list).

    Human annotations are the gold standard, so a prompt in both subsets keeps its human record;
    the overlap is reported so that it is never lost silently.
    """
    report = MergeReport()
    return list(merge_step(human, Records(judge), report, max_examples)), report


def with_id(record: Record) -> tuple[Record, str]:
    """The record kept as it is, with its id (the merge's per-record step)."""
    return record, record.id


def merge_step(human: list[Record], judge: Records, report: MergeReport, max_examples: int = 5) -> Iterator[Any]:
    """:func:`merge_subsets` with the judge subset streamed from files (the outputs are then lines)."""
    report.human = len(human)
    human_ids = {r.id for r in human}
    yield from map(record_line, human) if judge.streamed else human
    for out, record_id in judge.step(with_id):
        report.judge += 1
        if record_id in human_ids:
            report.overlap += 1
            if len(report.overlap_examples) < max_examples:
                report.overlap_examples.append(record_id)
            continue
        yield out
    report.total = report.human + report.judge - report.overlap
