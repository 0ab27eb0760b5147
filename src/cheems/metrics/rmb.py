"""RMB's best-of-N metric (``cheems eval --metric bon``; arXiv 2410.09893 §3): a prompt is right iff its best
response outscores every other. Under ``--compat upstream`` a RewardBench 2 bench gets its own score
(:mod:`cheems.metrics.rewardbench2`); RMB's pairwise set is ``--metric pairwise``
(:mod:`cheems.metrics.pairwise`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cheems.data.schema import Record
from cheems.metrics.compat import Compat
from cheems.metrics.metric_registry import hits_subset, pair_right, register_metric
from cheems.metrics.rewardbench2 import bon_unit, check_rewardbench2_record, rewardbench2_subset

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PromptOutcome


def all_right(outcome: PromptOutcome) -> list[float]:
    """A prompt's one hit: whether every pair of it is right (its best response beats every other)."""
    return [all(pair_right(p) for p in outcome.pairs)]


@register_metric(
    "bon",
    title="best-of-N",
    help="a prompt is right iff its best response beats every other",
    compat=True,
    unit=bon_unit,
    record_check=check_rewardbench2_record,
)
def bon_subset(
    outcomes: Sequence[PromptOutcome], records: list[Record] | None = None, name: str = "", compat: Compat = "strict"
) -> dict[str, Any]:
    """The ``bon`` metric of one subset (RMB's best-of-N set, RewardBench 2): a prompt is right iff all its
    pairs are, i.e. the best outscores every loser (RMB, arXiv 2410.09893 §3) or the one correct answer scores
    strictly highest (RewardBench 2); RewardBench 2's Ties rows get its per-prompt ``accurate`` (the same rule).
    With ``compat="upstream"``, RewardBench 2 scored by a scorer as its code: a k-way tie at the top gets 1/k
    (:func:`cheems.metrics.rewardbench2.rewardbench2_subset`). A category's accuracy
    is the share of its prompts right; ``accuracy`` the unweighted mean over main categories (RewardBench 2
    averages its subsets), ``pooled_accuracy`` the share over all prompts."""

    if compat == "strict":
        return hits_subset(outcomes, all_right)
    return rewardbench2_subset(outcomes, name, all_right)
