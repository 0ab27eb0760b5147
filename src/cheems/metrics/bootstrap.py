"""Every resampling draw and interval: the percentile bootstrap of CheemsBench's metrics (:func:`intervals_of`) and
of any registered ``--metric`` (:func:`metric_intervals`), the paired draws of two runs that ``cheems compare``
reads (:func:`cheemsbench_draws`), the resampled RMs of ``cheems correlate`` (:func:`resample_indices`) and the win
rate's interval (:func:`win_rate_interval`).

A resample recomputes CheemsBench's metrics exactly as :func:`cheems.metrics.cheemsbench.subset_metrics` does:
a category's accuracy pooled over its pairs, its exact match over its prompts, a subset's numbers the unweighted
mean over the categories with a pair in the resample; ``overall`` as :func:`cheems.metrics.cheemsbench.overall`.
Only the prompts that count toward exact match are resampled (:func:`cheems.metrics.cheemsbench.exact_prompts`:
strict, those with at least one pair; the others count nowhere), so a subset keeps its size. The draws come
from ``numpy.random.default_rng(seed)``: for each subset in turn one ``rng.integers(0, n, (resamples, n))``
(``n`` = its prompts with pairs, a chunk of rows at a time: :func:`draw_rows`), so a run is reproducible from
its seed alone, whatever the metric.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from cheems.errors import InputError
from cheems.metrics.cheemsbench import exact_prompts
from cheems.metrics.compat import Compat
from cheems.metrics.outcomes import Outcomes

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PromptOutcome


Interval = tuple[float, float]


@dataclass
class SubsetIntervals:
    """A subset's accuracy and exact match intervals."""

    accuracy: Interval
    exact_match: Interval


@dataclass
class Intervals:
    """Bootstrap intervals of an evaluation, how they were drawn, and ``overall``'s draws (what a suite averages
    over its benches)."""

    resamples: int
    seed: int
    level: float
    subsets: dict[str, SubsetIntervals]
    overall: Interval
    draws: np.ndarray | None = field(default=None, repr=False, compare=False)

    def settings(self) -> dict[str, Any]:
        """``{"resamples", "seed", "level"}``: what reproduces these intervals."""
        return {"resamples": self.resamples, "seed": self.seed, "level": self.level}


DRAWS = 1 << 19
"""Prompt draws turned into counts at a time (resamples x prompts): about 50 bytes each in flight, so the
bootstrap's memory stays near 25 MB however many prompts a subset has."""


def draw_rows(rng: np.random.Generator, n: int, resamples: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(first resample, its rows)``: the prompt indices of every resample of ``n`` prompts, a chunk of rows at
    a time (:data:`DRAWS` draws): the same numbers as one ``rng.integers(0, n, (resamples, n))``, without its
    memory. Every bootstrap here draws through it, so a seed gives the same resamples whatever the metric."""
    chunk = max(1, DRAWS // n)
    for start in range(0, resamples, chunk):
        yield start, rng.integers(0, n, size=(min(chunk, resamples - start), n))


def percentile_interval(draws: np.ndarray, level: float) -> Interval:
    """The percentile interval (numpy's default linear interpolation) at ``level``."""
    low, high = np.percentile(draws, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)


def check_bootstrap(resamples: int, level: float) -> None:
    """A bootstrap needs a resample and a level strictly between 0 and 1."""
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"need resamples >= 1 and 0 < level < 1, got {resamples} and {level}")


@dataclass
class MetricIntervals:
    """Bootstrap intervals of another benchmark's metric (:func:`metric_intervals`): each subset's accuracy and
    ``overall``, how they were drawn, and ``overall``'s draws (what a suite averages over its benches).

    ``undrawn``: the subsets whose metric a resample of their prompts cannot compute (one that needs prompts
    together, as RewardBench 2's Ties score needs each ref:N beside its tied:N), with why; they have no
    interval, and then neither has ``overall`` (``overall`` and ``draws`` are None)."""

    resamples: int
    seed: int
    level: float
    subsets: dict[str, Interval]
    overall: Interval | None
    draws: np.ndarray | None = field(repr=False, compare=False)
    undrawn: dict[str, str] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        """``{"resamples", "seed", "level"}``: what reproduces these intervals."""
        return {"resamples": self.resamples, "seed": self.seed, "level": self.level}


Unit: TypeAlias = "Callable[[PromptOutcome], Hashable]"
"""Which unit of the bootstrap a prompt belongs to: prompts of one unit are drawn together (a metric that needs
them beside each other, as RewardBench 2's Ties score needs ref:N beside tied:N)."""


def _units(prompts: Sequence[PromptOutcome], unit: Unit | None) -> list[list[int]]:
    """The prompts' indices by unit, in order of first appearance: one prompt each without ``unit``."""
    if unit is None:
        return [[i] for i in range(len(prompts))]
    groups: dict[Hashable, list[int]] = {}
    for i, o in enumerate(prompts):
        groups.setdefault(unit(o), []).append(i)
    return list(groups.values())


def metric_intervals(
    outcomes: Mapping[str, Sequence[PromptOutcome]],
    measure: Callable[[str, list[PromptOutcome]], float],
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    unit: Unit | None = None,
) -> MetricIntervals:
    """Percentile bootstrap intervals of any metric: ``measure(subset, prompts)`` is a subset's accuracy of its
    judged prompts, recomputed on each resample; ``overall`` is the mean over subsets, from the same resamples.

    The resampling is CheemsBench's own (:func:`intervals_of`): the prompts with
    pairs of each subset in turn, drawn from ``numpy.random.default_rng(seed)`` as one
    ``rng.integers(0, n, (resamples, n))`` per subset (a chunk of rows at a time), so a metric's intervals are
    reproducible from the seed alone, whatever the metric. With ``unit``, the ``n`` drawn are the subset's units
    (:data:`Unit`, in order of first appearance), each bringing all its prompts: a cluster bootstrap.

    The contract with ``measure``: a resample is a list in which a prompt (a unit) drawn k times appears k times,
    and ``measure`` counts it k times, as it would k distinct prompts. A measure that keyed prompts by id would
    count each once and measure a subsample (about 63% of the prompts), not a bootstrap. A subset whose
    ``measure`` raises ``InputError`` on a resample is left ``undrawn`` (its draws are still taken, so the other
    subsets' stay the same).
    """
    check_bootstrap(resamples, level)
    rng = np.random.default_rng(seed)
    subsets, undrawn, total = {}, {}, np.zeros(resamples)
    for name, judged in outcomes.items():
        prompts = [o for o in judged if o.pairs]  # made once: an Outcomes row becomes an object on each access
        units = _units(prompts, unit)
        draws = np.empty(resamples)
        for start, rows in draw_rows(rng, len(units), resamples):
            for i, row in enumerate(rows, start):
                if name in undrawn:
                    break
                try:
                    draws[i] = measure(name, [prompts[j] for u in row for j in units[u]])
                except InputError as e:
                    undrawn[name] = e.message
        if name not in undrawn:
            subsets[name] = percentile_interval(draws, level)
            total += draws
    if undrawn:
        return MetricIntervals(resamples, seed, level, subsets, None, None, undrawn)
    total /= len(outcomes)
    return MetricIntervals(resamples, seed, level, subsets, percentile_interval(total, level), total)


def _prompt_values(runs: list[Outcomes], compat: Compat = "strict") -> tuple[np.ndarray, np.ndarray]:
    """Each prompt's category index and values: prompts (1), pairs, then each run's correct pairs and exactness.

    Prompts that do not count toward exact match are left out; category indices follow the names' sorted order."""
    first = runs[0]
    counts = first.pair_counts()
    scored = exact_prompts(first, compat)[0]
    codes = first.category[scored]
    present = np.unique(codes)
    rank = np.empty(max(len(first.categories), 1), dtype=np.intp)
    rank[present[np.argsort([first.categories[c] for c in present])]] = np.arange(len(present))
    values = np.empty((int(scored.sum()), 2 + 2 * len(runs)))
    values[:, 0] = 1.0
    values[:, 1] = counts[scored]
    for j, run in enumerate(runs):
        values[:, 2 + 2 * j] = run.right_counts()[scored]
        values[:, 3 + 2 * j] = exact_prompts(run, compat)[1][scored]
    return rank[codes], values


def _category_sums(rng: np.random.Generator, category: np.ndarray, values: np.ndarray, resamples: int) -> np.ndarray:
    """Per-category sums of ``values`` in each resample of the prompts: shape ``(resamples, categories, k)``.

    A resample is a count of each prompt (``bincount`` of its draws); with the prompts sorted by
    category, a category's sums are its slice of the counts times its slice of the values (a matmul
    per category, so the work does not grow with the number of categories).
    """
    n = len(category)
    order = np.argsort(category, kind="stable")
    position = np.empty(n, dtype=np.intp)
    position[order] = np.arange(n)
    bounds = np.searchsorted(category[order], np.arange(category.max() + 2))
    ordered = values[order]
    sums = np.empty((resamples, len(bounds) - 1, values.shape[1]))
    for start, drawn in draw_rows(rng, n, resamples):
        rows = position[drawn]
        flat = (rows + n * np.arange(len(rows))[:, None]).ravel()
        counts = np.bincount(flat, minlength=rows.size).reshape(rows.shape).astype(np.float64)
        for c, (low, high) in enumerate(zip(bounds[:-1], bounds[1:])):
            sums[start : start + len(rows), c] = counts[:, low:high] @ ordered[low:high]
    return sums


def cheemsbench_draws(
    rng: np.random.Generator, runs: list[Outcomes], resamples: int, compat: Compat = "strict"
) -> np.ndarray:
    """Accuracy and exact match of each run in each resample of one subset's prompts that count.

    ``runs`` are one or more scorers' outcomes of the same prompts in the same order (categories and
    pair counts are read from the first). Returns shape ``(2, len(runs), resamples)``: [accuracy,
    exact match], each the mean over the categories with a pair in the resample.
    """
    sums = _category_sums(rng, *_prompt_values(runs, compat), resamples)
    prompts, pairs = sums[..., 0], sums[..., 1]
    present = pairs > 0
    n_present = present.sum(axis=1)
    out = np.empty((2, len(runs), resamples))
    for j in range(len(runs)):
        for m, denominator in ((0, pairs), (1, prompts)):
            per_category = np.divide(
                sums[..., 2 + 2 * j + m], denominator, out=np.zeros_like(denominator), where=present
            )
            out[m, j] = per_category.sum(axis=1) / n_present
    return out


def intervals_of(
    outcomes: Mapping[str, Outcomes],
    compat: Compat = "strict",
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Intervals:
    """Percentile bootstrap intervals of CheemsBench's metrics over prompts: each subset's accuracy and exact match,
    and ``overall`` from the same resamples (mean over subsets of (accuracy + exact match) / 2), under the
    ``compat`` rules. Each subset (in the mapping's order) is resampled independently."""
    check_bootstrap(resamples, level)
    rng = np.random.default_rng(seed)
    subsets, total = {}, np.zeros(resamples)
    for name, judged in outcomes.items():
        draws = cheemsbench_draws(rng, [judged], resamples, compat)[:, 0]
        subsets[name] = SubsetIntervals(percentile_interval(draws[0], level), percentile_interval(draws[1], level))
        total += draws.mean(axis=0)
    total /= len(subsets)
    return Intervals(resamples, seed, level, subsets, percentile_interval(total, level), total)


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """The rows of ``resamples`` resamples of ``n`` items with replacement, all at once: shape (resamples, n)."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def win_rate_interval(
    wins: int, losses: int, ties: int, resamples: int, seed: int, level: float = 0.95
) -> Interval | None:
    """Percentile bootstrap interval of a win rate over prompts (a tie counts 1/2); None when there are no prompts
    or no resamples.

    A prompt's value is 1, 1/2 or 0, so a resample is fixed by how many wins, ties and losses it draws:
    ``numpy.random.default_rng(seed).multinomial(n, [w, l, t] / n, resamples)`` draws them exactly as
    resampling the prompts with replacement would, in O(resamples) memory. (Wilson's interval needs a yes/no
    outcome; a tie is neither.)
    """
    n = wins + losses + ties
    if not n or not resamples:
        return None
    draws = np.random.default_rng(seed).multinomial(n, np.array([wins, losses, ties]) / n, size=resamples)
    return percentile_interval((draws[:, 0] + draws[:, 2] / 2) / n, level)
