"""``cheems correlate``: do benchmark numbers predict downstream results across reward models (Figure 5)?

Registered in :mod:`cheems.cli.main` as ``app.command()(correlate)``. The numbers come from
:mod:`cheems.evaluate.correlate`; this module parses and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from cheems.cli.console import console
from cheems.cli.options import settings_of, settings_options
from cheems.evaluate.run_settings import CorrelateSettings

if TYPE_CHECKING:  # imported when run: numpy and scipy load only for this command
    from cheems.evaluate.correlate import Correlation


@settings_options(
    CorrelateSettings, "bench", "downstream", "output_json", "output", "resamples", "seed", show_defaults=True
)
def correlate(
    *,
    bench: Annotated[
        list[Path],
        typer.Option("--bench", help="An RM's cheems eval --output-json file, once per RM; its stem names the RM."),
    ],
    downstream: Annotated[
        Path, typer.Option("--downstream", help="CSV with one row per RM: name,<downstream metric>,...")
    ],
    output_json: Annotated[
        Optional[Path], typer.Option("--output-json", help="Write the correlations as JSON.")
    ] = None,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Folder for correlate.html, scatter.png (Figure 5) and heatmap.png."),
    ] = None,
    settings: dict,
) -> None:
    """Pearson, Spearman and Kendall of every benchmark number with every downstream metric, over RMs."""
    from cheems.cli.console import show_warning
    from cheems.data.io import write_bytes, write_json, write_text
    from cheems.errors import CheemsWarning
    from cheems.evaluate.correlate import PAGE_FILES, correlate_html, heatmap_chart, load_rm_table, scatter_chart
    from cheems.evaluate.correlate import correlate as correlations_of
    from cheems.outputs import claim_outputs, together

    boot = settings_of(CorrelateSettings, settings)
    claim_outputs(
        inputs=[*(("--bench", b) for b in bench), ("--downstream", downstream)],
        files=[("--output-json", output_json)],
        folders=[("--output", output, PAGE_FILES)],
    )
    table = load_rm_table(bench, downstream)
    for note in table.warnings:
        show_warning(note, CheemsWarning)
    result = correlations_of(table, boot.resamples, boot.seed)
    print_correlations(result)
    with together():
        if output_json:
            write_json(output_json, {"correlations": [c.to_dict() for c in result]})
        if output:
            write_text(output / "correlate.html", correlate_html(table, result))
            write_bytes(output / "scatter.png", scatter_chart(table, result))
            write_bytes(output / "heatmap.png", heatmap_chart(table, result))


def print_correlations(result: list[Correlation]) -> None:
    """The table: one row per (benchmark number, metric), each coefficient with its interval."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from cheems.evaluate.correlate import METHODS, cell

    c = result[0]
    title = f"correlation over {c.n} RMs ({c.level:.0%} bootstrap CI over RMs)"
    # fits an 80-column terminal: no vertical rules, each interval under its coefficient; a long
    # benchmark number or metric name folds, nothing is cut
    table = Table(title=title, box=box.SIMPLE_HEAVY, collapse_padding=True)
    table.add_column("benchmark", overflow="fold")
    table.add_column("downstream", overflow="fold")
    for method in METHODS:
        table.add_column(method, justify="right", overflow="fold")
    for c in result:
        cells = (cell(c, m, p_value=False, compact=True) for m in METHODS)
        table.add_row(escape(c.bench), escape(c.downstream), *cells)
    console.print(table)
    console.print("p-values: in --output-json and the -o page", highlight=False)
