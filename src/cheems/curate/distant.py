"""Distant supervision (paper part 2.4): drop the judge comparisons a gold-trained RM disagrees with.

Definitions (``s`` = the RM's score of a response, ``margin`` >= 0):

- A preference comparison (label ``a`` or ``b``) with winner ``w`` and loser ``l`` is **kept iff
  s(w) - s(l) > -margin**. At the default margin 0 that is "the RM scores the winner strictly
  higher": a score tie counts as disagreement, as in the benchmark metrics. With margin X the
  comparison is dropped only when the RM prefers the loser by at least X (s(l) - s(w) >= X).
- A tie comparison is **kept iff |s(a) - s(b)| <= margin**: at margin 0 only when the scores are
  exactly equal.
- Only comparisons whose ``source`` is in ``sources`` are filtered (default: ``judge``); the others
  (human annotations) pass untouched. ``sources=None`` filters every comparison.

At margin 0, with every comparison filtered, the kept strict preferences all follow one total
order (the scores), so each prompt's strict-preference graph is acyclic. A margin above 0 or
untouched human comparisons can leave cycles; they are counted, and Algorithm 1 (which merges
cycles) still resolves every record to ranks.

A record that loses a comparison (or has none and no rank yet) gets ``rank`` re-resolved with
Algorithm 1; a record whose comparisons all survive keeps the rank it has. A record left with no
comparison at all has nothing to train on and is left out of the output (counted in the report).

:func:`distant_step` runs :func:`distant_record` over :class:`~cheems.data.stream.Records` (a list, or
files streamed, with a scores file in a compact :class:`~cheems.data.keytable.KeyTable`);
:func:`distant_supervision` is that step over a list.
"""

from __future__ import annotations

import contextlib
import functools
import math
import tempfile
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Union, cast

import networkx as nx
from pydantic import Field

from cheems.data.io import ReadResult, ScoreKey, write_lines_and_report
from cheems.data.keytable import KeyTable, load_table, read_score_table
from cheems.data.schema import Comparison, Record
from cheems.data.stream import Records
from cheems.errors import InputError
from cheems.outputs import claim_outputs
from cheems.ranking.resolve import ResolveStats, conflict_stats, resolve_record
from cheems.settings import Cli, Settings

UNSPECIFIED_SOURCE = "(none)"  # how a comparison without ``source`` is counted in the report


class DistantSettings(Settings):
    """Which comparisons distant supervision filters, and how sure the RM must be (``cheems curate distant``,
    a recipe's ``distant:``)."""

    margin: float = Field(
        0.0,
        ge=0,
        description="Drop a comparison only when the RM prefers the loser by at least this much (0: whenever "
        "it does not prefer the winner).",
    )
    sources: Annotated[list[str], Cli("--source")] = Field(
        default_factory=lambda: ["judge"], description="Comparison sources to filter (default: judge); repeat for more."
    )
    all_sources: Annotated[bool, Cli(flag=True)] = Field(
        False, description="Filter comparisons of every source, human ones too."
    )

    @property
    def filtered(self) -> list[str] | None:
        """The sources whose comparisons are filtered; None: every source."""
        return None if self.all_sources else self.sources


def keep_comparison(c: Comparison, score_a: float, score_b: float, margin: float = 0.0) -> bool:
    """Whether the RM's scores of ``c.a`` and ``c.b`` let the comparison stay (see the module doc)."""
    if c.label == "tie":
        return abs(score_a - score_b) <= margin
    winner, loser = (score_a, score_b) if c.label == "a" else (score_b, score_a)
    return winner - loser > -margin


def is_acyclic(record: Record) -> bool:
    """Whether the record's strict preferences (winner -> loser, ties left out) form no cycle."""
    graph = nx.DiGraph()
    for c in record.comparisons:
        outcome = c.winner_loser()
        if outcome is not None and c.a != c.b:
            graph.add_edge(*outcome)
    return cast("bool", nx.is_directed_acyclic_graph(graph))


@dataclass
class SourceCounts:
    """Comparisons of one source before and after."""

    before: int = 0
    kept: int = 0

    @property
    def dropped(self) -> int:
        return self.before - self.kept


@dataclass
class DistantReport:
    """What distant supervision kept and dropped, and the conflict ratio before and after."""

    margin: float = 0.0
    sources: list[str] | None = None  # None: every source was filtered
    records_in: int = 0
    records_out: int = 0
    by_source: dict[str, SourceCounts] = field(default_factory=dict)
    records_emptied: int = 0  # lost every comparison: left out of the output
    records_emptied_examples: list[str] = field(default_factory=list)
    records_cyclic: int = 0  # strict-preference graph not acyclic after filtering
    records_cyclic_examples: list[str] = field(default_factory=list)
    conflicts_before: ResolveStats = field(default_factory=ResolveStats)
    conflicts_after: ResolveStats = field(default_factory=ResolveStats)

    @property
    def comparisons_before(self) -> int:
        return sum(c.before for c in self.by_source.values())

    @property
    def comparisons_kept(self) -> int:
        return sum(c.kept for c in self.by_source.values())

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        return {
            "margin": self.margin,
            "sources": self.sources if self.sources is not None else "all",
            "records_in": self.records_in,
            "records_out": self.records_out,
            "comparisons_before": self.comparisons_before,
            "comparisons_kept": self.comparisons_kept,
            "comparisons_dropped": self.comparisons_before - self.comparisons_kept,
            "by_source": {
                s: {"before": c.before, "kept": c.kept, "dropped": c.dropped} for s, c in sorted(self.by_source.items())
            },
            "records_with_no_comparison_left": self.records_emptied,
            "records_with_no_comparison_left_examples": self.records_emptied_examples,
            "records_not_acyclic": self.records_cyclic,
            "records_not_acyclic_examples": self.records_cyclic_examples,
            "conflict_ratio_before": self.conflicts_before.conflict_ratio,
            "conflict_ratio_after": self.conflicts_after.conflict_ratio,
            "conflicts_before": self.conflicts_before.to_dict(),
            "conflicts_after": self.conflicts_after.to_dict(),
        }


ScoreLookup = Union[Mapping[ScoreKey, float], KeyTable]  # .get((prompt_id, response_id)) -> score or None


def _score(scores: ScoreLookup, record: Record, rid: str, scores_path: str | None) -> float:
    value = scores.get((record.id, rid))
    if value is None:
        raise InputError(
            f"no score for prompt '{record.id}' response '{rid}'",
            path=scores_path,
            hint="score every response of the records (cheems score) with the RM",
        )
    if math.isnan(value):
        raise InputError(
            f"the score of prompt '{record.id}' response '{rid}' is NaN",
            path=scores_path,
            hint="rescore it; a NaN cannot be compared",
        )
    return value


@dataclass
class RecordDistant:
    """What distant supervision did to one record (its part of the report)."""

    record_id: str
    by_source: dict[str, list[int]]  # source -> [before, kept]
    before: ResolveStats
    after: ResolveStats | None  # None: no comparison left, the record is left out
    cyclic: bool = False


def _filter_record(
    record: Record, scores: ScoreLookup, margin: float, sources: Collection[str] | None, scores_path: str | None
) -> tuple[list[Comparison], dict[str, list[int]]]:
    kept: list[Comparison] = []
    by_source: dict[str, list[int]] = {}
    for c in record.comparisons:
        counts = by_source.setdefault(c.source or UNSPECIFIED_SOURCE, [0, 0])
        counts[0] += 1
        if sources is None or c.source in sources:
            s_a = _score(scores, record, c.a, scores_path)
            s_b = _score(scores, record, c.b, scores_path)
            if not keep_comparison(c, s_a, s_b, margin):
                continue
        counts[1] += 1
        kept.append(c)
    return kept, by_source


def distant_record(
    record: Record,
    scores: ScoreLookup,
    margin: float = 0.0,
    sources: Collection[str] | None = ("judge",),
    scores_path: str | None = None,
) -> tuple[Record | None, RecordDistant]:
    """One record without the comparisons the RM disagrees with, its ranks resolved again (None when no
    comparison is left), and what was done (see :func:`distant_supervision`)."""
    before = conflict_stats([record])
    if not record.comparisons:  # nothing to filter: a rank-only record passes as it is
        return record, RecordDistant(record.id, {}, before, before)
    kept, by_source = _filter_record(record, scores, margin, sources, scores_path)
    if not kept:
        return None, RecordDistant(record.id, by_source, before, None)
    changed = len(kept) != len(record.comparisons)
    new = record.model_copy(update={"comparisons": kept}) if changed else record
    cyclic = not is_acyclic(new)
    if changed or not new.rank:
        new = new.model_copy(update={"rank": resolve_record(new).rank})
    return new, RecordDistant(record.id, by_source, before, conflict_stats([new]), cyclic)


def add_to_report(report: DistantReport, outcome: RecordDistant) -> None:
    """Count one record's outcome (examples in input order)."""
    report.records_in += 1
    for source, (before, kept) in outcome.by_source.items():
        counts = report.by_source.setdefault(source, SourceCounts())
        counts.before += before
        counts.kept += kept
    report.conflicts_before += outcome.before
    if outcome.after is None:
        report.records_emptied += 1
        _note(report.records_emptied_examples, outcome.record_id)
        return
    report.records_out += 1
    report.conflicts_after += outcome.after
    if outcome.cyclic:
        report.records_cyclic += 1
        _note(report.records_cyclic_examples, outcome.record_id)


def _note(examples: list[str], prompt_id: str, limit: int = 5) -> None:
    if len(examples) < limit:
        examples.append(prompt_id)


def new_report(margin: float, sources: Iterable[str] | None) -> tuple[DistantReport, frozenset[str] | None]:
    """An empty report and the set of sources to filter (None: all), after checking the margin."""
    if margin < 0:
        raise InputError(f"must be at least 0, got {margin}", path="--margin", hint="e.g. --margin 0.5")
    wanted = None if sources is None else frozenset(sources)
    return DistantReport(margin=margin, sources=None if wanted is None else sorted(wanted)), wanted


def distant_supervision(
    records: list[Record],
    scores: ScoreLookup | str | Path,
    margin: float = 0.0,
    sources: Iterable[str] | None = ("judge",),
    *,
    scores_path: str | None = None,
) -> tuple[list[Record], DistantReport]:
    """Drop the comparisons the RM's ``scores`` disagree with, then resolve ranks (Algorithm 1).

    ``scores`` maps ``(prompt_id, response_id)`` to the RM's score (a dict, or a
    :class:`~cheems.data.keytable.KeyTable`), or is a scores file; a missing score for a response named
    by a filtered comparison is an ``InputError`` (naming ``scores_path``). ``sources=None`` filters
    comparisons of every source. See the module docstring for the exact keep rules. This is
    :func:`distant_step` over the list.
    """
    out, report = distant_step(Records(records), scores, margin, sources, scores_path=scores_path)
    return list(out), report


def distant_step(
    records: Records,
    scores: ScoreLookup | str | Path,
    margin: float = 0.0,
    sources: Iterable[str] | None = ("judge",),
    *,
    scores_path: str | None = None,
) -> tuple[Iterator[Any], DistantReport]:
    """:func:`distant_record` over ``records``: the kept records (their lines when streamed from files), and
    the report they fill in as they pass.

    A scores file is read first (every error of a scores file comes before any record is read) into a
    compact table, which the worker processes map from a temporary folder.
    """
    report, wanted = new_report(margin, sources)
    if isinstance(scores, (str, Path)):
        scores_path, scores = str(scores), read_score_table(scores)
    return _distant_outputs(records, scores, report, margin, wanted, scores_path), report


def distant_or_error(
    scores: ScoreLookup | str, margin: float, sources: frozenset[str] | None, scores_path: str | None, record: Record
) -> tuple[Record | None, RecordDistant | InputError]:
    """:func:`distant_record` with ``scores`` (or the table saved in that folder, in the workers). A missing
    score comes back as the error, so that ``--skip-invalid`` cannot skip the record."""
    lookup = load_table(scores)[0] if isinstance(scores, str) else scores
    try:
        return distant_record(record, lookup, margin, sources, scores_path)
    except InputError as e:
        return None, e


def _distant_outputs(
    records: Records,
    scores: ScoreLookup,
    report: DistantReport,
    margin: float,
    sources: frozenset[str] | None,
    scores_path: str | None,
) -> Iterator[Any]:
    with contextlib.ExitStack() as stack:
        lookup: ScoreLookup | str = scores
        if isinstance(scores, KeyTable):  # mapped by the workers, not pickled to them
            lookup = stack.enter_context(tempfile.TemporaryDirectory(prefix="cheems-distant-"))
            scores.save(lookup)
        del scores
        for out, outcome in records.step(functools.partial(distant_or_error, lookup, margin, sources, scores_path)):
            if isinstance(outcome, InputError):
                raise outcome
            add_to_report(report, outcome)
            if out is not None:
                yield out


def source_counts(records: Iterable[Record]) -> Counter[str]:
    """How many comparisons each source has (``(none)`` for comparisons without one)."""
    return Counter(c.source or UNSPECIFIED_SOURCE for r in records for c in r.comparisons)


def distant_file(
    source: str | Path,
    output: str | Path,
    scores: str | Path,
    settings: DistantSettings | None = None,
    report_json: str | Path | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> tuple[DistantReport, ReadResult]:
    """:func:`distant_step` from a record file and a scores file into ``output`` (and its report into
    ``report_json``), streamed, as ``cheems curate distant --scores``: the report and the lines skipped. The outputs
    are claimed first (:func:`cheems.outputs.claim_outputs`): never ``source`` nor ``scores``."""
    claim_outputs(
        inputs=[("IN", source), ("--scores", scores)], files=[("--output", output), ("--report-json", report_json)]
    )
    settings = settings or DistantSettings()
    records = Records([source], skip_invalid=skip_invalid, workers=workers, label="curate distant")
    lines, report = distant_step(records, scores, settings.margin, settings.filtered)
    write_lines_and_report(output, lines, report_json, report.to_dict)
    return report, records.issues
