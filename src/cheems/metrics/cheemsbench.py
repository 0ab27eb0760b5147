"""CheemsBench metrics, exactly as the paper defines them.

- every pair of a prompt's responses with different ranks is one comparison; the
  better-ranked one is chosen;
- a comparison is correct iff score(chosen) > score(rejected) (a tie in score is wrong);
- a category's accuracy = correct comparisons / its comparisons; its exact match = share of
  its prompts (with at least one comparison) whose comparisons are all correct;
- a subset's accuracy / exact match = unweighted means over its main categories;
- overall = mean over subsets of (accuracy + exact match) / 2.

With ``compat="upstream"`` exact match follows the official code (:func:`exact_prompts`); a category
without any comparison counts in neither rule (upstream's accuracy of it is NaN).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cheems.data.io import ScoreKey
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.metrics.compat import Compat
from cheems.metrics.outcomes import Outcomes, PairOutcome, PromptOutcome


def _score(scores: Mapping[ScoreKey, float], prompt_id: str, rid: str, source: str) -> float:
    """The score of one response; a missing or non-finite one is an error, never a silent wrong pair."""
    value = scores.get((prompt_id, rid))
    if value is None:
        raise InputError(
            f"no score for prompt '{prompt_id}' response '{rid}'",
            path=source,
            hint="score this bench file with the same model (cheems score) or pass --model",
        )
    if not math.isfinite(value):  # files are checked when read; this catches a model that overflowed
        raise InputError(
            f"the score for prompt '{prompt_id}' response '{rid}' is {value}",
            path=source,
            hint="check the model: a reward model must give finite scores",
        )
    return value


def bare_outcome(record: Record) -> PromptOutcome:
    """Every ranked pair of one (ranked) record with its lengths, not yet scored (:func:`scored_outcome`)."""
    pairs = [
        PairOutcome(
            chosen, rejected, False, len(record.response(chosen).content), len(record.response(rejected).content)
        )
        for chosen, rejected in record.ranked_pairs()
    ]
    return PromptOutcome(record.id, record.main_category, pairs)


def scored_outcome(outcome: PromptOutcome, scores: Mapping[ScoreKey, float], source: str = "scores") -> PromptOutcome:
    """A :func:`bare_outcome` with its scores: a pair is right iff score(chosen) > score(rejected)."""
    for pair in outcome.pairs:
        pair.chosen_score = _score(scores, outcome.prompt_id, pair.chosen, source)
        pair.rejected_score = _score(scores, outcome.prompt_id, pair.rejected, source)
        pair.correct = pair.chosen_score > pair.rejected_score
    return outcome


@dataclass
class GroupMetrics:
    """Accuracy and exact match of one category or subset."""

    accuracy: float
    exact_match: float
    n_prompts: int
    n_pairs: int
    categories: dict[str, "GroupMetrics"] = field(default_factory=dict)
    ece: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "accuracy": self.accuracy,
            "exact_match": self.exact_match,
            "n_prompts": self.n_prompts,
            "n_pairs": self.n_pairs,
        }
        if self.ece is not None:
            out["ece"] = self.ece
        if self.categories:
            out["categories"] = {name: m.to_dict() for name, m in self.categories.items()}
        return out


def exact_prompts(table: Outcomes, compat: Compat = "strict") -> tuple[np.ndarray, np.ndarray]:
    """Per prompt: whether it counts toward exact match, and whether it is an exact match.

    strict: a prompt with at least one comparison counts, and is exact iff every comparison is right.
    upstream (AlignRM/CheemsRM ``get_rank_metrics``): every prompt counts, exact iff no comparison is reversed
    (score(chosen) < score(rejected)): a score tie does not break it, and a prompt without a comparison is exact.
    A judge's verdicts have no scores; its upstream code (``eval_rm.py`` ``generative_evaluate``) counts as strict.
    """
    counts = table.pair_counts()
    if compat == "upstream" and table.margins() is not None:
        return np.ones(len(counts), dtype=bool), table.reversed_counts() == 0
    return counts > 0, table.right_counts() == counts


def _group(counts: np.ndarray, right: np.ndarray, exact: np.ndarray) -> GroupMetrics:
    """Pooled accuracy and exact match of the counted prompts: ``counts`` pairs each, ``right`` of them right,
    ``exact`` whether each is an exact match."""
    n_pairs, n_prompts = int(counts.sum()), len(counts)
    return GroupMetrics(
        accuracy=int(right.sum()) / n_pairs if n_pairs else 0.0,
        exact_match=int(exact.sum()) / n_prompts if n_prompts else 0.0,
        n_prompts=n_prompts,
        n_pairs=n_pairs,
    )


def category_metrics(outcomes: Outcomes | Iterable[PromptOutcome], compat: Compat = "strict") -> GroupMetrics:
    """Pooled accuracy and exact match of the prompts that count (:func:`exact_prompts`)."""
    table = Outcomes.of(outcomes)
    counted, exact = exact_prompts(table, compat)
    return _group(table.pair_counts()[counted], table.right_counts()[counted], exact[counted])


def subset_metrics(outcomes: Outcomes | Iterable[PromptOutcome], compat: Compat = "strict") -> GroupMetrics:
    """Per-category metrics and their unweighted mean over main categories with comparisons; ``compat`` says
    which prompts count toward exact match and when one is exact (:func:`exact_prompts`)."""
    table = Outcomes.of(outcomes)
    counts, right, category = table.pair_counts(), table.right_counts(), table.category
    counted, exact = exact_prompts(table, compat)
    codes = {table.categories[c]: c for c in np.unique(category[counts > 0])}
    categories = {}
    for name, code in sorted(codes.items()):
        mine = counted & (category == code)
        categories[name] = _group(counts[mine], right[mine], exact[mine])
    n = len(categories)
    return GroupMetrics(
        accuracy=sum(m.accuracy for m in categories.values()) / n if n else 0.0,
        exact_match=sum(m.exact_match for m in categories.values()) / n if n else 0.0,
        n_prompts=sum(m.n_prompts for m in categories.values()),
        n_pairs=sum(m.n_pairs for m in categories.values()),
        categories=categories,
        ece=_ece_of(table),
    )


def _ece_of(table: Outcomes) -> float | None:
    """ECE of a scorer's margins; None for a judge (its verdicts have no scores)."""
    margins = table.margins()
    return None if margins is None else expected_calibration_error(margins)


def overall(subsets: dict[str, GroupMetrics]) -> float:
    """Mean over subsets of (accuracy + exact match) / 2; each subset must have a ranked pair."""
    if not subsets or any(m.n_pairs == 0 for m in subsets.values()):
        # a subset without pairs has no accuracy: averaging it in as 0 would be a wrong number
        raise ValueError("overall needs subsets that each have at least one ranked pair")
    return sum((m.accuracy + m.exact_match) / 2 for m in subsets.values()) / len(subsets)


def length_split(*subsets: Outcomes | Iterable[PromptOutcome]) -> dict[str, dict[str, float | int | None]]:
    """Accuracy pooled over the pairs (of all ``subsets``) where the chosen response is longer, shorter or the
    same length.

    Lengths are in characters. A scorer that follows length does well on ``chosen_longer`` and
    badly on ``chosen_shorter``; a good one does well on both. ``accuracy`` is None for an empty group.
    """
    hits = {"chosen_longer": [0, 0], "chosen_shorter": [0, 0], "same_length": [0, 0]}  # [right, pairs]
    for outcomes in subsets:
        table = Outcomes.of(outcomes)
        signs, correct = table.length_signs(), table.correct
        for name, sign in (("chosen_longer", 1), ("chosen_shorter", -1), ("same_length", 0)):
            where = signs == sign
            hits[name][0] += int(correct[where].sum())
            hits[name][1] += int(where.sum())
    return {name: {"accuracy": right / n if n else None, "n_pairs": n} for name, (right, n) in hits.items()}


@dataclass
class CalibrationBin:
    """Pairs whose |margin| falls in one bin: mean sigmoid confidence vs share right."""

    confidence: float
    accuracy: float
    count: int


def calibration_bins(margins: Sequence[float] | np.ndarray, n_bins: int = 5) -> list[CalibrationBin]:
    """The non-empty bins behind :func:`expected_calibration_error` (the calibration curve).

    Pairs are binned by |margin| into ``n_bins`` equal-width bins over [0, max |margin|];
    a bin's confidence is sigmoid(mean |margin|), its accuracy the share with margin > 0
    (a score tie is wrong, as everywhere here).
    """
    margins = np.asarray(margins, dtype=np.float64)
    # each pair's bin as a small int, computed in place (pair-sized float arrays are the memory at 10x scale)
    scaled = np.abs(margins)
    top = float(scaled.max()) if len(scaled) else 0.0
    if top > 0:
        scaled /= top
        scaled *= n_bins
    np.minimum(scaled, n_bins - 1, out=scaled)
    index = scaled.astype(np.min_scalar_type(n_bins))  # truncated toward zero, as int() does
    del scaled
    bins = []
    for b in range(n_bins):
        members = index == b
        count = int(members.sum())
        if count:
            inside = margins[members]
            right = int((inside > 0).sum())
            np.abs(inside, out=inside)
            total = float(np.add.accumulate(inside, out=inside)[-1])  # summed in order, as Python's sum would
            bins.append(
                CalibrationBin(confidence=1 / (1 + math.exp(-total / count)), accuracy=right / count, count=count)
            )
    return bins


def expected_calibration_error(margins: Sequence[float] | np.ndarray, n_bins: int = 5) -> float | None:
    """ECE of score differences read as Bradley–Terry probabilities: cheems' own bench number.

    The count-weighted mean of |accuracy - confidence| over :func:`calibration_bins`. Only meaningful for
    BT-trained scores. CheemsRM computes no ECE on the bench: its ``compute_ece`` (``cheems/eval/metrics.py``)
    runs only on pairwise-labelled data, with the same bins and confidence but a tie counted right and the
    largest margin left out of every bin (``diffs.lt((i + 1) * step)``); here a tie is wrong and the largest
    margin falls in the last bin.
    """
    if len(margins) == 0:
        return None
    return sum(b.count / len(margins) * abs(b.accuracy - b.confidence) for b in calibration_bins(margins, n_bins))
