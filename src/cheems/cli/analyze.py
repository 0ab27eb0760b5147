"""``cheems analyze``: analyses of labels; ``analyze bias`` measures position and length bias (Figure 15).

Registered in :mod:`cheems.cli.main` as ``app.add_typer(analyze_app, name="analyze")``. Thin: the
numbers, charts and page come from :mod:`cheems.evaluate.bias`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console, report_skipped, report_warnings
from cheems.cli.options import SkipInvalid, settings_of, settings_options
from cheems.evaluate.run_settings import BiasSettings

analyze_app = typer.Typer(
    help="Analyse labels: position and length bias of annotators and judges (Cheems Figure 15).",
    no_args_is_help=True,
)


@analyze_app.command()
@settings_options(BiasSettings, "by", "bins", "out", "output_json", "skip_invalid", show_defaults=True)
def bias(
    *,
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="Records with comparisons (cheems judge, cheems annotate export, imported sets) "
            "or a judge's cheems eval --details files.",
        ),
    ],
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="Folder for bias.json, position.png, length.png and bias.html."),
    ] = None,
    output_json: Annotated[
        Optional[Path], typer.Option("--output-json", help="Write the numbers as JSON here.")
    ] = None,
    skip_invalid: SkipInvalid = False,
    settings: dict,
) -> None:
    """P(first shown wins), P(longer wins) and P(A wins) by length difference, per file, source or annotator."""
    from cheems.data.io import write_json
    from cheems.evaluate.bias import BIAS_FILES, bias_report, load_judgements, write_bias
    from cheems.outputs import claim_outputs, together

    group = settings_of(BiasSettings, settings)
    by = group.by
    claim_outputs(
        inputs=[("FILE", f) for f in files],
        files=[("--output-json", output_json)],
        folders=[("--out", out, BIAS_FILES)],
    )
    loaded = load_judgements(files, by, skip_invalid=skip_invalid)
    report_skipped(loaded.skipped)
    report_warnings(loaded.warnings)
    report = bias_report(loaded, by, group.bins)
    print_bias(report, by)
    with together():
        if output_json:
            write_json(output_json, report.to_dict())
        if out:
            write_bias(report, out, title=f"bias: {', '.join(f.name for f in files)}")
    if out:
        console.print(f"wrote {', '.join(str(out / name) for name in BIAS_FILES)}", soft_wrap=True)


def print_bias(report: Any, by: str) -> None:
    """The bias of each group as a table, then the report's notes."""
    from rich.table import Table

    from cheems.evaluate.bias import TABLE_COLUMNS, table_rows

    table = Table(title=f"position and length bias, by {by}")
    table.add_column(TABLE_COLUMNS[0], overflow="fold")  # a group name is wrapped, never cut
    for col in TABLE_COLUMNS[1:]:
        table.add_column(col, justify="right")
    for row in table_rows(report):
        table.add_row(*row)
    console.print(table)
    for note in report.notes:
        console.print(f"note: {note}", soft_wrap=True)
