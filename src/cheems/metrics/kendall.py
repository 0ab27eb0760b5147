"""Kendall τb between a scorer's order and the gold ranking, per prompt (``cheems eval --metric kendall``).

The rank-native metric IF-RewardBench reports (listwise agreement of a judge's order with the gold one) for
CheemsBench-style files, where a prompt ranks several responses and may tie some: τb
(``scipy.stats.kendalltau(variant="b")``) counts a pair tied in one order only as neither agreeing nor
disagreeing, and is undefined when every gold rank, or every score, of the prompt is equal.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.metrics.metric_registry import register_metric

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PromptOutcome


def kendall_tau_b(gold_ranks: Sequence[int], scores: Sequence[float]) -> float | None:
    """τb between a gold ranking (rank 1 best) and scores (higher better); None when all ranks or all scores tie."""
    if len(set(gold_ranks)) < 2 or len(set(scores)) < 2:
        return None
    from scipy.stats import kendalltau

    return float(kendalltau([-r for r in gold_ranks], scores, variant="b").statistic)


@register_metric(
    "kendall", title="Kendall τb", help="per prompt Kendall τb of the scores against the gold ranks", scores_only=True
)
def kendall_subset(outcomes: Sequence[PromptOutcome], records: list[Record], name: str = "") -> dict[str, Any]:
    """The ``kendall`` metric of one bench file: each prompt's τb between its ranked responses' gold ranks and
    their scores (:func:`kendall_tau_b`); a category's ``accuracy`` is the mean τb of its prompts, the file's
    ``accuracy`` (also ``kendall_tau``) the mean over main categories, ``pooled_accuracy`` the mean over all
    prompts. Prompts where τb is undefined are left out of every mean and counted in ``undefined``:
    ``gold_tied`` (fewer than two gold ranks: no ranked pair) and ``scores_tied`` (every score equal)."""
    ranks = {r.id: r.rank or {} for r in records}
    taus: dict[str, list[float]] = defaultdict(list)
    pairs: dict[str, int] = defaultdict(int)
    undefined = {"gold_tied": 0, "scores_tied": 0}
    for outcome in outcomes:
        if not outcome.pairs:
            undefined["gold_tied"] += 1
            continue
        scores = outcome.response_scores()
        if scores is None:  # a judge: refused before judging (register_metric's scores_only)
            raise InputError("kendall needs every response's score", path="--metric")
        tau = kendall_tau_b([ranks[outcome.prompt_id][rid] for rid in scores], list(scores.values()))
        if tau is None:
            undefined["scores_tied"] += 1
            continue
        taus[outcome.category].append(tau)
        pairs[outcome.category] += len(outcome.pairs)
    if not taus:
        raise InputError(
            f"no prompt of bench file '{name}' has a Kendall τb: in each, every gold rank or every score is equal",
            path="--metric kendall",
            hint="it needs prompts that rank at least two responses differently, scored unequally",
        )
    categories = {
        category: {"accuracy": sum(t) / len(t), "n_prompts": len(t), "n_pairs": pairs[category]}
        for category, t in sorted(taus.items())
    }
    every = [t for group in taus.values() for t in group]
    mean = sum(c["accuracy"] for c in categories.values()) / len(categories)
    return {
        "accuracy": mean,
        "kendall_tau": mean,
        "pooled_accuracy": sum(every) / len(every),
        "n_prompts": len(every),
        "n_pairs": sum(pairs.values()),
        "n_undefined": sum(undefined.values()),
        "undefined": undefined,
        "categories": categories,
    }
