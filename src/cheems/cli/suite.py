"""``cheems suite``: every bench of a suite config evaluated by one scorer, a table and one JSON
(:func:`cheems.suite_files`). Registered in :mod:`cheems.cli.main` as ``app.command()(suite)``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli import scoring
from cheems.cli.console import console, report_warnings
from cheems.cli.judge import JUDGE_OPTIONS
from cheems.cli.options import NoProgress, Workers, settings_options
from cheems.judge.judge_settings import JudgeSettings
from cheems.models.scoring import ScoringSettings

NEEDS = "cheems suite needs exactly one of --scores, --model or --judge-model"
HINT = "e.g. cheems suite suite.yaml --model length"


@settings_options(
    (ScoringSettings, JudgeSettings),
    *("scores", "model", *JUDGE_OPTIONS, "output_json"),
    *(*scoring.SCORING_OPTIONS, "no_progress", "workers"),
    show_defaults=True,
)
def suite(
    *,
    config: Annotated[Path, typer.Argument(metavar="CONFIG.yaml", help="The suite: its benches and their metrics.")],
    scores: Annotated[
        Optional[list[str]],
        typer.Option(
            "--scores",
            metavar="FILE|NAME=FILE",
            help="Scores JSONL {prompt_id, response_id, score} of every bench, or NAME=FILE once per bench.",
        ),
    ] = None,
    output_json: Annotated[
        Optional[Path],
        typer.Option("--output-json", help="Write every bench's report and the summary (docs/suite.md)."),
    ] = None,
    cache: scoring.EitherCache = None,
    no_progress: NoProgress = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Run a benchmark suite: every bench of CONFIG.yaml with its metric, by one scorer, with intervals."""
    from cheems.evaluate.suite import print_suite, suite_and_scores, suite_run

    loaded, named, counted = suite_and_scores(config, scores or [])
    by = scoring.scored_by({**settings, "cache": cache}, counted, ok=True, needs=NEEDS, hint=HINT)
    result = suite_run(config, loaded, by, named, output_json=output_json, workers=workers, progress=not no_progress)
    for run in result.runs:
        report_warnings(run.evaluation.warnings)
    if by.judge is None:
        scoring.warn_unmatched(result.unmatched_scores, result.scorer, "the suite's benches")
    print_suite(result, console)
    if output_json is not None:
        result.write(output_json)
        console.print(f"wrote {output_json}")
