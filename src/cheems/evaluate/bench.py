"""Benchmark files: subsets named by file stem, ranked records ready to be scored."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from cheems.data.io import ScoreKey
from cheems.data.schema import Record
from cheems.data.stream import PromptIds, Records
from cheems.errors import InputError
from cheems.evaluate.details import FingerprintSpool, fingerprint_entry
from cheems.metrics.bootstrap import Intervals
from cheems.metrics.cheemsbench import GroupMetrics, bare_outcome, length_split, overall, scored_outcome, subset_metrics
from cheems.metrics.compat import Compat, compat_record
from cheems.metrics.outcomes import Outcomes, PromptOutcome
from cheems.models import ScoreCache, Scorer, score_records

SCORE_CHUNK = 4096
"""Responses scored at a time by :func:`score_responses`: enough for a model to fill its length-grouped batches,
few enough that a chunk's records are a few MB."""


def load_bench(
    paths: Sequence[str | Path],
    warnings: list[InputError] | None = None,
    *,
    require_pairs: bool = True,
    check: Callable[[Record], object] | None = None,
) -> dict[str, list[Record]]:
    """Read bench files into ``{subset name: records}``; records without ``rank`` are resolved.

    The subset name is the file stem (``open.jsonl`` -> ``open``). Prompt ids must be unique
    across the files, because a scores file is keyed by (prompt_id, response_id); a record without an
    id is named ``SUBSET/p-…`` from its prompt text, so the same prompt in two files is two prompts.
    ``warnings`` receives a located message for each rank that leaves responses out and each
    file without a ranked pair (left out of ``overall``); when no file has one, nothing can be
    measured and an ``InputError`` is raised before anything is scored (unless not
    ``require_pairs``: scoring alone needs no ranks). ``check`` (picklable): run on each record with its ranks, an
    ``InputError`` it raises names the file and line (a metric's :func:`cheems.metrics.metric_registry.record_check`).
    """
    bench: dict[str, list[Record]] = {}
    warnings = warnings if warnings is not None else []
    for name, file in stream_bench(paths):
        records = list(file.map(ranked if check is None else _Checked(check)))
        warnings.extend(file.issues.warnings)  # this file's, before its own no-pair warning
        if require_pairs and not _has_pair(records):
            warnings.append(_no_pair_warning(name, file.paths[0]))
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
    paths: Sequence[str | Path], *, workers: int | None = 1, label: str | None = None
) -> Iterator[tuple[str, Records]]:
    """Each bench file as ``(subset name, its records)``, in order: :class:`~cheems.data.stream.Records` that
    stream the file a chunk at a time (each file's records must be consumed before the next file's).

    The checks of :func:`load_bench` that need no ranks: subset names (file stems) and prompt ids are
    unique across the files. ``workers`` and ``label`` (a progress bar) as for ``Records``.
    """
    names: set[str] = set()
    # One for all the files: an id written in two files is a duplicate; one derived from the prompt text is
    # the file's own (upstream evaluates each file on its own, and a scores file needs distinct keys).
    ids = PromptIds(scoped=True)
    for p in paths:
        yield _subset_name(p, names), Records([p], workers=workers, label=label, ids=ids)


@dataclass(frozen=True)
class _Checked:
    """:func:`ranked`, then ``check`` of the ranked record (picklable, for the readers' workers)."""

    check: Callable[[Record], object]

    def __call__(self, record: Record) -> Record:
        record = ranked(record)
        self.check(record)
        return record


def ranked(record: Record) -> Record:
    """The record with ranks: resolved from its comparisons when it has none. networkx is imported on first
    use: bench files usually carry ranks, and the workers reading them are ~13 MB smaller without it."""
    if record.rank is not None or not record.comparisons:
        return record
    from cheems.ranking.resolve import resolved

    return resolved(record)[0]


def _has_pair(records: list[Record]) -> bool:
    return any(r.ranked_pairs() for r in records)


def score_responses(
    records: Iterable[Record], scorer: Scorer, cache: ScoreCache | None, chunk: int | None = SCORE_CHUNK
) -> Iterator[tuple[ScoreKey, float]]:
    """Every response's score in record order, scoring ``chunk`` responses at a time (records streamed from
    files: memory bounded by a chunk). ``chunk=None`` scores them all in one call, with a progress bar, so that
    a model's length bucketing spans every record (a bench or a pool in memory); the scores are the same for
    a scorer whose scores do not depend on the batch."""
    if chunk is None:
        yield from score_records(list(records), scorer, cache=cache).items()
        return
    batch: list[Record] = []
    size = 0
    for record in records:
        batch.append(record)
        size += len(record.responses)
        if size >= chunk:
            yield from score_records(batch, scorer, cache=cache, progress=False).items()
            batch, size = [], 0
    if batch:
        yield from score_records(batch, scorer, cache=cache, progress=False).items()


@dataclass
class EvalReport:
    """Metrics of every subset and the overall score, in the eval JSON shape (docs/formats.md).

    ``subsets`` holds the subsets with at least one ranked pair; ``without_pairs`` names the others
    (left out of ``overall``). ``outcomes`` keeps every judged pair of those subsets, as columns (for details
    files, intervals, length diagnostics and plots); ``intervals`` are their bootstrap intervals, once
    :func:`cheems.evaluate.bench.add_intervals` has drawn them. ``unmatched_scores`` are scores of no bench
    response (not used), ``unranked_responses`` counts responses a ``rank`` leaves out, ``checks`` are the
    evaluation's own checks (:func:`cheems.evaluate.checks.run_checks`). Each appears in ``to_dict`` only when
    there is something to report. ``compat``: the rules the metrics follow (:mod:`cheems.metrics.compat`),
    recorded in ``to_dict`` when not strict.
    """

    subsets: dict[str, GroupMetrics]
    outcomes: dict[str, Outcomes] = field(default_factory=dict)
    scorer: str = ""  # what was evaluated: a model, a scores file, a judge model
    judge: dict[str, Any] | None = None  # a generative judge's run: verdict counts, parse failures, consistency
    intervals: Intervals | None = None
    without_pairs: list[str] = field(default_factory=list)
    unmatched_scores: list[ScoreKey] = field(default_factory=list)
    unranked_responses: int = 0
    compat: Compat = "strict"
    checks: list[Any] = field(default_factory=list)  # the evaluation's own checks (cheems.evaluate.checks.Check)

    @property
    def overall(self) -> float:
        return overall(self.subsets)

    def to_dict(self) -> dict[str, Any]:
        """The eval JSON (docs/formats.md): with each subset's and the whole bench's length diagnostics
        (``length``), and with intervals: ``accuracy_ci`` and ``exact_match_ci`` per subset, ``overall_ci``
        and ``bootstrap``."""
        # "metric" says how overall was made, so cheems leaderboard never ranks it beside another metric's
        out: dict[str, Any] = {"metric": "cheems", "subsets": {name: m.to_dict() for name, m in self.subsets.items()}}
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
        if self.checks:
            out["checks"] = [c.to_dict() for c in self.checks]
        return out | compat_record(self.compat, "cheems")


def add_intervals(report: EvalReport, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> EvalReport:
    """Fill ``report.intervals`` with percentile bootstrap intervals over prompts
    (:func:`cheems.metrics.bootstrap.intervals_of`, under the report's ``compat`` rules); returns the report."""
    from cheems.metrics.bootstrap import intervals_of

    outcomes = {name: report.outcomes[name] for name in report.subsets}
    report.intervals = intervals_of(outcomes, report.compat, resamples, seed, level)
    return report


class ScoreLookup(Protocol):
    """Scores as an evaluation looks them up: a prompt's at a time, then the ones never asked for
    (:class:`ScoreMap` in memory, :class:`cheems.data.keytable.ScoreTable` for a scores file)."""

    def get_many(self, prompt_id: str, response_ids: list[str]) -> dict[ScoreKey, float]:
        """The scores of these responses of one prompt that there are (marked used)."""
        ...

    def unused(self) -> list[ScoreKey]:
        """The keys never looked up, in their order."""
        ...


class ScoreMap:
    """A mapping ``{(prompt_id, response_id): score}`` as a :class:`ScoreLookup`."""

    def __init__(self, scores: Mapping[ScoreKey, float]) -> None:
        self.scores = scores
        self.used: set[ScoreKey] = set()

    def get_many(self, prompt_id: str, response_ids: list[str]) -> dict[ScoreKey, float]:
        """The scores of these responses of one prompt that there are (marked used)."""
        found = {key: self.scores[key] for key in ((prompt_id, rid) for rid in response_ids) if key in self.scores}
        self.used.update(found)
        return found

    def unused(self) -> list[ScoreKey]:
        """The keys never looked up, in the mapping's order."""
        return [key for key in self.scores if key not in self.used]


def unmatched_scores(records: Iterable[Record], scores: Mapping[ScoreKey, float]) -> list[ScoreKey]:
    """The keys of ``scores`` that name no response of ``records`` (an unknown prompt or response), in their order:
    they are not used, and ``eval`` and ``bon`` count them."""
    lookup = ScoreMap(scores)
    for r in records:
        lookup.get_many(r.id, [resp.id for resp in r.responses])
    return lookup.unused()


def evaluate_scores(
    bench: Mapping[str, list[Record]],
    scores: Mapping[ScoreKey, float],
    source: str = "scores",
    compat: Compat = "strict",
) -> EvalReport:
    """Compute the metrics of every subset from per-response scores (:func:`evaluate_bench` over the lists).

    A subset without a ranked pair has no accuracy: it is listed in ``without_pairs``, not averaged
    in as 0; a bench where no subset has one is refused (``InputError``).
    """
    subsets = [(name, Records(records)) for name, records in bench.items()]
    return evaluate_bench(subsets, ScoreMap(scores), source, compat=compat)[0]


BenchPrompt = tuple[PromptOutcome, list[str], int, str | None]


def bench_prompt(record: Record, fingerprint: bool = False) -> BenchPrompt:
    """What an evaluation keeps of a record (runs in a worker): its ranks resolved as :func:`load_bench` does,
    its pairs not yet scored, its response ids, unranked responses and its part of the bench fingerprint."""
    record = ranked(record)
    entry = fingerprint_entry(record) if fingerprint else None
    return bare_outcome(record), [r.id for r in record.responses], len(record.unranked()), entry


def evaluate_bench(
    subsets: Iterable[tuple[str, Records]],
    scores: ScoreLookup,
    source: str,
    *,
    fingerprint: bool = False,
    compat: Compat = "strict",
) -> tuple[EvalReport, str | None, list[InputError]]:
    """CheemsBench's metrics of the subsets (:func:`stream_bench` of files, or lists in memory) from per-response
    scores: :func:`bench_prompt` of every record, scored as it passes. Returns the report, the bench fingerprint
    (with ``fingerprint``) and the warnings, as :func:`load_bench` gives them. Only each prompt's judged pairs
    are kept, as columns (:class:`Outcomes`), never its texts, so files are evaluated in bounded memory.
    ``compat``: the rules of the metrics (:func:`cheems.metrics.cheemsbench.exact_prompts`)."""
    warnings: list[InputError] = []
    outcomes: dict[str, Outcomes] = {}
    without: list[str] = []
    places: list[str | Path] = []
    spool = FingerprintSpool() if fingerprint else None
    unranked, missing = 0, None

    def scored(name: str, prompts: Iterator[BenchPrompt]) -> Iterator[PromptOutcome]:
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

    for name, records in subsets:
        place = records.paths[0] if records.streamed else name
        places.append(place)
        table = Outcomes.of(scored(name, records.map(partial(bench_prompt, fingerprint=fingerprint))))
        warnings.extend(records.issues.warnings)  # this file's, before its own no-pair warning
        if table.n_pairs:
            outcomes[name] = table
        else:
            without.append(name)
            warnings.append(_no_pair_warning(name, place))
    if not outcomes:
        raise _no_pair_anywhere(places)
    if missing is not None:
        raise missing
    report = report_from_outcomes(outcomes, without, compat)
    report.scorer = source
    report.unmatched_scores = scores.unused()
    report.unranked_responses = unranked
    return report, spool.hexdigest() if spool is not None else None, warnings


def report_from_outcomes(
    outcomes: Mapping[str, Sequence[PromptOutcome]], without_pairs: Sequence[str] = (), compat: Compat = "strict"
) -> EvalReport:
    """The metrics of every subset from its judged pairs (any scorer: a reward model or a judge), under the
    ``compat`` rules."""
    tables = {name: Outcomes.of(prompts) for name, prompts in outcomes.items()}
    return EvalReport(
        subsets={name: subset_metrics(table, compat) for name, table in tables.items()},
        outcomes=tables,
        without_pairs=list(without_pairs),
        compat=compat,
    )
