"""What the curate commands print: each step's report as a table and one line of what is left."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich loads only when a table is printed
    from rich.console import Console
    from rich.table import Table

    from cheems.curate.debias import DebiasReport
    from cheems.curate.distant import DistantReport
    from cheems.curate.filters import FilterReport
    from cheems.curate.recipe import RecipeSummary


def report_table(title: str, rows: Sequence[Sequence[str]], columns: Sequence[str]) -> Table:
    """A table with the first column left-aligned and the numbers right-aligned."""
    from rich.table import Table

    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    return table


def print_filter(report: FilterReport, output: str | Path, console: Console) -> None:
    """The responses dropped by reason, with an example each, and what is left."""
    rows = [
        (
            reason,
            str(n),
            " | ".join(f"{e.prompt_id}/{e.response_id}: {e.excerpt}" for e in report.examples.get(reason, [])[:1]),
        )
        for reason, n in report.dropped.items()
    ]
    console.print(report_table("responses dropped", rows, ("reason", "responses", "example")))
    console.print(
        f"{report.records_in} records, {report.responses_in} responses -> {report.records_out} records, "
        f"{report.responses_out} responses ({report.records_dropped} records left with < 2 responses "
        f"dropped) -> {output}"
    )


def print_distant(
    report: DistantReport, margin: float, sources: Sequence[str] | None, output: str | Path, console: Console
) -> None:
    """The comparisons kept and dropped by source, and the conflict ratios before and after."""
    rows = [(s, str(c.before), str(c.kept), str(c.dropped)) for s, c in sorted(report.by_source.items())]
    dropped = report.comparisons_before - report.comparisons_kept
    rows.append(("all", str(report.comparisons_before), str(report.comparisons_kept), str(dropped)))
    filtered = "all sources" if sources is None else ", ".join(sources)
    columns = ("source", "before", "kept", "dropped")
    console.print(report_table(f"comparisons (margin {margin:g}, filtered: {filtered})", rows, columns))
    console.print(
        f"conflict ratio {report.conflicts_before.conflict_ratio:.3f} -> {report.conflicts_after.conflict_ratio:.3f}; "
        f"{report.records_emptied} records with no comparison left (dropped); "
        f"{report.records_cyclic} records not acyclic; {report.records_out} records -> {output}"
    )


def print_debias(report: DebiasReport, output: str | Path, console: Console) -> None:
    """The pairs of each length group before and after, and what is left."""
    from cheems.curate.debias import GROUPS

    rows = [(g, str(report.before[g]), str(report.after[g])) for g in GROUPS]
    title = f"pairs by length ({report.unit}, seed {report.seed})"
    console.print(report_table(title, rows, ("group", "before", "after")))
    console.print(
        f"{report.records_in} records -> {report.records_out} ({report.records_emptied} with no pair left "
        f"dropped) -> {output}"
    )


def print_summary(summary: RecipeSummary, console: Console) -> None:
    """Each stage's statistics (the paper's Tables 1 and 5), and the stages skipped."""
    rows = [
        (
            s.name,
            str(s.stats["prompts"]),
            str(s.stats["responses"]),
            str(s.stats["comparisons"]),
            f"{s.stats['avg_chosen_chars']:.1f}",
            f"{s.stats['avg_rejected_chars']:.1f}",
            f"{s.conflicts['conflict_ratio']:.3f}",
        )
        for s in summary.stages
    ]
    columns = ("stage", "prompts", "responses", "comparisons", "chosen chars", "rejected chars", "conflict ratio")
    console.print(report_table("curation summary (Tables 1 and 5)", rows, columns))
    if summary.skipped:
        console.print(f"skipped: {', '.join(summary.skipped)}")
