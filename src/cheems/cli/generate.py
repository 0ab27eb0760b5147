"""``cheems generate``: N sampled responses per prompt (a candidate pool), from an endpoint or a local model;
run once per model, each on the previous output, it builds one pool from many models.

Registered in :mod:`cheems.cli.main` as ``app.command()(generate)``. Exit 0 when the run finished,
even with failed samples (listed in ``OUT.failures.jsonl``) or a spent request budget (a rerun
resumes from the cache); exit 2 for user errors and for a run that got no sample at all (one line
with the count of each failure reason); 130 / 143 when interrupted, with the outputs
unchanged and the finished samples in the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console
from cheems.cli.judge import RUN_OPTIONS, StatsJson
from cheems.cli.options import NoProgress, settings_options
from cheems.errors import InputError
from cheems.llm.sampling import GenerateSettings
from cheems.settings import settings_of

PROMPTS_HELP = (
    "Prompt records or a pool (JSONL/JSON; 'responses' may be missing). Given responses are kept; this model's "
    "samples already there are not asked again, and a text another model gave is stored once with both names."
)
OUT_HELP = "Output JSONL: the records with the samples appended as responses."


@settings_options(
    GenerateSettings,
    *("n", "output", "base_url", "gen_model", "backend", "api_key_env", "temperature", "max_tokens", "seed"),
    *("concurrency", *RUN_OPTIONS, "batch_size", "device", "stats_json", "no_progress"),
    show_defaults=True,
)
def generate(
    *,
    source: Annotated[Path, typer.Argument(metavar="PROMPTS", help=PROMPTS_HELP)],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help=OUT_HELP)] = None,
    stats_json: StatsJson = None,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Sample N responses per prompt from a chat model (OpenAI-compatible endpoint or local) into a pool."""
    from cheems.llm.sampling import generate_files, print_generate_run

    if output is None:
        raise InputError("cheems generate needs an output file", path="--output", hint="add -o pool.jsonl")
    if not settings.get("gen_model"):
        hint = "the model name the endpoint serves, or with --backend hf a model folder"
        raise InputError("cheems generate needs --gen-model", path="--gen-model", hint=hint)
    cfg = settings_of(GenerateSettings, settings)
    run = generate_files(source, output, cfg, stats_json=stats_json, progress=not no_progress)
    print_generate_run(run, console)
