"""JudgeBench's metric (``cheems eval --metric judgebench``; ScalerLab/JudgeBench): the pairwise numbers with
its headline, the share of all pairs right. An LLM judge evaluated on a bench is :mod:`cheems.evaluate.judge_bench`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cheems.data.schema import Record
from cheems.metrics.metric_registry import register_metric
from cheems.metrics.pairwise import pairwise_subset

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PromptOutcome


@register_metric("judgebench", title="JudgeBench", help="JudgeBench: share of all pairs right (its Overall)")
def judgebench_subset(
    outcomes: Sequence[PromptOutcome], records: list[Record] | None = None, name: str = ""
) -> dict[str, Any]:
    """The ``judgebench`` metric of one subset: ``pairwise``'s numbers with JudgeBench's headline, ``accuracy`` =
    ``pooled_accuracy``, the share of all its pairs right (``utils/metrics.py`` ``compute_final_metrics`` over every
    pair, its "Overall"), so suites and leaderboards rank by it; ``categories`` are its source groups (their
    accuracies, as upstream's per-source runs), and ``category_mean`` their unweighted mean (``pairwise``'s
    accuracy)."""
    out = pairwise_subset(outcomes, records, name)
    return out | {"accuracy": out["pooled_accuracy"], "category_mean": out["accuracy"]}
