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
    from cheems.evaluate.suite import load_suite, suite_files, suite_scores, suite_table
    from cheems.outputs import claim_outputs

    loaded = load_suite(config)
    given = suite_scores(loaded, scores or [])  # which --scores value is NAME=FILE: the suite's bench names say
    one = given if isinstance(given, Path) else None
    named = given if isinstance(given, dict) else {}
    counted = one or next(iter(named.values()), None)  # per-bench files count as one --scores beside --model
    by = scoring.scored_by({**settings, "cache": cache}, counted, ok=True, needs=NEEDS, hint=HINT)
    files = loaded.files()
    inputs = [("CONFIG.yaml", config), *by.inputs(files), *((f"--scores {n}", f) for n, f in named.items())]
    claim_outputs(inputs=inputs, files=[("--output-json", output_json)])
    result = suite_files(loaded, named or by, workers=workers, progress=not no_progress)
    for run in result.runs:
        report_warnings(run.evaluation.warnings)
    if by.judge is None:
        scoring.warn_unmatched(result.unmatched_scores, result.scorer, "the suite's benches")
    console.print(suite_table(result))
    if result.bootstrap is not None:
        from cheems.evaluate.report_html import interval_note

        note = f"{interval_note(result.bootstrap)}; the mean's: the benches' resamples averaged"
        console.print(f"note: {note}", soft_wrap=True, markup=False)
    if output_json is not None:
        result.write(output_json)
        console.print(f"wrote {output_json}")
