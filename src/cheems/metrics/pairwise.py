"""The pairwise metric (``cheems eval --metric pairwise``): the share of pairs right, as RMB's pairwise set and
JudgeBench count it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cheems.data.schema import Record
from cheems.metrics.metric_registry import hits_subset, pair_right, register_metric

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PromptOutcome


@register_metric("pairwise", title="pairwise", help="share of pairs right")
def pairwise_subset(
    outcomes: Sequence[PromptOutcome], records: list[Record] | None = None, name: str = ""
) -> dict[str, Any]:
    """The ``pairwise`` metric of one subset (RMB's pairwise set, JudgeBench): a category's accuracy is the share
    of its pairs right, ``accuracy`` the unweighted mean over main categories, ``pooled_accuracy`` the share
    over all pairs (JudgeBench's "Overall", ``run_judge.py``)."""
    return hits_subset(outcomes, lambda o: [pair_right(p) for p in o.pairs])
