"""Benchmark files: subsets named by file stem, ranked records ready to be scored."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from cheems.data.io import ReadResult, ScoreKey
from cheems.data.keytable import ScoreTable
from cheems.data.schema import Record
from cheems.data.stream import PromptIds, same_record, stream_records
from cheems.errors import InputError
from cheems.evaluate.details import FingerprintSpool, fingerprint_entry
from cheems.evaluate.metrics import (
    GroupMetrics,
    bare_outcome,
    length_split,
    overall,
    prompt_outcome,
    scored_outcome,
    subset_metrics,
)
from cheems.evaluate.outcomes import Outcomes, PromptOutcome
from cheems.models import ScoreCache, Scorer, score_records

T = TypeVar("T")

SCORE_CHUNK = 4096
"""Responses scored at a time by :func:`score_stream`: enough for a model to fill its length-grouped batches,
few enough that a chunk's records are a few MB."""


def load_bench(
    paths: Sequence[str | Path], warnings: list[InputError] | None = None, *, require_pairs: bool = True
) -> dict[str, list[Record]]:
    """Read bench files into ``{subset name: records}``; records without ``rank`` are resolved.

    The subset name is the file stem (``open.jsonl`` -> ``open``). Prompt ids must be unique
    across the files, because a scores file is keyed by (prompt_id, response_id).
    ``warnings`` receives a located message for each rank that leaves responses out and each
    file without a ranked pair (left out of ``overall``); when no file has one, nothing can be
    measured and an ``InputError`` is raised before anything is scored (unless not
    ``require_pairs``: scoring alone needs no ranks).
    """
    bench: dict[str, list[Record]] = {}
    warnings = warnings if warnings is not None else []
    issues = ReadResult()
    for (name, read), p in zip(stream_bench(paths, same_record, issues), paths):
        records = list(read)
        warnings.extend(issues.warnings)  # this file's, before its own no-pair warning
        issues.warnings.clear()
        needs_ranks = [r for r in records if r.rank is None and r.comparisons]
        if needs_ranks:
            resolved = {r.id: r for r in _resolved(needs_ranks)}
            records = [resolved.get(r.id, r) for r in records]
        if require_pairs and not _has_pair(records):
            warnings.append(_no_pair_warning(name, p))
        bench[name] = records
    if require_pairs and not any(_has_pair(records) for records in bench.values()):
        raise _no_pair_anywhere(paths)
    return bench


_PAIR_HINT = "give responses a rank with at least two levels, or comparisons that are not all ties"


def _no_pair_warning(name: str, path: str | Path) -> InputError:
    return InputError(
        f"no prompt has a ranked pair (two responses with different ranks); subset '{name}' is left out of overall",
        path=str(path),
        hint=_PAIR_HINT,
    )


def _no_pair_anywhere(paths: Sequence[str | Path]) -> InputError:
    return InputError(
        "no prompt in any bench file has a ranked pair (two responses with different ranks)",
        path=", ".join(map(str, paths)),
        hint=_PAIR_HINT,
    )


def _subset_name(p: str | Path, names: set[str]) -> str:
    name = Path(p).stem
    if name in names:
        raise InputError(
            f"two bench files are both named '{name}'", path=str(p), hint="rename one: the file stem names the subset"
        )
    names.add(name)
    return name


def stream_bench(
    paths: Sequence[str | Path],
    fn: Callable[[Record], T],
    issues: ReadResult,
    *,
    workers: int | None = 1,
    progress: str | None = None,
) -> Iterator[tuple[str, Iterator[T]]]:
    """Each bench file as ``(subset name, fn(record) of its records)``, in order, read a chunk at a time (each
    file's records must be consumed before the next file's).

    The checks of :func:`load_bench` that need no ranks: subset names (file stems) and prompt ids are
    unique across the files. ``fn`` runs in worker processes (see :func:`cheems.data.stream.stream_records`);
    the files' warnings go to ``issues``.
    """
    names: set[str] = set()
    ids = PromptIds()  # one for all the files: a prompt id in two files is a duplicate
    for p in paths:
        name = _subset_name(p, names)
        yield name, stream_records(p, fn, issues=issues, workers=workers, progress=progress, ids=ids)


def _resolved(records: list[Record]) -> list[Record]:
    """Records ranked from their comparisons. networkx is imported on first use: bench files usually carry
    ranks, and the workers reading them are ~13 MB smaller without it."""
    from cheems.ranking import resolve_file_records

    return resolve_file_records(records)[0]


def _has_pair(records: list[Record]) -> bool:
    return any(r.ranked_pairs() for r in records)


def score_bench(bench: dict[str, list[Record]], scorer: Scorer, cache: ScoreCache | None) -> dict[ScoreKey, float]:
    """Score every response of every subset in one call (so length bucketing spans the whole bench)."""
    return score_records([r for records in bench.values() for r in records], scorer, cache=cache)


def score_stream(
    records: Iterable[Record], scorer: Scorer, cache: ScoreCache | None, chunk: int | None = None
) -> Iterator[tuple[ScoreKey, float]]:
    """Every response's score in record order, scoring ``chunk`` responses at a time (the same scores as
    :func:`score_bench` for a scorer whose scores do not depend on the batch)."""
    batch: list[Record] = []
    size = 0
    for record in records:
        batch.append(record)
        size += len(record.responses)
        if size >= (chunk or SCORE_CHUNK):
            yield from score_records(batch, scorer, cache=cache, progress=False).items()
            batch, size = [], 0
    if batch:
        yield from score_records(batch, scorer, cache=cache, progress=False).items()


Interval = tuple[float, float]


@dataclass
class SubsetIntervals:
    """A subset's accuracy and exact match intervals."""

    accuracy: Interval
    exact_match: Interval


@dataclass
class Intervals:
    """Bootstrap intervals of an evaluation and how they were drawn."""

    resamples: int
    seed: int
    level: float
    subsets: dict[str, SubsetIntervals]
    overall: Interval

    def settings(self) -> dict:
        """``{"resamples", "seed", "level"}``: what reproduces these intervals."""
        return {"resamples": self.resamples, "seed": self.seed, "level": self.level}


@dataclass
class EvalReport:
    """Metrics of every subset and the overall score, in the eval JSON shape (docs/formats.md).

    ``subsets`` holds the subsets with at least one ranked pair; ``without_pairs`` names the others
    (left out of ``overall``). ``outcomes`` keeps every judged pair of those subsets, as columns (for details
    files, intervals, length diagnostics and plots); ``intervals`` are their bootstrap intervals, once
    :func:`cheems.evaluate.significance.add_intervals` has drawn them. ``unmatched_scores`` are scores of no bench
    response (not used), ``unranked_responses`` counts responses a ``rank`` leaves out. Each
    appears in ``to_dict`` only when there is something to report.
    """

    subsets: dict[str, GroupMetrics]
    outcomes: dict[str, Outcomes] = field(default_factory=dict)
    scorer: str = ""  # what was evaluated: a model, a scores file, a judge model
    judge: dict | None = None  # a generative judge's run: verdict counts, parse failures, consistency
    intervals: Intervals | None = None
    without_pairs: list[str] = field(default_factory=list)
    unmatched_scores: list[ScoreKey] = field(default_factory=list)
    unranked_responses: int = 0

    @property
    def overall(self) -> float:
        return overall(self.subsets)

    def to_dict(self) -> dict:
        """The eval JSON (docs/formats.md): with each subset's and the whole bench's length diagnostics
        (``length``), and with intervals: ``accuracy_ci`` and ``exact_match_ci`` per subset, ``overall_ci``
        and ``bootstrap``."""
        # "metric" says how overall was made, so cheems leaderboard never ranks it beside another metric's
        out: dict = {"metric": "cheems", "subsets": {name: m.to_dict() for name, m in self.subsets.items()}}
        out["overall"] = self.overall
        for name, outcomes in self.outcomes.items():
            out["subsets"][name]["length"] = length_split(outcomes)
        if self.intervals is not None:
            for name, ci in self.intervals.subsets.items():
                out["subsets"][name] |= {"accuracy_ci": list(ci.accuracy), "exact_match_ci": list(ci.exact_match)}
            out |= {"overall_ci": list(self.intervals.overall), "bootstrap": self.intervals.settings()}
        out["length"] = length_split(*self.outcomes.values())
        if self.scorer:
            out["scorer"] = self.scorer
        if self.judge is not None:
            out["judge"] = self.judge
        if self.without_pairs:
            out["subsets_without_pairs"] = self.without_pairs
        if self.unmatched_scores:
            out["unmatched_scores"] = len(self.unmatched_scores)
        if self.unranked_responses:
            out["unranked_responses"] = self.unranked_responses
        return out


def unmatched_scores(records: Iterable[Record], scores: Iterable[ScoreKey]) -> list[ScoreKey]:
    """The keys of ``scores`` that name no response of ``records`` (an unknown prompt or response), in their order:
    they are not used, and ``eval`` and ``bon`` count them."""
    known = {(r.id, resp.id) for r in records for resp in r.responses}
    return [key for key in scores if key not in known]


def evaluate(bench: dict[str, list[Record]], scores: dict[ScoreKey, float], source: str = "scores") -> EvalReport:
    """Compute the metrics of every subset from per-response scores.

    A subset without a ranked pair has no accuracy: it is listed in ``without_pairs``, not averaged
    in as 0 (``load_bench`` refuses a bench where no subset has one).
    """
    outcomes = {
        name: [prompt_outcome(r, scores, source) for r in records]
        for name, records in bench.items()
        if _has_pair(records)
    }
    report = report_from_outcomes(outcomes, [name for name in bench if name not in outcomes])
    report.scorer = source
    report.unmatched_scores = unmatched_scores([r for records in bench.values() for r in records], scores)
    report.unranked_responses = sum(len(r.unranked()) for records in bench.values() for r in records)
    return report


def _bench_prompt(record: Record, fingerprint: bool) -> tuple[PromptOutcome, list[str], int, str | None]:
    """What an evaluation keeps of a record (runs in a worker): its ranks resolved as :func:`load_bench` does,
    its pairs not yet scored, its response ids, unranked responses and its part of the bench fingerprint."""
    if record.rank is None and record.comparisons:
        record = _resolved([record])[0]
    entry = fingerprint_entry(record) if fingerprint else None
    return bare_outcome(record), [r.id for r in record.responses], len(record.unranked()), entry


def evaluate_stream(
    paths: Sequence[str | Path], scores: ScoreTable, source: str, *, workers: int | None = 1, fingerprint: bool = False
) -> tuple[EvalReport, str | None, list[InputError]]:
    """:func:`evaluate` of ``load_bench(paths)`` with a scores file, reading the bench a chunk at a time: the
    report, the bench fingerprint (with ``fingerprint``) and the warnings, as the in-memory functions give them.
    Only each prompt's judged pairs are kept, as columns (:class:`Outcomes`), never its texts."""
    issues = ReadResult()
    outcomes: dict[str, Outcomes] = {}
    without: list[str] = []
    spool = FingerprintSpool() if fingerprint else None
    unranked, missing = 0, None

    def scored(
        name: str, prompts: Iterator[tuple[PromptOutcome, list[str], int, str | None]]
    ) -> Iterator[PromptOutcome]:
        nonlocal unranked, missing
        for outcome, response_ids, left_out, entry in prompts:
            unranked += left_out
            if spool is not None:
                assert entry is not None  # made whenever there is a spool
                spool.add(name, entry)
            found = scores.get_many(outcome.prompt_id, response_ids)  # every response's score is used, as in evaluate
            if outcome.pairs and missing is None:  # a missing score is raised after the bench's own errors
                try:
                    scored_outcome(outcome, found, source)
                except InputError as e:
                    missing = e
            yield outcome

    files = stream_bench(paths, partial(_bench_prompt, fingerprint=fingerprint), issues, workers=workers)
    for (name, prompts), path in zip(files, paths):
        table = Outcomes.of(scored(name, prompts))
        if table.n_pairs:
            outcomes[name] = table
        else:
            without.append(name)
            issues.warnings.append(_no_pair_warning(name, path))
    if not outcomes:
        raise _no_pair_anywhere(paths)
    if missing is not None:
        raise missing
    report = report_from_outcomes(outcomes, without)
    report.scorer = source
    report.unmatched_scores = scores.unused()
    report.unranked_responses = unranked
    return report, spool.hexdigest() if spool is not None else None, issues.warnings


def report_from_outcomes(
    outcomes: Mapping[str, Sequence[PromptOutcome]], without_pairs: Sequence[str] = ()
) -> EvalReport:
    """The metrics of every subset from its judged pairs (any scorer: a reward model or a judge)."""
    tables = {name: Outcomes.of(prompts) for name, prompts in outcomes.items()}
    return EvalReport(
        subsets={name: subset_metrics(table) for name, table in tables.items()},
        outcomes=tables,
        without_pairs=list(without_pairs),
    )
