"""The metrics of other reward-model benchmarks (``cheems eval --metric rmbench|bon|pairwise``).

A metric is one function of a subset's judged pairs registered with :func:`register_metric`
(``cheems eval --metric`` lists and dispatches :data:`METRICS`); ``cheems`` is CheemsBench's own
(:class:`cheems.evaluate.bench.EvalReport`: intervals, the HTML report). They read the same judged pairs
as CheemsBench's metric (``EvalReport.outcomes``: every ranked pair of every prompt, from a scorer's
scores or a judge's verdicts) of records from ``cheems.data.bench_importers`` (better responses rank 1,
worse rank 2). Each metric's function names the upstream code it follows; what the numbers mean for a
user is in the README ("Other reward-model benchmarks"), the JSON they make in docs/formats.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cheems.data.bench_layouts import RMBENCH_STYLES
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.evaluate.compat import Compat, compat_record
from cheems.registries import Registry
from cheems.terminal import SafeConsole

if TYPE_CHECKING:  # numpy and the runner load with the first metric computed: the CLI lists METRICS at start-up
    import numpy as np

    from cheems.evaluate.bench import EvalReport
    from cheems.evaluate.outcomes import PairOutcome, PromptOutcome
    from cheems.evaluate.resampling import MetricIntervals

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
    unit: Callable[[PromptOutcome, Compat], Hashable] | None = None  # its bootstrap's unit (resampling.Unit)
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
    ``unit(prompt, compat)``: which prompts its bootstrap draws together (:data:`cheems.evaluate.resampling.Unit`;
    default each prompt alone). ``record_check(record, compat)``: raises ``InputError`` for a record the metric
    cannot read; ``cheems eval`` runs it on every record as the bench is read, so the refusal names file:line
    (:func:`record_check`)."""

    def add(fn: SubsetMetric) -> SubsetMetric:
        found = Metric(title, fn, scores_only=scores_only, compat=compat, unit=unit, record_check=record_check)
        METRICS.add(name, found, help)
        return fn

    return add


@dataclass(frozen=True)
class _UnderCompat:
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
    return _UnderCompat(found.record_check, compat)


def pair_right(pair: PairOutcome) -> bool:
    """Whether a pair is right.

    A scorer's iff score(better) > score(worse): a tie is wrong, under both ``--compat`` rules. Upstream codes
    differ on a tie: RewardBench 2 gives a k-way tie at the top 1/k (:func:`bon_subset` follows it with
    ``compat="upstream"``), CheemsRM's exact match lets a tie pass (:func:`cheems.evaluate.metrics.exact_prompts`).
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


@dataclass
class BenchmarkReport:
    """One metric's numbers for every subset (bench file), in the JSON shape ``to_dict`` gives; with
    ``intervals``, each subset's ``accuracy_ci``, ``overall_ci`` and ``bootstrap`` as CheemsBench's JSON has them."""

    metric: str
    subsets: dict[str, dict[str, Any]]
    scorer: str = ""
    without_pairs: list[str] = field(default_factory=list)
    judge: dict[str, Any] | None = None  # a generative judge's run, as in ``EvalReport.judge``
    compat: Compat = "strict"  # the rules followed (cheems.evaluate.compat), recorded in to_dict when not strict
    intervals: MetricIntervals | None = None

    @property
    def overall(self) -> float:
        """The mean of the subsets' ``accuracy``."""
        return cast("float", sum(s["accuracy"] for s in self.subsets.values()) / len(self.subsets))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric, "subsets": self.subsets, "overall": self.overall}
        if self.intervals is not None:
            b = self.intervals
            out["subsets"] = {name: dict(s) for name, s in self.subsets.items()}
            for name, ci in b.subsets.items():
                out["subsets"][name]["accuracy_ci"] = list(ci)
            if b.overall is not None:
                out["overall_ci"] = list(b.overall)
            out["bootstrap"] = b.settings()
            if b.undrawn:
                out["intervals_undrawn"] = b.undrawn
        if self.scorer:
            out["scorer"] = self.scorer
        if self.judge is not None:
            out["judge"] = self.judge
        if self.without_pairs:
            out["subsets_without_pairs"] = self.without_pairs
        return out | compat_record(self.compat, self.metric)


def by_category(outcomes: Sequence[PromptOutcome]) -> dict[str, list[PromptOutcome]]:
    """The prompts with a ranked pair, by main category, in category order."""
    groups: dict[str, list[PromptOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.pairs:
            groups[o.category].append(o)
    return dict(sorted(groups.items()))


def _share(hits: Sequence[float]) -> float:
    return sum(hits) / len(hits)


def _hits_subset(
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
            "accuracy": _share([h for o in group for h in hits(o)]) if own is None else own,
            "n_prompts": len(group),
            "n_pairs": sum(len(o.pairs) for o in group),
        }
    scored = [o for o in outcomes if o.pairs]
    return {
        "accuracy": sum(c["accuracy"] for c in categories.values()) / len(categories),
        "pooled_accuracy": _share([h for o in scored for h in hits(o)]),
        "n_prompts": len(scored),
        "n_pairs": sum(len(o.pairs) for o in scored),
        "categories": categories,
    }


def _triangles(matrix: np.ndarray) -> dict[str, Any]:
    """hard / normal / easy of an RM-Bench matrix, as upstream computes them: the means of the upper-right
    triangle (chosen less styled than rejected), of the diagonal and of the lower-left triangle; ``accuracy``
    is their mean, upstream's ``total_avg_acc``."""
    import numpy as np

    n = len(matrix)
    hard = float(np.sum(np.triu(matrix, 1)) / (n * (n - 1) / 2))
    normal = float(np.mean(np.diag(matrix)))
    easy = float(np.sum(np.tril(matrix, -1)) / (n * (n - 1) / 2))
    return {"accuracy": (hard + normal + easy) / 3, "hard": hard, "normal": normal, "easy": easy}


def _style_matrix(outcome: PromptOutcome, styles: Mapping[str, str | None], subset: str) -> np.ndarray:
    """One prompt's 3×3 hits: row = the chosen response's style, column = the rejected one's."""
    import numpy as np

    index: dict[str | None, int] = {s: i for i, s in enumerate(RMBENCH_STYLES)}
    matrix = np.zeros((len(RMBENCH_STYLES), len(RMBENCH_STYLES)))
    seen = set()
    for p in outcome.pairs:
        cell = (index.get(styles.get(p.chosen, "")), index.get(styles.get(p.rejected, "")))
        if None in cell or cell in seen:
            break
        seen.add(cell)
        matrix[cell] = pair_right(p)
    if len(seen) != matrix.size:
        raise InputError(
            f"prompt '{outcome.prompt_id}' of bench file '{subset}' is not an RM-Bench prompt (3 chosen and 3 "
            f"rejected responses, one of each style {', '.join(RMBENCH_STYLES)})",
            path="--metric rmbench",
            hint="import RM-Bench files with: cheems import rmbench IN -o OUT",
        )
    return matrix


@register_metric("rmbench", title="RM-Bench", help="RM-Bench hard/normal/easy")
def rmbench_subset(outcomes: Sequence[PromptOutcome], records: list[Record], name: str = "") -> dict[str, Any]:
    """The ``rmbench`` metric of one subset (THU-KEG/RM-Bench ``scripts/utils.py`` ``compute_accuracy``): per
    domain (main category) the 3×3 matrix M[i][j] = share of prompts whose chosen response in style i beats
    the rejected one in style j (:data:`~cheems.data.bench_layouts.RMBENCH_STYLES`) and its hard / normal /
    easy (:func:`_triangles`); the subset's numbers and matrix are the means over its domains."""
    import numpy as np

    styles = {r.id: {x.id: getattr(x, "style", None) for x in r.responses} for r in records}
    categories = {}
    for category, group in by_category(outcomes).items():
        matrix = np.mean([_style_matrix(o, styles.get(o.prompt_id, {}), name) for o in group], axis=0)
        categories[category] = {**_triangles(matrix), "matrix": matrix.tolist(), "n_prompts": len(group)}
    matrix = np.mean([c["matrix"] for c in categories.values()], axis=0)
    n_prompts = sum(c["n_prompts"] for c in categories.values())
    return {**_triangles(matrix), "matrix": matrix.tolist(), "n_prompts": n_prompts, "categories": categories}


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

    # a prompt drawn k times by a bootstrap is here k times and counts k times (resampling.metric_intervals), its
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
    (:func:`_top_tie_credit`) and the Ties subset its weighted score (:func:`_ties_score`). A category's accuracy
    is the share of its prompts right; ``accuracy`` the unweighted mean over main categories (RewardBench 2
    averages its subsets), ``pooled_accuracy`` the share over all prompts."""

    def strict(o: PromptOutcome) -> list[float]:
        return [all(pair_right(p) for p in o.pairs)]

    if compat == "strict":
        return _hits_subset(outcomes, strict)

    def hits(o: PromptOutcome) -> list[float]:
        if not (_rewardbench2(o) and o.category != "Ties"):
            return strict(o)
        try:
            _first_correct(o.prompt_id, o.category, [(p.chosen, p.rejected) for p in o.pairs])
        except InputError as e:  # records in memory (the Python API): the bench files' are checked as read
            raise e.located(f"bench file '{name}'") from None
        return [_top_tie_credit(o)]

    def ties(category: str, group: list[PromptOutcome]) -> float | None:
        return _ties_score(group, name) if category == "Ties" and all(map(_rewardbench2, group)) else None

    return _hits_subset(outcomes, hits, ties)


@register_metric("pairwise", title="pairwise", help="share of pairs right")
def pairwise_subset(
    outcomes: Sequence[PromptOutcome], records: list[Record] | None = None, name: str = ""
) -> dict[str, Any]:
    """The ``pairwise`` metric of one subset (RMB's pairwise set, JudgeBench): a category's accuracy is the share
    of its pairs right, ``accuracy`` the unweighted mean over main categories, ``pooled_accuracy`` the share
    over all pairs (JudgeBench's "Overall", ``run_judge.py``)."""
    return _hits_subset(outcomes, lambda o: [pair_right(p) for p in o.pairs])


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


def benchmark_report(
    metric: str,
    bench: dict[str, list[Record]],
    report: EvalReport,
    compat: Compat = "strict",
    *,
    resamples: int = 0,
    seed: int = 0,
) -> BenchmarkReport:
    """``metric`` (a registered one, not ``cheems``) of every subset of an evaluation's judged pairs, under the
    ``compat`` rules (:mod:`cheems.evaluate.compat`). Every subset also gets ``exact_match`` (the share of prompts
    with every pair right, mean over main categories: ``bon``'s accuracy) and ``n_pairs``. ``resamples`` (0: none)
    and ``seed``: the bootstrap intervals of each subset's ``accuracy`` and of ``overall``, the metric recomputed
    on resamples of the prompts (:func:`cheems.evaluate.resampling.metric_intervals`), whatever the metric."""
    registered = METRICS.get(metric)
    subset = registered.subset
    if subset is None:
        raise InputError(
            f"--metric {metric} is not one of the other benchmarks' metrics", path="--metric", hint=METRICS.hint()
        )
    own: dict[str, Any] = {"compat": compat} if registered.compat else {}
    subsets = {name: subset(outcomes, bench[name], name, **own) for name, outcomes in report.outcomes.items()}
    for name, outcomes in report.outcomes.items():
        # the keys every eval JSON has, so that cheems leaderboard and cheems correlate read this one too
        exact = bon_subset(outcomes, bench[name], name, compat)["accuracy"]
        subsets[name] |= {"exact_match": exact, "n_pairs": sum(len(o.pairs) for o in outcomes)}
    out = BenchmarkReport(metric, subsets, report.scorer, report.without_pairs, report.judge, compat)
    if resamples:
        from cheems.evaluate.resampling import metric_intervals

        def accuracy(name: str, prompts: list[PromptOutcome]) -> float:
            return cast(float, subset(prompts, bench[name], name, **own)["accuracy"])

        unit = None if registered.unit is None else _UnderCompat(registered.unit, compat)
        out.intervals = metric_intervals(report.outcomes, accuracy, resamples, seed, unit=unit)
    return out


def benchmark_table(report: BenchmarkReport, title: str = "") -> Table:
    """Each subset's categories, the subset (mean of categories, and pooled), then ``overall``; a subset's
    accuracy and ``overall`` with their intervals when the report has them."""
    from cheems.evaluate.report_html import with_ci

    data = report.to_dict()
    rm = report.metric == "rmbench"
    columns = ["subset", "category", "hard", "normal", "easy", "accuracy", "prompts"] if rm else []
    columns = columns or ["subset", "category", "accuracy", "pooled", "prompts", "pairs"]
    caption = "overall = mean over subsets of accuracy"
    table = Table(title=title or f"{METRICS.get(report.metric).title} metrics", caption=caption)
    for col in columns:  # as eval's CheemsBench table: a long category folds, never cut
        table.add_column(col, justify="left" if col in ("subset", "category") else "right", overflow="fold")

    def cells(m: dict[str, Any], pooled: bool) -> list[str]:
        accuracy = with_ci(m, "accuracy", compact=True)
        if rm:
            return [f"{m[k]:.3f}" for k in ("hard", "normal", "easy")] + [accuracy, str(m["n_prompts"])]
        share = f"{m['pooled_accuracy']:.3f}" if pooled else ""
        return [accuracy, share, str(m["n_prompts"]), str(m["n_pairs"])]

    for name, subset in data["subsets"].items():
        for cat, m in subset["categories"].items():
            table.add_row(name, cat, *cells(m, False))
        for section, m in subset.get("sections", {}).items():  # RewardBench's weighted sections
            table.add_row(name, f"section {section}", *cells(m, False))
        table.add_row(Text(name, style="bold"), Text("mean", style="bold"), *cells(subset, True), end_section=True)
    overall = with_ci(data, "overall", compact=True)
    table.add_row(Text("overall", style="bold"), "", *([""] * (3 if rm else 0)), Text(overall, style="bold"))
    return table


def style_matrix_table(matrix: list[list[float]], title: str) -> Table:
    """An RM-Bench matrix: a row per chosen style, a column per rejected style; hard is above the diagonal."""
    table = Table(title=title)
    table.add_column("chosen \\ rejected")
    for style in RMBENCH_STYLES:
        table.add_column(style, justify="right")
    for style, row in zip(RMBENCH_STYLES, matrix):
        table.add_row(style, *(f"{x:.3f}" for x in row))
    return table


def print_benchmark(report: BenchmarkReport, console: Console | None = None) -> None:
    """Print the table, and for RM-Bench each subset's 3×3 matrix (rows: chosen style, columns: rejected style)."""
    console = console or SafeConsole()  # data printed literally (cheems.terminal)
    console.print(benchmark_table(report, f"{METRICS.get(report.metric).title} metrics: {report.scorer}"))
    if report.metric == "rmbench":
        for name, subset in report.subsets.items():
            console.print(style_matrix_table(subset["matrix"], f"{name}: accuracy by style (mean of domains)"))
    for note in dict.fromkeys(f"{m['source']}; ties: {m['ties']}" for m in report.subsets.values() if "source" in m):
        console.print(f"note: {note}", soft_wrap=True)  # a metric not checked against its upstream code says so
    if report.intervals is not None:
        from cheems.evaluate.report_html import interval_note

        console.print(f"note: {interval_note(report.intervals.settings())}", soft_wrap=True)
        for name, why in report.intervals.undrawn.items():
            line = f"note: {name} has no interval: a resample of its prompts cannot be scored ({why})"
            console.print(line, soft_wrap=True)
    for name, subset in report.subsets.items():  # prompts a metric could not score (Kendall τb undefined)
        if subset.get("n_undefined"):
            why = ", ".join(f"{n} {reason}" for reason, n in subset["undefined"].items() if n)
            console.print(f"note: {name}: {subset['n_undefined']} prompts left out, undefined ({why})", soft_wrap=True)
    if report.without_pairs:
        console.print(f"note: left out of overall (no ranked pair): {', '.join(report.without_pairs)}", soft_wrap=True)
