"""``cheems bon``: best-of-N picks from a pool of candidates, and the best-of-n curve when the pool has gold.

Registered in :mod:`cheems.cli.main` as ``app.command()(bon)``. The run is :func:`cheems.bon_files`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli import scoring
from cheems.cli.console import console, report_skipped, report_warnings
from cheems.cli.options import SkipInvalid, settings_options
from cheems.evaluate.run_settings import BonSettings
from cheems.settings import settings_of

NEEDS = "cheems bon needs -o PICKS.jsonl and exactly one of --model or --scores"
HINT = "e.g. cheems bon pool.jsonl --model length -o picks.jsonl"
Opt = Optional[Path]


@settings_options(
    (*scoring.SCORING_MODELS, BonSettings),
    *("output", "model", "scores", "n", "sample", "seed", "compat", "output_json", "plot"),
    *scoring.SCORING_AND_SERVER,
    "skip_invalid",
    show_defaults=True,
)
def bon(
    *,
    pool: Annotated[Path, typer.Argument(metavar="POOL", help="Canonical records: each prompt's candidate responses.")],
    output: Annotated[
        Opt, typer.Option("--output", "-o", help="PICKS.jsonl: one {prompt_id, response_id, score} per prompt.")
    ] = None,
    scores: Annotated[
        Opt, typer.Option("--scores", help="Pick by this scores file instead of scoring with --model.")
    ] = None,
    output_json: Annotated[
        Opt, typer.Option("--output-json", help="Write the counts and the best-of-n curve as JSON.")
    ] = None,
    plot: Annotated[Opt, typer.Option("--plot", help="Draw the best-of-n curve into this PNG.")] = None,
    skip_invalid: SkipInvalid = False,
    settings: dict[str, Any],
) -> None:
    """Pick the best-scored response of each prompt (best-of-N); with gold ranks or scores, draw the best-of-n curve."""
    from cheems.analysis.bon_files import bon_files, print_bon

    by = scoring.scored_by(settings, scores, ok=output is not None, needs=NEEDS, hint=HINT)
    assert output is not None  # refused above without -o
    drawn = settings_of(BonSettings, settings)
    result = bon_files(
        pool,
        output,
        by,
        drawn,
        output_json=output_json,
        plot=plot,
        skip_invalid=skip_invalid,
        on_skipped=report_skipped,
        on_warnings=report_warnings,
    )
    if result is not None:
        print_bon(result, output, console)
