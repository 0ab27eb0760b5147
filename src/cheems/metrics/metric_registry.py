"""The ``--metric`` registry: a benchmark's metric is one function of a subset's judged pairs, registered with
:func:`register_metric` (``cheems eval --metric`` lists and dispatches :data:`METRICS`); each benchmark's own
is a module of this package, named for the benchmark. ``cheems`` is CheemsBench's
(:mod:`cheems.metrics.cheemsbench`, reported by :class:`cheems.evaluate.bench.EvalReport`: intervals, the HTML
report). Every metric reads the same judged pairs (:class:`cheems.metrics.outcomes.PromptOutcome`: every ranked
pair of every prompt, from a scorer's scores or a judge's verdicts) of records from ``cheems.data.bench_importers``
(better responses rank 1, worse rank 2). Each metric's function names the upstream code it follows; what the
numbers mean for a user is in the README ("Other reward-model benchmarks"), the JSON they make in docs/formats.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from cheems.data.schema import Record
from cheems.metrics.compat import Compat
from cheems.registries import Registry

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PairOutcome, PromptOutcome

SubsetMetric: TypeAlias = "Callable[..., dict[str, Any]]"
"""A metric of one subset (bench file): its judged pairs, its records and its name (and, registered with
``compat=True``, the keyword ``compat``) -> the subset's JSON."""


@dataclass(frozen=True)
class Metric:
    """A registered metric: its tables' title, its function (None for CheemsBench's, which ``EvalReport`` is), and
    whether the function takes ``compat`` (else it has one rule, its upstream's)."""

    title: str
    subset: SubsetMetric | None
    scores_only: bool = False  # it reads every response's score: a judge's verdicts on pairs cannot feed it
    compat: bool = False
    unit: Callable[[PromptOutcome, Compat], Hashable] | None = None  # its bootstrap's unit (bootstrap.Unit)
    record_check: Callable[[Record, Compat], object] | None = None  # refuses a record it cannot read (InputError)


METRICS: Registry[Metric] = Registry("metric", "--metric")
METRICS.add("cheems", Metric("CheemsBench", None), "CheemsBench: accuracy and exact match")


def register_metric(
    name: str,
    *,
    title: str,
    help: str,
    scores_only: bool = False,
    compat: bool = False,
    unit: Callable[[PromptOutcome, Compat], Hashable] | None = None,
    record_check: Callable[[Record, Compat], object] | None = None,
) -> Callable[[SubsetMetric], SubsetMetric]:
    """Decorator: make a subset metric ``cheems eval --metric NAME``; ``title`` heads its table, ``help`` is
    its ``--help`` line, ``scores_only`` refuses a judge up front. The function returns the subset's JSON:
    ``accuracy``, ``pooled_accuracy``, ``n_prompts``, ``n_pairs`` and ``categories`` (each with ``accuracy``,
    ``n_prompts``, ``n_pairs``), the columns of its table.
    ``compat``: the function takes the keyword ``compat`` (``--compat``: its strict and upstream rules differ).
    ``unit(prompt, compat)``: which prompts its bootstrap draws together (:data:`cheems.metrics.bootstrap.Unit`;
    default each prompt alone). ``record_check(record, compat)``: raises ``InputError`` for a record the metric
    cannot read; ``cheems eval`` runs it on every record as the bench is read, so the refusal names file:line
    (:func:`record_check`)."""

    def add(fn: SubsetMetric) -> SubsetMetric:
        found = Metric(title, fn, scores_only=scores_only, compat=compat, unit=unit, record_check=record_check)
        METRICS.add(name, found, help)
        return fn

    return add


@dataclass(frozen=True)
class UnderCompat:
    """``fn(x, compat)`` as a one-argument function (picklable, for the bench readers' workers)."""

    fn: Callable[[Any, Compat], Any]
    compat: Compat

    def __call__(self, x: Any) -> Any:
        return self.fn(x, self.compat)


def record_check(metric: str, compat: Compat) -> Callable[[Record], object] | None:
    """The check of ``metric``'s records under ``compat`` (picklable, for the bench readers' workers); None when
    the metric has none (or is not registered: the metric is refused elsewhere)."""
    found = METRICS.get(metric) if metric in METRICS else None
    if found is None or found.record_check is None:
        return None
    return UnderCompat(found.record_check, compat)


def pair_right(pair: PairOutcome) -> bool:
    """Whether a pair is right.

    A scorer's iff score(better) > score(worse): a tie is wrong, under both ``--compat`` rules. Upstream codes
    differ on a tie: RewardBench 2 gives a k-way tie at the top 1/k (``bon`` follows it with
    ``compat="upstream"``), CheemsRM's exact match lets a tie pass (:func:`cheems.metrics.cheemsbench.exact_prompts`).
    JudgeBench's reward-model judges (ScalerLab/JudgeBench ``utils/judges.py``) say ``A>B`` iff score(A) >
    score(B), else ``B>A``; its default run asks both orders (``run_judge.py``: ``reverse_order=not
    single_game``), so a tie gives ``B>A`` and then, flipped, ``A>B``: ``counter`` 0, not right, as here (only
    its ``--single_game`` counts a tie as B winning). A judge's pair is right iff more of its verdicts name the
    better response than the worse one: JudgeBench's rule (``utils/metrics.py``, ``counter > 0``), so with both
    orders an inconsistent pair (one right, one wrong) is wrong, and one right verdict with a tie or an unparsed
    reply is right; with one order, right iff that verdict names it."""
    if pair.verdicts is None:
        return pair.correct
    picks = [pair.picked(v) for v in pair.verdicts]
    return picks.count(pair.chosen) > picks.count(pair.rejected)


def by_category(outcomes: Sequence[PromptOutcome]) -> dict[str, list[PromptOutcome]]:
    """The prompts with a ranked pair, by main category, in category order."""
    groups: dict[str, list[PromptOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.pairs:
            groups[o.category].append(o)
    return dict(sorted(groups.items()))


def share(hits: Sequence[float]) -> float:
    return sum(hits) / len(hits)


def hits_subset(
    outcomes: Sequence[PromptOutcome],
    hits: Callable[[PromptOutcome], Sequence[float]],
    category_score: Callable[[str, list[PromptOutcome]], float | None] = lambda name, group: None,
) -> dict[str, Any]:
    """Accuracy of each main category over its units (``hits`` of each prompt: 1 right, 0 wrong, or a share), or
    the ``category_score`` of the category where it gives one; their mean, and the pooled share of the hits."""
    categories = {}
    for name, group in by_category(outcomes).items():
        own = category_score(name, group)
        categories[name] = {
            "accuracy": share([h for o in group for h in hits(o)]) if own is None else own,
            "n_prompts": len(group),
            "n_pairs": sum(len(o.pairs) for o in group),
        }
    scored = [o for o in outcomes if o.pairs]
    return {
        "accuracy": sum(c["accuracy"] for c in categories.values()) / len(categories),
        "pooled_accuracy": share([h for o in scored for h in hits(o)]),
        "n_prompts": len(scored),
        "n_pairs": sum(len(o.pairs) for o in scored),
        "categories": categories,
    }
