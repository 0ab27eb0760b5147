"""Algorithm 1 of the paper: comparisons -> preference graph -> merged cycles -> layered ranks.

Merging every cycle into a super-node until the graph is acyclic is the same as condensing
strongly connected components; ranking by layered topological sort is the same as
topological generations of the condensation (rank 1 = the first layer, the responses that
nothing beats). A tie adds edges both ways, so tied responses fall into one component.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from cheems.data.dataset_stats import Counts, record_counts
from cheems.data.io import ReadResult, write_lines_and_report
from cheems.data.schema import Comparison, Record
from cheems.data.stream import Records
from cheems.errors import InputError
from cheems.outputs import claim_outputs


def preference_graph(record: Record) -> nx.DiGraph:
    """Directed graph over all responses: an edge winner -> loser per comparison, both ways for a tie."""
    graph = nx.DiGraph()
    graph.add_nodes_from(r.id for r in record.responses)
    for c in record.comparisons:
        if c.a == c.b:
            continue  # a self-comparison says nothing about order; it is still counted in the conflict ratio
        outcome = c.winner_loser()
        if outcome is None:
            graph.add_edge(c.a, c.b)
            graph.add_edge(c.b, c.a)
        else:
            graph.add_edge(*outcome)
    return graph


def layered_ranks(graph: nx.DiGraph) -> dict[str, int]:
    """Condense cycles, then rank by topological generation (1 = top layer)."""
    condensed = nx.condensation(graph)
    rank: dict[str, int] = {}
    for layer, nodes in enumerate(nx.topological_generations(condensed), start=1):
        for node in nodes:
            for member in condensed.nodes[node]["members"]:
                rank[member] = layer
    return rank


def agrees(c: Comparison, rank: dict[str, int]) -> bool:
    """Whether one comparison agrees with the ranks (a tie agrees iff both share a rank)."""
    outcome = c.winner_loser()
    if outcome is None:
        return rank[c.a] == rank[c.b]
    winner, loser = outcome
    return rank[winner] < rank[loser]


@dataclass
class Resolution:
    """Ranks resolved for one record, with its conflicts."""

    rank: dict[str, int]
    comparisons: int
    conflicts: int
    unmentioned: list[str] = field(default_factory=list)


def resolve_record(record: Record) -> Resolution:
    """Resolve a record's comparisons into consecutive ranks (Algorithm 1) and count conflicts.

    Responses that no comparison mentions land in the top layer, as in the paper; they are
    listed in ``unmentioned`` so callers can warn.
    """
    layers = layered_ranks(preference_graph(record))
    # in response order: a cycle's members come out of a set, whose order changes with PYTHONHASHSEED
    rank = {r.id: layers[r.id] for r in record.responses if r.id in layers}
    mentioned = {c.a for c in record.comparisons} | {c.b for c in record.comparisons}
    conflicts = sum(not agrees(c, rank) for c in record.comparisons)
    unmentioned = [r.id for r in record.responses if r.id not in mentioned]
    return Resolution(rank=rank, comparisons=len(record.comparisons), conflicts=conflicts, unmentioned=unmentioned)


@dataclass
class ResolveStats:
    """Conflict statistics pooled over a file (the paper's Table 5)."""

    records: int = 0
    comparisons: int = 0
    conflicts: int = 0

    @property
    def conflict_ratio(self) -> float:
        """Share of comparisons that disagree with the resolved ranks (0 when there are none)."""
        return self.conflicts / self.comparisons if self.comparisons else 0.0

    def __iadd__(self, other: "ResolveStats") -> "ResolveStats":
        self.records += other.records
        self.comparisons += other.comparisons
        self.conflicts += other.conflicts
        return self

    def add(self, res: Resolution | None) -> None:
        """Count one record by its resolution (None: it had nothing to resolve)."""
        self.records += 1
        if res is not None:
            self.comparisons += res.comparisons
            self.conflicts += res.conflicts

    def to_dict(self) -> dict[str, float | int]:
        return {
            "records": self.records,
            "comparisons": self.comparisons,
            "conflicts": self.conflicts,
            "conflict_ratio": self.conflict_ratio,
        }


def conflict_stats(records: list[Record]) -> ResolveStats:
    """The pooled conflict statistics (Table 5) of resolving ``records``, which are left as they are."""
    stats = ResolveStats()
    for record in records:
        stats.add(resolved(record)[1])
    return stats


def record_stats(record: Record) -> tuple[Counts, ResolveStats]:
    """One record's share of a set's statistics: Table 1's counts and Table 5's conflicts (they add up)."""
    return record_counts(record), conflict_stats([record])


def resolved(record: Record) -> tuple[Record, Resolution | None]:
    """``record`` with the ranks its comparisons resolve to, and the resolution.

    A record without comparisons keeps the ``rank`` it has (there is nothing to resolve; the
    resolution is None); one with neither gets every response at rank 1, as Algorithm 1 would.
    """
    if not record.comparisons and record.rank:
        return record, None
    res = resolve_record(record)
    return record.model_copy(update={"rank": res.rank}), res


def resolved_step(record: Record) -> tuple[Record, tuple[str, Resolution | None]]:
    """:func:`resolved` as a step (:data:`~cheems.data.stream.StepFn`): the record and, as its outcome, its id
    and resolution."""
    out, res = resolved(record)
    return out, (record.id, res)


def resolve_step(records: Records, stats: ResolveStats, warnings: list[tuple[str, list[str]]]) -> Iterator[Any]:
    """:func:`resolved` over ``records``: the records with their ranks (their lines when streamed from files),
    counting each into ``stats`` and its unmentioned responses into ``warnings`` as it passes."""
    for out, (record_id, res) in records.step(resolved_step):
        stats.add(res)
        if res is not None and res.unmentioned:
            warnings.append((record_id, res.unmentioned))
        yield out


def resolve_file_records(records: list[Record]) -> tuple[list[Record], ResolveStats, list[tuple[str, list[str]]]]:
    """Add ``rank`` to every record that has comparisons (see :func:`resolved`); return records, pooled stats and
    warnings, ``(prompt_id, unmentioned response ids)`` (:func:`resolve_step` over the list)."""
    stats, warnings = ResolveStats(), list[tuple[str, list[str]]]()
    return list(resolve_step(Records(records), stats, warnings)), stats, warnings


def resolve_file(
    source: str | Path,
    output: str | Path,
    stats_json: str | Path | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> tuple[ResolveStats, list[InputError], ReadResult]:
    """Resolve a record file into ``output`` (and its pooled conflict statistics into ``stats_json``), streamed,
    as ``cheems resolve``: the statistics, a warning for each prompt with responses no comparison mentions,
    and the lines skipped. The outputs are claimed first (:func:`cheems.outputs.claim_outputs`): never ``source``."""
    claim_outputs(inputs=[("IN", source)], files=[("--output", output), ("--stats-json", stats_json)])
    stats, unmentioned = ResolveStats(), list[tuple[str, list[str]]]()
    records = Records([source], skip_invalid=skip_invalid, workers=workers, label="resolving")
    write_lines_and_report(output, resolve_step(records, stats, unmentioned), stats_json, stats.to_dict)
    warnings = [
        InputError(f"prompt '{pid}': no comparison mentions {', '.join(ids)}; placed at rank 1 (Algorithm 1)")
        for pid, ids in unmentioned
    ]
    return stats, warnings, records.issues
