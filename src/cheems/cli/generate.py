"""``cheems generate``: N sampled responses per prompt (a candidate pool), from an endpoint or a local model.

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

from cheems.cli.judge import add_request_rows, endpoint_settings, print_budget_reached
from cheems.cli.options import NoProgress, settings_options
from cheems.errors import InputError
from cheems.llm.runs import failures_path, write_run
from cheems.llm.sampling import GenerateSettings


@settings_options(
    GenerateSettings,
    "n",
    "output",
    "base_url",
    "gen_model",
    "backend",
    "api_key_env",
    "temperature",
    "max_tokens",
    "seed",
    "concurrency",
    "cache",
    "timeout",
    "max_retries",
    "max_requests",
    "max_consecutive_failures",
    "give_up_after",
    "batch_size",
    "device",
    "stats_json",
    "no_progress",
    show_defaults=True,
)
def generate(
    *,
    source: Annotated[
        Path,
        typer.Argument(
            metavar="PROMPTS", help="Prompt records (JSONL/JSON; 'responses' may be missing, or kept when given)."
        ),
    ],
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Output JSONL: the records with the samples appended as responses."),
    ] = None,
    stats_json: Annotated[
        Optional[Path], typer.Option("--stats-json", help="Write the run's statistics as JSON here.")
    ] = None,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Sample N responses per prompt from a chat model (OpenAI-compatible endpoint or local) into a pool."""
    from cheems.llm.sampling import SampleCache, generate_records, read_prompts
    from cheems.outputs import claim_outputs

    if output is None:
        raise InputError("cheems generate needs an output file", path="--output", hint="add -o pool.jsonl")
    if not settings.get("gen_model"):
        raise InputError(
            "cheems generate needs --gen-model",
            path="--gen-model",
            hint="the model name the endpoint serves, or with --backend hf a model folder",
        )
    cfg = endpoint_settings(GenerateSettings, settings)
    side = failures_path(output)
    cache_path = SampleCache(cfg.cache).path
    claim_outputs(
        inputs=[("PROMPTS", source), ("--cache", cache_path)],
        files=[("--output", output), ("failures list of --output", side), ("--stats-json", stats_json)],
        note=f"finished samples are in {cache_path}; rerun the same command to resume",
    )
    result = generate_records(read_prompts(source), cfg, progress=not no_progress)
    write_run(output, result.records, result.failures, side, stats_json, result.stats.to_dict())
    print_summary(result.stats, output, side if result.failures else None)


def print_summary(stats: Any, output: Path, failures: Path | None) -> None:
    """The run as a table (stdout), then what to do about failures or a spent budget."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"generate: {stats.gen_model}", show_header=False)
    table.add_column("what")
    table.add_column("n", justify="right")
    table.add_row("prompts", str(stats.prompts))
    table.add_row("samples (prompt × n)", str(stats.samples))
    table.add_row("generated now", str(stats.generated))
    table.add_row("from cache", str(stats.cached))
    add_request_rows(table, stats)
    console.print(table)
    console.print(f"wrote {output}")
    if stats.prompts_left_out:
        console.print(f"[yellow]{stats.prompts_left_out} prompt(s) left out[/]: no response at all (rerun to resume)")
    if failures is not None:
        console.print(
            f"[yellow]{stats.failed_total} sample(s) failed[/], listed in {failures} (rerun to ask them again)"
        )
    print_budget_reached(console, stats, "sample(s)", "samples")
