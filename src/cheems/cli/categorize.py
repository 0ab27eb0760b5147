"""``cheems categorize``: place prompts in the taxonomy (:mod:`cheems.prompts.taxonomy`).

Registered in :mod:`cheems.cli.main` as the sub-app ``categorize``. ``apply`` asks an LLM for each prompt's
category path (:func:`cheems.prompts.categorize.categorize_files`): exit 0 when the run finished, even with
records that got no category (listed in ``OUT.failures.jsonl``) or a spent request budget (a rerun resumes
from the cache); exit 2 for user errors; 130 / 143 when interrupted, with the outputs unchanged and the
finished replies in the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cheems.cli.console import console
from cheems.cli.judge import RUN_OPTIONS, StatsJson
from cheems.cli.options import NoProgress, settings_options
from cheems.errors import InputError
from cheems.prompts.categorize import CategorizeSettings
from cheems.settings import settings_of

categorize_app = typer.Typer(
    help="Place prompts in the taxonomy (理解, 知识, 推理, 数学, 代码, 写作, 安全, 复杂指令 and their subcategories).",
    no_args_is_help=True,
)

PROMPTS_HELP = "Prompt records (JSONL/JSON; 'responses' may be missing, or kept when given)."
OUT_HELP = "Output JSONL: the records, each with the category path the model named, main and sub."


@categorize_app.command("apply")
@settings_options(
    CategorizeSettings,
    *("output", "base_url", "judge_model", "api_key_env", "taxonomy", "overwrite", "seed", "concurrency"),
    *(*RUN_OPTIONS, "max_tokens", "stats_json", "no_progress"),
    show_defaults=True,
)
def apply(
    *,
    source: Annotated[Path, typer.Argument(metavar="PROMPTS", help=PROMPTS_HELP)],
    output: Annotated[Path, typer.Option("--output", "-o", help=OUT_HELP)],
    stats_json: StatsJson = None,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Ask an LLM for the category path of every prompt without one; unparsable answers are counted, never guessed."""
    from cheems.prompts.categorize import categorize_files, print_categorize_run

    if not settings.get("judge_model"):
        hint = "the model name the endpoint serves, e.g. --judge-model qwen2.5-72b-instruct"
        raise InputError("cheems categorize apply needs --judge-model", path="--judge-model", hint=hint)
    cfg = settings_of(CategorizeSettings, settings)
    run = categorize_files(source, output, cfg, stats_json=stats_json, progress=not no_progress)
    print_categorize_run(run, console)
