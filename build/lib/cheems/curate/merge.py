"""Merging the human (gold) subset and the processed judge subset (paper part 2.6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cheems.data.schema import Record


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
    """Human records first, then the judge records whose prompt id the human subset lacks.

    Human annotations are the gold standard, so a prompt in both subsets keeps its human record;
    the overlap is reported so that it is never lost silently.
    """
    report = MergeReport(human=len(human), judge=len(judge))
    human_ids = {r.id for r in human}
    merged = list(human)
    for record in judge:
        if record.id in human_ids:
            report.overlap += 1
            if len(report.overlap_examples) < max_examples:
                report.overlap_examples.append(record.id)
            continue
        merged.append(record)
    report.total = len(merged)
    return merged, report
