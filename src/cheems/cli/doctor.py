"""``cheems doctor``: every check of an evaluation, the expensive ones too (:func:`cheems.evaluate.doctor.doctor`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli import scoring
from cheems.cli.console import console, report_warnings
from cheems.cli.judge import JUDGE_OPTIONS
from cheems.cli.options import NoProgress, Workers, settings_options
from cheems.evaluate.run_settings import DoctorSettings
from cheems.judge.judge_settings import JudgeSettings
from cheems.models.scoring import ScoringSettings
from cheems.settings import settings_of

NEEDS = "cheems doctor needs --bench and exactly one of --scores, --model or --judge-model"
HINT = "e.g. cheems doctor --bench open.jsonl --model rm/"


@settings_options(
    (ScoringSettings, JudgeSettings, DoctorSettings),
    *("bench", "scores", "model", *JUDGE_OPTIONS, "output_json", "sample", "sample_seed"),
    *(*scoring.SCORING_OPTIONS, "no_progress", "workers"),
    show_defaults=True,
)
def doctor(
    *,
    bench: Annotated[list[Path], typer.Option("--bench", help="Bench file(s); the file stem names the subset.")] = [],  # noqa: B006 - typer reads the default
    scores: Annotated[
        Optional[Path], typer.Option("--scores", help="Scores JSONL {prompt_id, response_id, score}.")
    ] = None,
    output_json: Annotated[
        Optional[Path], typer.Option("--output-json", help="Write the metrics and every check as JSON.")
    ] = None,
    cache: Annotated[
        Optional[Path],
        typer.Option("--cache", help="Score cache, or with --judge-model the judgement cache (as cheems eval)."),
    ] = None,
    no_progress: NoProgress = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Run every check of an evaluation, the expensive ones too (scoring again, asking the judge); print them."""
    from cheems.data.io import write_json
    from cheems.evaluate.doctor import doctor as run_doctor
    from cheems.evaluate.doctor import print_doctor
    from cheems.outputs import claim_outputs

    by = scoring.scored_by({**settings, "cache": cache}, scores, ok=bool(bench), needs=NEEDS, hint=HINT)
    cfg = settings_of(DoctorSettings, settings)
    claim_outputs(inputs=by.inputs(bench), files=[("--output-json", output_json)])
    run = run_doctor(bench, by, cfg, workers=workers, progress=not no_progress)
    report_warnings(run.warnings)
    print_doctor(run, console)
    if output_json:
        write_json(output_json, run.to_dict())
