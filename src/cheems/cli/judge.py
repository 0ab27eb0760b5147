"""``cheems judge``: LLM-judge comparisons of every response pair (OpenAI-compatible API or local model).

Registered in :mod:`cheems.cli.main` as ``app.command()(judge)``. Exit 0 when the run finished,
even with failed verdicts (listed in ``OUT.failures.jsonl``) or a spent request budget (a rerun
resumes from the cache); exit 2 for user errors; 130 (Ctrl-C) or 143 (SIGTERM) when interrupted,
with the outputs unchanged and the finished judgements in the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from cheems.cli.console import report_skipped
from cheems.cli.options import NoProgress, SkipInvalid, settings_of, settings_options
from cheems.errors import InputError
from cheems.judge.judge_settings import JudgeSettings
from cheems.llm.endpoint import EndpointSettings
from cheems.llm.runs import failures_path, write_run

M = TypeVar("M", bound=EndpointSettings)


# The judge options of the commands that ask a judge for a number (eval --judge-model, winrate).
JUDGE_OPTIONS = (
    "judge_model",
    "base_url",
    "backend",
    "api_key_env",
    "seed",
    "both_orders",
    "concurrency",
    "template",
    "criteria",
    "timeout",
    "max_retries",
    "max_consecutive_failures",
    "give_up_after",
    "max_requests",
    "max_tokens",
    "retry_failed",
    "price_in",
    "price_out",
)


def endpoint_settings(model: type[M], given: dict[str, Any]) -> M:
    """Judge or generation settings from those of the options given that are its fields; a missing API key is a
    user error here, before any file is read."""
    cfg = settings_of(model, given)
    if cfg.backend == "openai":
        cfg.resolve_api_key()
    return cfg


@settings_options(
    JudgeSettings,
    "output",
    "base_url",
    "judge_model",
    "backend",
    "api_key_env",
    "concurrency",
    "seed",
    "both_orders",
    "cache",
    "timeout",
    "max_retries",
    "max_requests",
    "max_consecutive_failures",
    "give_up_after",
    "criteria",
    "template",
    "price_in",
    "price_out",
    "max_tokens",
    "batch_size",
    "device",
    "retry_failed",
    "stats_json",
    "skip_invalid",
    "no_progress",
    show_defaults=True,
)
def judge(
    *,
    source: Annotated[
        Path, typer.Argument(metavar="IN", help="Records (canonical or official format) with 2+ responses each.")
    ],
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Output JSONL: the records with the judge's comparisons appended."),
    ] = None,
    stats_json: Annotated[
        Optional[Path], typer.Option("--stats-json", help="Write the run's statistics as JSON here.")
    ] = None,
    skip_invalid: SkipInvalid = False,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Judge every response pair of every prompt with an LLM (A / B / C verdicts), as in the Cheems paper."""
    from cheems.data.stream import read_records
    from cheems.judge import judge_records
    from cheems.judge.judgements import JudgeCache
    from cheems.outputs import claim_outputs

    if output is None:
        raise InputError("cheems judge needs an output file", path="--output", hint="add -o judged.jsonl")
    if not settings.get("judge_model"):
        raise InputError(
            "cheems judge needs --judge-model",
            path="--judge-model",
            hint="the model name the endpoint serves, e.g. --judge-model qwen2.5-72b-instruct",
        )
    cfg = endpoint_settings(JudgeSettings, settings)
    side = failures_path(output)
    cache_path = JudgeCache(cfg.cache).path
    claim_outputs(
        inputs=[("IN", source), *cfg.inputs()],
        files=[("--output", output), ("failures list of --output", side), ("--stats-json", stats_json)],
        note=f"finished judgements are in {cache_path}; rerun the same command to resume",
    )
    result = read_records(source, skip_invalid=skip_invalid)
    report_skipped(result.skipped)
    judged = judge_records(result.records, cfg, progress=not no_progress)
    write_run(output, judged.records, judged.failures, side, stats_json, judged.stats.to_dict())
    print_summary(judged.stats, output, side if judged.failures else None)


def add_request_rows(table: Any, stats: Any) -> None:
    """The rows of a run against an endpoint (judge or generate): failures by reason, the budget, requests, tokens."""
    from cheems.judge import reason_text

    table.add_row("failed", str(stats.failed_total))
    for reason, n in sorted(stats.failed.items()):
        table.add_row(f"  {reason}: {reason_text(reason)}", str(n))
    table.add_row("not attempted (budget)", str(stats.not_attempted))
    table.add_row("requests sent", str(stats.requests))
    table.add_row("tokens in / out", f"{stats.prompt_tokens} / {stats.completion_tokens}")


def print_budget_reached(console: Any, stats: Any, items: str, cached: str) -> None:
    """What to do when the request budget ran out: rerun, the cache keeps what was done."""
    if stats.budget_exhausted:
        console.print(
            f"[yellow]request budget reached[/]: {stats.not_attempted} {items} not asked; "
            f"rerun the same command to resume (cached {cached} are reused)"
        )


def print_summary(stats: Any, output: Path, failures: Path | None) -> None:
    """The run as a table (stdout), then what to do about failures or a spent budget."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"judge: {stats.judge_model}", show_header=False)
    table.add_column("what")
    table.add_column("n", justify="right")
    table.add_row("questions (pair × shown order)", str(stats.pairs))
    table.add_row("judged now", str(stats.judged))
    table.add_row("from cache", str(stats.cached))
    add_request_rows(table, stats)
    table.add_row("cost", f"{stats.cost:.4f}")
    total = sum(stats.shown_labels.values())
    if total:
        table.add_row("verdicts A / B / C (shown order)", " / ".join(str(stats.shown_labels[k]) for k in "ABC"))
        table.add_row("position bias: share of A among A/B", "-" if stats.a_share is None else f"{stats.a_share:.3f}")
    if stats.consistency is not None:
        c = stats.consistency
        rate = "-" if c["rate"] is None else f"{c['rate']:.3f}"
        table.add_row("both orders: consistent pairs", f"{c['consistent']} / {c['pairs']} ({rate})")
    console.print(table)
    if stats.pairs == 0:
        console.print("[yellow]nothing to ask[/]: no record has two responses this judge has not compared yet")
    console.print(f"wrote {output}")
    if failures is not None:
        console.print(
            f"[yellow]{stats.failed_total} question(s) without a verdict[/], listed in {failures} "
            "(rerun to retry connection failures; --retry-failed re-asks unparseable verdicts)"
        )
    print_budget_reached(console, stats, "question(s)", "judgements")
