"""``cheems export``: preference data in other trainers' formats (``judge-sft``: :mod:`cheems.prompts.judge_sft`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console, err, labelled, report_skipped, report_warnings
from cheems.cli.options import SkipInvalid, Workers, settings_options
from cheems.prompts.judge_sft import JudgeSftSettings
from cheems.settings import settings_of

export_app = typer.Typer(
    help="Export preference data for other trainers (a generative judge's SFT rows).", no_args_is_help=True
)

SHOWN_IDS = 20  # bench overlaps named on the warning line; the count is always given


@export_app.command("judge-sft")
@settings_options(
    JudgeSftSettings,
    *"output bench ties eval_prompt critiques criteria template ngram threshold shingle skip_invalid workers".split(),
    show_defaults=True,
)
def judge_sft(
    *,
    sources: Annotated[list[Path], typer.Argument(metavar="RANKED...", help="Ranked records (canonical format).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output JSONL file (chat rows).")],
    bench: Annotated[
        Optional[list[Path]], typer.Option("--bench", help="Bench file(s): rows whose prompt overlaps one are dropped.")
    ] = None,
    critiques: Annotated[
        Optional[Path],
        typer.Option(
            "--critiques",
            help="A teacher judge's critiques (JSONL: prompt_id, response_a, response_b, critique ending with its "
            "verdict); kept where the verdict agrees with the ranking.",
        ),
    ] = None,
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Write a generative judge's SFT rows: the judge prompt `cheems judge` sends and the verdict the ranking
    implies ([[A]]/[[B]], [[C]] for a tie with --ties), every pair in both orders."""
    from cheems.prompts.judge_sft import export_judge_sft

    cfg = settings_of(JudgeSftSettings, settings)
    result = export_judge_sft(
        sources, output, cfg, bench=bench or (), critiques=critiques, skip_invalid=skip_invalid, workers=workers
    )
    report_skipped(result.issues.skipped)
    report_warnings(result.issues.warnings)
    if result.dropped:
        ids = [d["id"] for d in result.dropped]
        more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
        err.print(
            labelled(
                "warning ",
                "yellow",
                f"dropped {len(ids)} prompts ({sum(d['rows'] for d in result.dropped)} rows) that overlap "
                f"--bench: {', '.join(ids[:SHOWN_IDS])}{more}",
            ),
            soft_wrap=True,
        )
    if critiques is not None:
        console.print(
            f"critiques: {result.critiques_kept} of {result.critiques} kept, {result.critiques_disagree} disagree "
            "with the ranking (those rows keep the bare verdict)",
            highlight=False,
        )
    labels = ", ".join(f"{n} {label}" for label, n in result.labels.items() if n)
    console.print(f"{result.records} records: {result.rows} rows ({labels}) -> {output}", highlight=False)
