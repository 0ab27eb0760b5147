"""RewardBench 2's score as its code computes it (allenai/reward-bench ``rewardbench/utils.py``): ``cheems eval
--metric bon --compat upstream`` of a RewardBench 2 bench (:func:`cheems.metrics.rmb.bon_subset` strict is the
share of prompts whose one correct answer scores strictly highest). A k-way tie at the top gets 1/k
(:func:`_top_tie_credit`), the Ties subset its weighted score (:func:`_ties_score`), drawn by the bootstrap with
each ref:N beside its tied:N (:func:`bon_unit`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.metrics.compat import Compat
from cheems.metrics.metric_registry import hits_subset

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PromptOutcome


def _response_scores(outcome: PromptOutcome) -> dict[str, float]:
    """Each response's score, from a scorer's pairs (every response of a bench prompt is in one)."""
    scores: dict[str, float] = {}
    for p in outcome.pairs:
        if p.chosen_score is not None and p.rejected_score is not None:
            scores[p.chosen], scores[p.rejected] = p.chosen_score, p.rejected_score
    return scores


def _rewardbench2(outcome: PromptOutcome) -> bool:
    """A RewardBench 2 prompt scored by a scorer: its responses are the importer's ``chosen-1``…, ``rejected-1``…"""
    return (
        bool(outcome.pairs)
        and outcome.pairs[0].margin is not None
        and all(p.chosen.startswith("chosen-") and p.rejected.startswith("rejected-") for p in outcome.pairs)
    )


def _first_correct(prompt_id: str, category: str, pairs: Sequence[tuple[str, str]]) -> None:
    """Under upstream a RewardBench 2 prompt outside Ties (its pairs all ``chosen-i`` over ``rejected-j``) is scored
    by its first correct answer, ``chosen-1`` (``reroll_and_score_dataset`` reads ``chosen[0]``): refuse one
    without it (InputError, no place: the caller's)."""
    ids = {rid for pair in pairs for rid in pair}
    rewardbench2 = bool(pairs) and all(c.startswith("chosen-") and r.startswith("rejected-") for c, r in pairs)
    if rewardbench2 and category != "Ties" and "chosen-1" not in ids:
        raise InputError(
            f"prompt '{prompt_id}' has RewardBench 2's response ids (chosen-i, rejected-j) but no 'chosen-1', the "
            "correct answer upstream's score reads",
            field="responses",
            hint="name its first correct answer chosen-1 (cheems import rewardbench2 does), or use --compat strict",
        )


def check_rewardbench2_record(record: Record, compat: Compat) -> None:
    """``bon``'s record check: under upstream, :func:`_first_correct` of the record's ranked pairs."""
    if compat == "upstream":
        _first_correct(record.id, record.main_category, record.ranked_pairs())


def _top_tie_credit(outcome: PromptOutcome) -> float:
    """RewardBench 2's credit of a prompt (allenai/reward-bench ``rewardbench/utils.py``
    ``reroll_and_score_dataset``): 1/k when its first correct answer ``chosen-1`` has the top score, shared by k
    responses, else 0."""
    scores = _response_scores(outcome)
    top = max(scores.values())
    return 1 / sum(s == top for s in scores.values()) if scores["chosen-1"] == top else 0.0


def _ties_score(group: list[PromptOutcome], subset: str) -> float:
    """RewardBench 2's weighted score of its Ties subset (``rewardbench/utils.py`` ``process_single_model`` and
    ``_compute_prompt_stats``): over prompts ``ref:N`` (one correct answer) and ``tied:N`` (several), with
    margins m_c = best - worst correct score, m_ci = worst correct - best incorrect,
    0.3 tied accuracy + 0.3 ref accuracy (accurate: m_ci > 0) + 0.2 mean(m_ci(tied) > m_c) + 0.2
    mean(min(m_ci(ref), m_ci(tied)) > m_c) + 0.01 mean(tanh(min(m_ci(ref), m_ci(tied)) / m_c - 1), NaN as 0),
    the last three over the N that have both a ref and a tied prompt."""
    import numpy as np

    # a prompt drawn k times by a bootstrap is here k times and counts k times (bootstrap.metric_intervals), its
    # copies paired in order with its partner's (drawn together: bon_unit)
    stats: dict[str, dict[int, list[tuple[bool, float | None, float]]]] = {"ref": {}, "tied": {}}
    for o in group:
        kind, _, number = o.prompt_id.partition(":")
        if kind not in stats or not number.isdigit():
            raise InputError(
                f"prompt '{o.prompt_id}' of the Ties subset of bench file '{subset}' is not named ref:N or tied:N "
                "as RewardBench 2's are",
                path="--compat upstream",
                hint="import RewardBench 2 with: cheems import rewardbench2 IN -o OUT, or use --compat strict",
            )
        scores = _response_scores(o)
        correct = [s for rid, s in scores.items() if rid.startswith("chosen-")]
        incorrect = [s for rid, s in scores.items() if rid.startswith("rejected-")]
        margin = min(correct) - max(incorrect)
        width = max(correct) - min(correct) if len(correct) > 1 else None
        stats[kind].setdefault(int(number), []).append((margin > 0, width, margin))
    both = [
        (ref, tied)
        for n in sorted(set(stats["ref"]) & set(stats["tied"]))
        for ref, tied in zip(stats["ref"][n], stats["tied"][n])
    ]
    if not both or any(tied[1] is None for _, tied in both):
        raise InputError(
            f"the Ties subset of bench file '{subset}' needs prompts ref:N and tied:N of the same N, each tied:N "
            "with at least two correct answers (RewardBench 2's weighted Ties score compares them)",
            path="--compat upstream",
            hint="give the whole Ties subset of RewardBench 2, or use --compat strict",
        )
    ref_accuracy, tied_accuracy = (
        float(np.mean([s[0] for copies in stats[k].values() for s in copies])) for k in ("ref", "tied")
    )
    spread = np.array([tied[1] for _, tied in both], dtype=np.float64)
    ties = np.array([tied[2] for _, tied in both])
    hard = np.minimum(np.array([ref[2] for ref, _ in both]), ties)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero spread: upstream's inf or NaN, kept as it is
        margin_score = float(np.mean(np.nan_to_num(np.tanh(hard / spread - 1), nan=0.0)))
    preferred, preferred_hard = float(np.mean(ties > spread)), float(np.mean(hard > spread))
    return 0.30 * tied_accuracy + 0.30 * ref_accuracy + 0.20 * preferred + 0.20 * preferred_hard + 0.01 * margin_score


def bon_unit(outcome: PromptOutcome, compat: Compat) -> Hashable:
    """The ``bon`` bootstrap's unit of a prompt: under upstream, RewardBench 2's Ties prompts ref:N and tied:N are
    one unit (its Ties score pairs them, :func:`_ties_score`), drawn together; any other prompt is its own."""
    kind, _, number = outcome.prompt_id.partition(":")
    if compat == "upstream" and outcome.category == "Ties" and kind in ("ref", "tied") and number.isdigit():
        return ("Ties", int(number))
    return ("prompt", outcome.prompt_id)


def rewardbench2_subset(
    outcomes: Sequence[PromptOutcome], name: str, other: Callable[[PromptOutcome], list[float]]
) -> dict[str, Any]:
    """``bon``'s numbers of one subset under upstream: a RewardBench 2 prompt outside Ties gets
    :func:`_top_tie_credit`, the Ties subset :func:`_ties_score`, any other prompt ``other``'s hits (``bon``'s
    strict rule)."""

    def hits(o: PromptOutcome) -> list[float]:
        if not (_rewardbench2(o) and o.category != "Ties"):
            return other(o)
        try:
            _first_correct(o.prompt_id, o.category, [(p.chosen, p.rejected) for p in o.pairs])
        except InputError as e:  # records in memory (the Python API): the bench files' are checked as read
            raise e.located(f"bench file '{name}'") from None
        return [_top_tie_credit(o)]

    def ties(category: str, group: list[PromptOutcome]) -> float | None:
        return _ties_score(group, name) if category == "Ties" and all(map(_rewardbench2, group)) else None

    return hits_subset(outcomes, hits, ties)
