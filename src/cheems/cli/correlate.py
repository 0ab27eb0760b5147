"""``cheems correlate``: do benchmark numbers predict downstream results (Figure 5)? :mod:`cheems.analysis.correlate`"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console
from cheems.cli.options import settings_options
from cheems.evaluate.run_settings import CorrelateSettings
from cheems.settings import settings_of


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
    settings: dict[str, Any],
) -> None:
    """Pearson, Spearman and Kendall of every benchmark number with every downstream metric, over RMs."""
    from cheems.analysis.correlate import PAGE_FILES, load_rm_table, print_correlations, write_correlations
    from cheems.analysis.correlate import correlate as correlations_of
    from cheems.cli.console import show_warning
    from cheems.errors import CheemsWarning
    from cheems.outputs import claim_outputs

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
    print_correlations(result, console)
    write_correlations(table, result, output_json, output)
