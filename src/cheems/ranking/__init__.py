"""Preference graph from comparisons, conflict resolution into ranks, conflict ratio, training pairs."""

from cheems.ranking.merge import MergeStats, merge_same_prompts, rank_comparisons
from cheems.ranking.pairs import training_pairs
from cheems.ranking.resolve import (
    Resolution,
    ResolveStats,
    conflict_stats,
    preference_graph,
    resolve_file_records,
    resolve_record,
    resolve_step,
)

__all__ = [
    "MergeStats",
    "Resolution",
    "ResolveStats",
    "conflict_stats",
    "merge_same_prompts",
    "preference_graph",
    "rank_comparisons",
    "resolve_file_records",
    "resolve_record",
    "resolve_step",
    "training_pairs",
]
