"""The dashboard's numbers (:func:`cheems.annotate.quality.status_report`) as a few short rich tables for the terminal
(``cheems annotate status``).

Only prints: it reads the report dict, so the same code shows a report fetched from ``GET /api/status``.
"""

from __future__ import annotations

from typing import Any

CYCLE_ROWS = 10
"""Prompts with cycles listed at most (the rest are counted); ``--json`` has them all."""
DAYS = 7
"""Most recent days of the per-day counts shown."""


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _gold_cell(gold: dict[str, Any] | None) -> str:
    """Gold accuracy with what it counts: pairs for an annotator, verdicts for a reviewer."""
    if gold is None or gold["accuracy"] is None:
        return "-"
    return f"{_share(gold['accuracy'])} ({gold['pairs'] if 'pairs' in gold else gold['verdicts']})"


def _cycle(cycle: list[str]) -> str:
    return " > ".join([*cycle, cycle[0]])


def print_status(report: dict[str, Any], console: Any) -> None:
    """Progress, people, agreement, conflicts and queues of one status report, on ``console``."""
    from rich.table import Table

    progress, queues = report["progress"], report["queues"]
    summary = Table(title="annotation progress", show_header=False)
    summary.add_column("what")
    summary.add_column("n", justify="right")
    summary.add_row("tasks done", f"{progress['tasks_done']} / {progress['tasks']}")
    done = progress["submitted"] + progress["approved"]
    summary.add_row("items done", f"{done} / {progress['items']} ({_share(progress['share_done'])})")
    summary.add_row("  submitted / approved", f"{progress['submitted']} / {progress['approved']}")
    summary.add_row("items open (returned)", f"{progress['open']} ({progress['returned']})")
    summary.add_row("reviews open", str(queues["reviews_open"]))
    summary.add_row("adjudications open", str(queues["adjudications_open"]))
    for day, n in list(report["per_day"].items())[-DAYS:]:
        summary.add_row(f"answers on {day}", str(n))
    console.print(summary)

    categories = Table(title="by category")
    categories.add_column("category", justify="left")
    for name in ("tasks", "done", "share"):
        categories.add_column(name, justify="right")
    for name, c in progress["by_category"].items():
        categories.add_row(name, str(c["tasks"]), str(c["done"]), _share(c["share_done"]))
    console.print(categories)

    tables = [
        *_people_tables(progress["by_person"], report["gold"]),
        _agreement_table(report["agreement"]),
        *_conflicts_tables(report["conflicts"]),
    ]
    for table in tables:
        console.print(table)


def _people_tables(people: dict[str, dict[str, Any]], gold: dict[str, dict[str, Any]]) -> list[Any]:
    """Annotators (their tasks, today's work, gold accuracy over pairs), then reviewers and admins."""
    from rich.table import Table

    annotators = Table(title="annotators")
    reviewers = Table(title="reviewers and admins")
    annotators.add_column("person", no_wrap=True)
    reviewers.add_column("person", no_wrap=True)
    reviewers.add_column("role")
    for name in ("tasks", "done", "open", "returned", "today", "gold (pairs)"):
        annotators.add_column(name, justify="right")
    for name in ("reviewed", "open", "adjud.", "today", "gold (verdicts)"):
        reviewers.add_column(name, justify="right")
    for name, p in people.items():
        accuracy = _gold_cell(gold.get(name))
        if p["role"] == "annotator":
            counts = (p["assigned"], p["done"], p["open"], p["returned"], p["today"])
            annotators.add_row(name, *map(str, counts), accuracy)
        else:
            row = (p["reviews_done"], p["reviews_open"], p["adjudications_open"], p["today"])
            reviewers.add_row(name, p["role"], *map(str, row), accuracy)
    return [annotators, reviewers]


def _agreement_table(agreement: dict[str, Any]) -> Any:
    """Agreement between overlapping annotators."""
    from rich.table import Table

    table = Table(title="agreement (overlapping tasks)", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("tasks with 2+ answers", str(agreement["tasks"]))
    table.add_row("pairs compared", str(agreement["pairs"]))
    table.add_row("pairwise agreement", _share(agreement["pairwise_agreement"]))
    table.add_row("Krippendorff's alpha, scores", _number(agreement["alpha_scores"]))
    table.add_row("Krippendorff's alpha, ranking", _number(agreement["alpha_ranking"]))
    table.add_row("tasks below the agreement target", str(agreement["below_target"]))
    return table


def _conflicts_tables(conflicts: dict[str, Any]) -> list[Any]:
    """The pooled conflict ratio, then the prompts whose comparisons hold a preference cycle (when any)."""
    from rich.table import Table

    cyclic = [p for p in conflicts["by_prompt"] if p["cycles"]]
    pooled = Table(title="conflicts (Algorithm 1)", show_header=False)
    pooled.add_column("what")
    pooled.add_column("value", justify="right")
    pooled.add_row("prompts with comparisons", str(conflicts["prompts"]))
    pooled.add_row("conflicts / comparisons", f"{conflicts['conflicts']} / {conflicts['comparisons']}")
    pooled.add_row("conflict ratio", _share(conflicts["conflict_ratio"]))
    pooled.add_row("prompts with cycles", str(len(cyclic)))
    if not cyclic:
        return [pooled]
    table = Table(title="preference cycles")
    table.add_column("prompt")
    table.add_column("conflicts", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("cycles")
    for p in cyclic[:CYCLE_ROWS]:
        cycles = "; ".join(_cycle(c) for c in p["cycles"])
        table.add_row(p["prompt_id"], f"{p['conflicts']} / {p['comparisons']}", _share(p["conflict_ratio"]), cycles)
    if len(cyclic) > CYCLE_ROWS:
        table.add_row(f"… {len(cyclic) - CYCLE_ROWS} more (--json lists them all)", "", "", "")
    return [pooled, table]
