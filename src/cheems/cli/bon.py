"""``cheems bon``: best-of-N picks from a pool of candidates, and the best-of-n curve when the pool has gold.

Registered in :mod:`cheems.cli.main` as ``app.command()(bon)``. The picking and the curve live in
:mod:`cheems.evaluate.bon`; this module parses options, reads and writes files and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cheems.cli import scoring
from cheems.cli.console import console, report_skipped, report_warnings
from cheems.cli.options import SkipInvalid, settings_of, settings_options
from cheems.errors import InputError
from cheems.evaluate.run_settings import BonSettings
from cheems.runtime import is_main_process


@settings_options(
    (*scoring.SCORING_MODELS, BonSettings),
    "output",
    "model",
    "scores",
    "n",
    "sample",
    "seed",
    "output_json",
    "plot",
    *scoring.SCORING_AND_SERVER,
    "skip_invalid",
    show_defaults=True,
)
def bon(
    *,
    pool: Annotated[Path, typer.Argument(metavar="POOL", help="Canonical records: each prompt's candidate responses.")],
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="PICKS.jsonl: one {prompt_id, response_id, score} per prompt."),
    ] = None,
    scores: Annotated[
        Optional[Path], typer.Option("--scores", help="Pick by this scores file instead of scoring with --model.")
    ] = None,
    output_json: Annotated[
        Optional[Path], typer.Option("--output-json", help="Write the counts and the best-of-n curve as JSON.")
    ] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Draw the best-of-n curve into this PNG.")] = None,
    skip_invalid: SkipInvalid = False,
    settings: dict,
) -> None:
    """Pick the best-scored response of each prompt (best-of-N); with gold ranks or scores, draw the best-of-n curve."""
    from cheems.data.stream import read_records
    from cheems.evaluate.evaluation import bon as best_of
    from cheems.outputs import claim_outputs

    needs = "cheems bon needs -o PICKS.jsonl and exactly one of --model or --scores"
    hint = "e.g. cheems bon pool.jsonl --model length -o picks.jsonl"
    by = scoring.scored_by(settings, scores, ok=output is not None, needs=needs, hint=hint)
    drawn = settings_of(BonSettings, settings)
    outputs = [("--output", output), ("--output-json", output_json), ("--plot", plot)]
    claim_outputs(inputs=[("POOL", pool), *by.inputs([])], files=outputs)
    read = read_records(pool, skip_invalid=skip_invalid)
    report_skipped(read.skipped)
    report_warnings(read.warnings)
    result = best_of(read.records, by.scores_or_scorer(), **dict(drawn), source=by.source, cache=by.cache())
    if not is_main_process():  # under a launcher rank 0 writes the picks
        return
    report_gaps(result, by.source)
    scoring.warn_unmatched(result.unmatched_scores, by.source, "the pool")
    if plot is not None and not result.curve:
        raise InputError(
            "--plot needs gold quality in the pool", path=str(pool), hint="give records a rank or responses a score"
        )
    assert output is not None  # refused above without -o
    result.write(output, output_json, plot)
    print_result(result, output)


def report_gaps(result, source: str) -> None:
    """Warnings for prompts or responses that have no score (they cannot be picked), and for an ``-n`` above
    every prompt's candidates."""
    warnings = []
    if result.n_asked is not None and result.n_asked > result.n:
        warnings.append(
            InputError(
                f"{result.n_asked} candidates asked for, but no prompt has more than {result.n} scored responses: "
                f"N = {result.n}",
                path="-n",
                hint=f"give -n {result.n} or less, or leave it out for all of each prompt's",
            )
        )
    if result.unscored_responses:
        first = f" (first prompt without any: '{result.without_scores[0]}')" if result.without_scores else ""
        warnings.append(
            InputError(
                f"{result.unscored_responses} response(s) have no score and are not candidates; "
                f"{len(result.without_scores)} prompt(s) have no scored response and no pick{first}",
                path=source,
                hint="check that the scores and the pool use the same ids",
            )
        )
    report_warnings(warnings)


def print_result(result, output: Path) -> None:
    """The picks written, the gold counts, and the curve as a table."""
    from rich.table import Table

    console.print(f"best-of-{result.n} ({result.sample}): {len(result.picks)} picks -> {output}")
    if not result.curve:
        console.print(f"no curve: no prompt has gold quality ({result.without_gold} without gold)")
        return
    gold = result.to_dict()["gold"]
    console.print(
        f"gold ({gold['kind']}) for {gold['prompts']} prompts; left out: {gold['without_gold']} without gold, "
        f"{gold['single_candidate']} with one candidate"
    )
    table = Table(title=f"best-of-n by {result.scorer}: mean quality and top-tier share")
    for col in ("n", "quality: pick", "oracle", "random", "top tier: pick", "oracle", "random"):
        table.add_column(col, justify="right")
    for point in result.curve:
        q, t = point["quality"], point["top_tier"]
        table.add_row(
            str(point["n"]),
            *(f"{q[k]:.3f}" for k in ("pick", "oracle", "random")),
            *(f"{t[k]:.3f}" for k in ("pick", "oracle", "random")),
        )
    console.print(table)
