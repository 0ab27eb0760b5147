"""Benchmark files: subsets named by file stem, ranked records ready to be scored."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cheems.data.io import ScoreKey, read_records
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.models import ScoreCache, Scorer, score_records
from cheems.evaluate.metrics import GroupMetrics, overall, prompt_outcome, subset_metrics
from cheems.ranking import resolve_file_records


def load_bench(paths: list[str | Path]) -> dict[str, list[Record]]:
    """Read bench files into ``{subset name: records}``; records without ``rank`` are resolved.

    The subset name is the file stem (``open.jsonl`` -> ``open``). Prompt ids must be unique
    across the files, because a scores file is keyed by (prompt_id, response_id).
    """
    bench: dict[str, list[Record]] = {}
    owner: dict[str, str] = {}
    for p in paths:
        name = Path(p).stem
        if name in bench:
            raise InputError(f"two bench files are both named '{name}'", path=str(p), hint="rename one: the file stem names the subset")
        records = read_records(p).records
        for r in records:
            if r.id in owner:
                raise InputError(f"prompt id '{r.id}' is also in {owner[r.id]}", path=str(p), field="id",
                                 hint="prompt ids must be unique across bench files")
            owner[r.id] = str(p)
        needs_ranks = [r for r in records if r.rank is None and r.comparisons]
        if needs_ranks:
            resolved = {r.id: r for r in resolve_file_records(needs_ranks)[0]}
            records = [resolved.get(r.id, r) for r in records]
        bench[name] = records
    return bench


def score_bench(bench: dict[str, list[Record]], scorer: Scorer, cache: ScoreCache | None) -> dict[ScoreKey, float]:
    """Score every response of every subset in one call (so length bucketing spans the whole bench)."""
    return score_records([r for records in bench.values() for r in records], scorer, cache=cache)


@dataclass
class EvalReport:
    """Metrics of every subset and the overall score, in DESIGN.md's JSON shape."""

    subsets: dict[str, GroupMetrics]

    @property
    def overall(self) -> float:
        return overall(self.subsets)

    def to_dict(self) -> dict:
        return {"subsets": {name: m.to_dict() for name, m in self.subsets.items()}, "overall": self.overall}


def evaluate(bench: dict[str, list[Record]], scores: dict[ScoreKey, float], source: str = "scores") -> EvalReport:
    """Compute the metrics of every subset from per-response scores."""
    return EvalReport(
        subsets={name: subset_metrics([prompt_outcome(r, scores, source) for r in records]) for name, records in bench.items()}
    )
