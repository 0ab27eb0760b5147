"""The bootstrap's shared pieces, and intervals of any metric: :func:`metric_intervals` recomputes a registered
``--metric``'s subset accuracy (:mod:`cheems.evaluate.benchmarks`) on resamples of the prompts, drawn as
:func:`cheems.evaluate.significance.add_intervals` draws CheemsBench's (a module of its own: the metrics
import it, and significance imports the tables that list them)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from cheems.errors import InputError

if TYPE_CHECKING:
    from cheems.evaluate.bench import Interval
    from cheems.evaluate.outcomes import PromptOutcome

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

    The resampling is CheemsBench's own (:func:`cheems.evaluate.significance.add_intervals`): the prompts with
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
