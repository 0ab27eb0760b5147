"""Another benchmark's metric of an evaluation (``cheems eval --metric NAME``, not ``cheems``): every subset's
numbers (:data:`cheems.metrics.metric_registry.METRICS`), their bootstrap intervals, and the tables ``eval`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cheems.data.bench_layouts import RMBENCH_STYLES
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.metrics.compat import Compat, compat_record
from cheems.metrics.metric_registry import METRICS, UnderCompat
from cheems.metrics.rmb import bon_subset
from cheems.terminal import SafeConsole

if TYPE_CHECKING:
    from cheems.evaluate.bench import EvalReport
    from cheems.metrics.bootstrap import MetricIntervals
    from cheems.metrics.outcomes import PromptOutcome


@dataclass
class BenchmarkReport:
    """One metric's numbers for every subset (bench file), in the JSON shape ``to_dict`` gives; with
    ``intervals``, each subset's ``accuracy_ci``, ``overall_ci`` and ``bootstrap`` as CheemsBench's JSON has them."""

    metric: str
    subsets: dict[str, dict[str, Any]]
    scorer: str = ""
    without_pairs: list[str] = field(default_factory=list)
    judge: dict[str, Any] | None = None  # a generative judge's run, as in ``EvalReport.judge``
    compat: Compat = "strict"  # the rules followed (cheems.metrics.compat), recorded in to_dict when not strict
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
    ``compat`` rules (:mod:`cheems.metrics.compat`). Every subset also gets ``exact_match`` (the share of prompts
    with every pair right, mean over main categories: ``bon``'s accuracy) and ``n_pairs``. ``resamples`` (0: none)
    and ``seed``: the bootstrap intervals of each subset's ``accuracy`` and of ``overall``, the metric recomputed
    on resamples of the prompts (:func:`cheems.metrics.bootstrap.metric_intervals`), whatever the metric."""
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
        from cheems.metrics.bootstrap import metric_intervals

        def accuracy(name: str, prompts: list[PromptOutcome]) -> float:
            return cast(float, subset(prompts, bench[name], name, **own)["accuracy"])

        unit = None if registered.unit is None else UnderCompat(registered.unit, compat)
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
