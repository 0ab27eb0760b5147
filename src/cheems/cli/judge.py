"""``cheems judge``: LLM-judge comparisons of every response pair (OpenAI-compatible API or local model).

Registered in :mod:`cheems.cli.main` as ``app.command()(judge)``. Exit 0 when the run finished,
even with failed verdicts (listed in ``OUT.failures.jsonl``) or a spent request budget (a rerun
resumes from the cache); exit 2 for user errors; 130 (Ctrl-C) or 143 (SIGTERM) when interrupted,
with the outputs unchanged and the finished judgements in the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console, report_skipped
from cheems.cli.options import NoProgress, SkipInvalid, settings_options
from cheems.errors import InputError
from cheems.judge.judge_settings import JudgeSettings
from cheems.settings import settings_of

# The judge options of the commands that ask a judge for a number (eval --judge-model, winrate).
JUDGE_OPTIONS = (
    *("judge_model", "base_url", "backend", "api_key_env", "seed", "both_orders", "concurrency", "template"),
    *("criteria", "timeout", "max_retries", "max_consecutive_failures", "give_up_after", "max_requests"),
    *("max_tokens", "retry_failed", "price_in", "price_out"),
)
# The options of a run against an endpoint, after the model's (judge, generate).
RUN_OPTIONS = ("cache", "timeout", "max_retries", "max_requests", "max_consecutive_failures", "give_up_after")
OUT_HELP = "Output JSONL: the records with the judge's comparisons appended."
StatsJson = Annotated[Optional[Path], typer.Option("--stats-json", help="Write the run's statistics as JSON here.")]


@settings_options(
    JudgeSettings,
    *("output", "base_url", "judge_model", "backend", "api_key_env", "concurrency", "seed", "both_orders"),
    *RUN_OPTIONS,
    *("criteria", "template", "price_in", "price_out", "max_tokens", "batch_size", "device", "retry_failed"),
    *("stats_json", "skip_invalid", "no_progress"),
    show_defaults=True,
)
def judge(
    *,
    source: Annotated[
        Path, typer.Argument(metavar="IN", help="Records (canonical or official format) with 2+ responses each.")
    ],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help=OUT_HELP)] = None,
    stats_json: StatsJson = None,
    skip_invalid: SkipInvalid = False,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Judge every response pair of every prompt with an LLM (A / B / C verdicts), as in the Cheems paper."""
    from cheems.judge.judge_files import judge_files, print_judge_run

    if output is None:
        raise InputError("cheems judge needs an output file", path="--output", hint="add -o judged.jsonl")
    if not settings.get("judge_model"):
        hint = "the model name the endpoint serves, e.g. --judge-model qwen2.5-72b-instruct"
        raise InputError("cheems judge needs --judge-model", path="--judge-model", hint=hint)
    cfg = settings_of(JudgeSettings, settings)
    progress = not no_progress
    run = judge_files(
        source,
        output,
        cfg,
        stats_json=stats_json,
        skip_invalid=skip_invalid,
        progress=progress,
        on_skipped=report_skipped,
    )
    print_judge_run(run, console)
