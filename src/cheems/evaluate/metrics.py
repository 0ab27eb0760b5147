"""CheemsBench metrics, exactly as DESIGN.md defines them.

- every pair of a prompt's responses with different ranks is one comparison; the
  better-ranked one is chosen;
- a comparison is correct iff score(chosen) > score(rejected) (a tie in score is wrong);
- a category's accuracy = correct comparisons / its comparisons; its exact match = share of
  its prompts (with at least one comparison) whose comparisons are all correct;
- a subset's accuracy / exact match = unweighted means over its main categories;
- overall = mean over subsets of (accuracy + exact match) / 2.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from cheems.data.io import ScoreKey
from cheems.data.schema import Record
from cheems.errors import InputError


@dataclass
class ShownVerdict:
    """One judge verdict on a pair: which response was shown first, and what the judge said.

    ``label`` is about the shown order: ``A`` (first shown wins), ``B``, ``C`` (tie), or None when
    no verdict could be parsed (``failure`` names why).
    """

    first: str
    label: str | None
    failure: str | None = None


@dataclass(slots=True)  # an evaluation holds one per pair of the bench: millions at 10x paper scale
class PairOutcome:
    """One comparison of the bench and whether the scorer got it right.

    Scores are set for scorers (a reward model, a scores file), ``verdicts`` for a judge.
    """

    chosen: str
    rejected: str
    correct: bool
    chosen_chars: int
    rejected_chars: int
    chosen_score: float | None = None
    rejected_score: float | None = None
    verdicts: list[ShownVerdict] | None = None

    @property
    def margin(self) -> float | None:
        """score(chosen) - score(rejected); None for a judge."""
        if self.chosen_score is None or self.rejected_score is None:
            return None
        return self.chosen_score - self.rejected_score

    def picked(self, verdict: ShownVerdict) -> str | None:
        """The response id a verdict on this pair picks, ``"tie"``, or None (no verdict)."""
        if verdict.label is None:
            return None
        if verdict.label == "C":
            return "tie"
        second = self.rejected if verdict.first == self.chosen else self.chosen
        return verdict.first if verdict.label == "A" else second


@dataclass(slots=True)
class PromptOutcome:
    """The judged comparisons of one prompt."""

    prompt_id: str
    category: str
    pairs: list[PairOutcome]

    @property
    def correct(self) -> int:
        return sum(p.correct for p in self.pairs)

    @property
    def margins(self) -> list[float]:
        """Score margins of the pairs that have scores (none for a judge)."""
        return [m for m in (p.margin for p in self.pairs) if m is not None]


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


def prompt_outcome(record: Record, scores: Mapping[ScoreKey, float], source: str = "scores") -> PromptOutcome:
    """Every ranked pair of one (ranked) record, right iff score(chosen) > score(rejected)."""
    return scored_outcome(bare_outcome(record), scores, source)


@dataclass
class GroupMetrics:
    """Accuracy and exact match of one category or subset."""

    accuracy: float
    exact_match: float
    n_prompts: int
    n_pairs: int
    categories: dict[str, "GroupMetrics"] = field(default_factory=dict)
    ece: float | None = None

    def to_dict(self) -> dict:
        out: dict = {
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


def category_metrics(outcomes: list[PromptOutcome]) -> GroupMetrics:
    """Pooled accuracy and exact match of prompts that have at least one comparison."""
    scored = [o for o in outcomes if o.pairs]
    n_pairs = sum(len(o.pairs) for o in scored)
    correct = sum(o.correct for o in scored)
    exact = sum(o.correct == len(o.pairs) for o in scored)
    return GroupMetrics(
        accuracy=correct / n_pairs if n_pairs else 0.0,
        exact_match=exact / len(scored) if scored else 0.0,
        n_prompts=len(scored),
        n_pairs=n_pairs,
    )


def subset_metrics(outcomes: list[PromptOutcome]) -> GroupMetrics:
    """Per-category metrics and their unweighted mean over main categories with comparisons."""
    by_category: dict[str, list[PromptOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.pairs:
            by_category[o.category].append(o)
    categories = {name: category_metrics(group) for name, group in sorted(by_category.items())}
    n = len(categories)
    return GroupMetrics(
        accuracy=sum(m.accuracy for m in categories.values()) / n if n else 0.0,
        exact_match=sum(m.exact_match for m in categories.values()) / n if n else 0.0,
        n_prompts=sum(m.n_prompts for m in categories.values()),
        n_pairs=sum(m.n_pairs for m in categories.values()),
        categories=categories,
        ece=_ece_of(outcomes),
    )


def _ece_of(outcomes: list[PromptOutcome]) -> float | None:
    """ECE of a scorer's margins; None for a judge (its verdicts have no scores)."""
    pairs = [p for o in outcomes for p in o.pairs]
    if any(p.margin is None for p in pairs):
        return None
    return expected_calibration_error([p.margin for p in pairs])


def overall(subsets: dict[str, GroupMetrics]) -> float:
    """Mean over subsets of (accuracy + exact match) / 2; each subset must have a ranked pair."""
    if not subsets or any(m.n_pairs == 0 for m in subsets.values()):
        # a subset without pairs has no accuracy: averaging it in as 0 would be a wrong number
        raise ValueError("overall needs subsets that each have at least one ranked pair")
    return sum((m.accuracy + m.exact_match) / 2 for m in subsets.values()) / len(subsets)


def length_split(outcomes: list[PromptOutcome]) -> dict[str, dict[str, float | int | None]]:
    """Accuracy pooled over the pairs where the chosen response is longer, shorter or the same length.

    Lengths are in characters. A scorer that follows length does well on ``chosen_longer`` and
    badly on ``chosen_shorter``; a good one does well on both. ``accuracy`` is None for an empty group.
    """
    groups: dict[str, list[bool]] = {"chosen_longer": [], "chosen_shorter": [], "same_length": []}
    for o in outcomes:
        for p in o.pairs:
            if p.chosen_chars > p.rejected_chars:
                groups["chosen_longer"].append(p.correct)
            elif p.chosen_chars < p.rejected_chars:
                groups["chosen_shorter"].append(p.correct)
            else:
                groups["same_length"].append(p.correct)
    return {
        name: {"accuracy": sum(hits) / len(hits) if hits else None, "n_pairs": len(hits)}
        for name, hits in groups.items()
    }


@dataclass
class CalibrationBin:
    """Pairs whose |margin| falls in one bin: mean sigmoid confidence vs share right."""

    confidence: float
    accuracy: float
    count: int


def calibration_bins(margins: list[float], n_bins: int = 5) -> list[CalibrationBin]:
    """The non-empty bins behind :func:`expected_calibration_error` (the calibration curve).

    Pairs are binned by |margin| into ``n_bins`` equal-width bins over [0, max |margin|];
    a bin's confidence is sigmoid(mean |margin|), its accuracy the share with margin > 0
    (a score tie is wrong, as everywhere here).
    """
    sizes = [abs(m) for m in margins]
    top = max(sizes, default=0.0)
    bins: list[list[float]] = [[] for _ in range(n_bins)]
    for m, size in zip(margins, sizes):
        index = min(int(size / top * n_bins), n_bins - 1) if top > 0 else 0
        bins[index].append(m)
    return [
        CalibrationBin(
            confidence=1 / (1 + math.exp(-sum(abs(m) for m in members) / len(members))),
            accuracy=sum(m > 0 for m in members) / len(members),
            count=len(members),
        )
        for members in bins
        if members
    ]


def expected_calibration_error(margins: list[float], n_bins: int = 5) -> float | None:
    """ECE of score differences read as Bradley–Terry probabilities, as in the official code.

    The count-weighted mean of |accuracy - confidence| over :func:`calibration_bins`. Only
    meaningful for BT-trained scores.
    """
    if not margins:
        return None
    return sum(b.count / len(margins) * abs(b.accuracy - b.confidence) for b in calibration_bins(margins, n_bins))
