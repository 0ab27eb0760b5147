"""Human-readable tables of an evaluation (rich, markdown) and the report folder (JSON, markdown, HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cheems.data.io import write_json, write_text
from cheems.evaluate.bench import EvalReport
from cheems.evaluate.report_html import interval_note, report_page, with_ci
from cheems.terminal import SafeConsole


def _subset_values(data: dict[str, Any], name: str, compact: bool = False) -> tuple[str, str]:
    """A subset's accuracy and exact match as shown, with intervals when the report (``to_dict()``) has them."""
    subset = data["subsets"][name]
    return with_ci(subset, "accuracy", compact), with_ci(subset, "exact_match", compact)


OVERALL = "overall = mean over subsets of (accuracy + exact match) / 2"


def report_table(report: EvalReport, title: str = "") -> Table:
    """One table: each subset's categories, then the subset means, then the overall score (with intervals
    when the report has them). It fits an 80-column terminal: short labels, compact intervals, and cells
    that wrap (a long category folds; a number wraps before its interval) rather than being cut."""
    data = report.to_dict()  # once: it computes every subset's length split
    table = Table(title=title or None, caption=OVERALL, show_lines=False)
    for col in ("subset", "category", "accuracy", "exact match", "prompts", "pairs"):
        left = col in ("subset", "category")
        table.add_column(col, justify="left" if left else "right", overflow="fold", no_wrap=col in ("prompts", "pairs"))
    for name, subset in report.subsets.items():
        for cat, m in subset.categories.items():
            table.add_row(name, cat, f"{m.accuracy:.3f}", f"{m.exact_match:.3f}", str(m.n_prompts), str(m.n_pairs))
        accuracy, exact_match = _subset_values(data, name, compact=True)
        table.add_row(
            Text(name, style="bold"),
            Text("mean", style="bold"),
            Text(accuracy, style="bold"),
            Text(exact_match, style="bold"),
            str(subset.n_prompts),
            str(subset.n_pairs),
            end_section=True,
        )
    prompts = sum(s.n_prompts for s in report.subsets.values())
    pairs = sum(s.n_pairs for s in report.subsets.values())
    overall = with_ci(data, "overall", compact=True)
    table.add_row(Text("overall", style="bold"), "", Text(overall, style="bold"), "", str(prompts), str(pairs))
    return table


def report_notes(report: EvalReport) -> list[str]:
    """How the intervals were drawn; what the numbers leave out: subsets without a ranked pair, unused
    scores, unranked responses."""
    notes = []
    if report.intervals is not None:
        notes.append(interval_note(report.intervals.settings()))
    if report.without_pairs:
        notes.append(f"left out of overall (no ranked pair): {', '.join(report.without_pairs)}")
    if report.unmatched_scores:
        notes.append(f"{len(report.unmatched_scores)} score(s) match no response of the bench and are not used")
    if report.unranked_responses:
        notes.append(f"{report.unranked_responses} response(s) are not in their prompt's rank and are not evaluated")
    return notes


def length_line(data: dict[str, Any]) -> str:
    """Accuracy when the chosen response is longer vs shorter (from ``to_dict()``): a length follower is high
    then low."""
    split = data["length"]
    parts = [
        f"{label} {'-' if split[key]['accuracy'] is None else format(split[key]['accuracy'], '.3f')} "
        f"({split[key]['n_pairs']} pairs)"
        for key, label in (("chosen_longer", "chosen longer"), ("chosen_shorter", "chosen shorter"))
    ]
    return "accuracy by length: " + ", ".join(parts)


def judge_lines(report: EvalReport) -> list[str]:
    """A judge's verdicts: counts, parse failures, position preference and (both orders) consistency."""
    j = report.judge
    if j is None:
        return []
    v = j["verdicts"]
    share = "-" if j["first_shown_win_share"] is None else f"{j['first_shown_win_share']:.3f}"
    lines = [
        f"judge {j['judge_model']} (template {j['template']}, seed {j['seed']}): {j['questions']} questions, "
        f"verdicts A {v['A']} / B {v['B']} / C (tie, wrong) {v['C']}, parse failures (wrong) {j['parse_failures']}",
        f"first-shown answer wins {share} of A/B verdicts (0.5 = no position preference)",
    ]
    c = j.get("position_consistency")
    if c:
        rate = "-" if c["rate"] is None else f"{c['rate']:.3f}"
        lines.append(f"both orders: {c['consistent']} of {c['pairs']} pairs consistent ({rate}); inconsistent = wrong")
    return lines


def print_report(report: EvalReport, title: str = "", console: Console | None = None) -> None:
    """Print the table, then the calibration error, the length split and a judge's verdict statistics."""
    console = console or SafeConsole()  # data printed literally (cheems.terminal)
    console.print(report_table(report, title))
    eces = [f"{name} {m.ece:.3f}" for name, m in report.subsets.items() if m.ece is not None]
    if eces:
        console.print("expected calibration error of score differences: " + ", ".join(eces))
    for line in [length_line(report.to_dict()), *judge_lines(report)]:
        console.print(line, soft_wrap=True, highlight=False)
    for note in report_notes(report):
        console.print(f"note: {note}", soft_wrap=True)


def report_markdown(report: EvalReport, title: str = "") -> str:
    """The same table as markdown, for papers and issue threads."""
    data = report.to_dict()  # once: it computes every subset's length split
    lines = [
        f"# {title}" if title else "# CheemsBench metrics",
        "",
        "| subset | category | accuracy | exact match | prompts | pairs |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, subset in report.subsets.items():
        for cat, m in subset.categories.items():
            lines.append(f"| {name} | {cat} | {m.accuracy:.3f} | {m.exact_match:.3f} | {m.n_prompts} | {m.n_pairs} |")
        accuracy, exact_match = _subset_values(data, name)
        lines.append(
            f"| **{name}** | **mean of categories** | **{accuracy}** | **{exact_match}** "
            f"| {subset.n_prompts} | {subset.n_pairs} |"
        )
    lines += [
        "",
        f"**Overall** (mean over subsets of (accuracy + exact match) / 2): **{with_ci(data, 'overall')}**",
        "",
    ]
    lines += [f"- {line}" for line in [length_line(data), *judge_lines(report)]] + [""]
    notes = report_notes(report)
    if notes:
        lines += [f"- {note}" for note in notes] + [""]
    if report.checks:  # the evaluation's own checks: each warning, one line
        warned = [c for c in report.checks if c.level == "warning"]
        lines += ["## Checks", "", *(f"- warning: {c.line()}" for c in warned)]
        lines += [f"- {len(report.checks) - len(warned)} other finding(s) ok (report.json, docs/checks.md)", ""]
    return "\n".join(lines)


REPORT_FILES = ("report.json", "report.md", "report.html")


def write_report(report: EvalReport, folder: Path, title: str = "") -> None:
    """Write ``report.json``, ``report.md`` and the self-contained ``report.html`` into ``folder`` (created when
    missing). The page shows the numbers of ``report.json``."""
    json_file, markdown_file, html_file = REPORT_FILES
    data = report.to_dict()
    page = report_page(
        data, report.outcomes, f"CheemsBench report: {title}" if title else "CheemsBench report", report_notes(report)
    )
    write_json(folder / json_file, data)
    write_text(folder / markdown_file, report_markdown(report, title))
    write_text(folder / html_file, page)


def print_evaluation(run: Any, console: Console) -> None:
    """A :class:`~cheems.evaluate.evaluation.BenchEvaluation`'s CheemsBench metrics as a table, or another
    benchmark's (with a judge's verdict statistics); ``run`` is not typed by name: evaluation imports this module."""
    from cheems.evaluate.benchmark_report import print_benchmark
    from cheems.metrics.compat import upstream_rules

    if run.report.compat != "strict":  # the numbers are not the default ones: say so before them
        changed = ", ".join(upstream_rules(run.other.metric if run.other is not None else "cheems"))
        console.print(f"compat upstream: {changed} follow the upstream code (see --output-json)", soft_wrap=True)
    if run.other is None:
        print_report(run.report, title=f"CheemsBench metrics: {run.report.scorer}", console=console)
        return
    print_benchmark(run.other, console)
    for line in judge_lines(run.report):
        console.print(line, soft_wrap=True, highlight=False)
