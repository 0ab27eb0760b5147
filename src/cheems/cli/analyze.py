"""``cheems analyze bias``: position and length bias (Figure 15), from :mod:`cheems.analysis.bias`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console, report_skipped, report_warnings
from cheems.cli.options import SkipInvalid, settings_options
from cheems.evaluate.run_settings import BiasSettings
from cheems.settings import settings_of

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
    settings: dict[str, Any],
) -> None:
    """P(first shown wins), P(longer wins) and P(A wins) by length difference, per file, source or annotator."""
    from cheems.analysis.bias import BIAS_FILES, bias_report, load_judgements, print_bias, write_bias_outputs
    from cheems.outputs import claim_outputs

    group = settings_of(BiasSettings, settings)
    claim_outputs(
        inputs=[("FILE", f) for f in files],
        files=[("--output-json", output_json)],
        folders=[("--out", out, BIAS_FILES)],
    )
    loaded = load_judgements(files, group.by, skip_invalid=skip_invalid)
    report_skipped(loaded.skipped)
    report_warnings(loaded.warnings)
    report = bias_report(loaded, group.by, group.bins)
    print_bias(report, group.by, console)
    write_bias_outputs(report, output_json, out, title=f"bias: {', '.join(f.name for f in files)}")
    if out:
        console.print(f"wrote {', '.join(str(out / name) for name in BIAS_FILES)}", soft_wrap=True)
