"""``cheems categorize``: place prompts in the taxonomy (:mod:`cheems.prompts.taxonomy`).

Registered in :mod:`cheems.cli.main` as the sub-app ``categorize``. ``apply --judge-model`` asks an LLM for each
prompt's category path (:func:`cheems.prompts.categorize.categorize_files`): exit 0 when the run finished, even
with records that got no category (listed in ``OUT.failures.jsonl``) or a spent request budget (a rerun resumes
from the cache); exit 2 for user errors; 130 / 143 when interrupted, with the outputs unchanged and the
finished replies in the cache. ``fit`` trains a local classifier and ``apply --classifier`` uses it
(:mod:`cheems.prompts.classifier`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console
from cheems.cli.judge import RUN_OPTIONS, StatsJson
from cheems.cli.options import NoProgress, settings_options
from cheems.errors import InputError
from cheems.prompts.categorize import CategorizeSettings
from cheems.prompts.classifier import ClassifySettings, FitSettings
from cheems.settings import settings_of

categorize_app = typer.Typer(
    help="Place prompts in the taxonomy (理解, 知识, 推理, 数学, 代码, 写作, 安全, 复杂指令 and their subcategories).",
    no_args_is_help=True,
)

PROMPTS_HELP = "Prompt records (JSONL/JSON; 'responses' may be missing, or kept when given)."
CLASSIFIER_HELP = "A classifier folder from cheems categorize fit (instead of --judge-model)."
LABELLED_HELP = "Prompt records whose category is a main/sub path of the taxonomy (those without one are not used)."
OUT_HELP = "Output JSONL: the records, each with the category path the model named, main and sub."


@categorize_app.command("apply")
@settings_options(
    (CategorizeSettings, ClassifySettings),
    *("output", "judge_model", "base_url", "api_key_env", "taxonomy", "classifier", "min_confidence", "overwrite"),
    *("seed", "concurrency", *RUN_OPTIONS, "max_tokens", "stats_json", "no_progress"),
    show_defaults=True,
)
def apply(
    *,
    source: Annotated[Path, typer.Argument(metavar="PROMPTS", help=PROMPTS_HELP)],
    output: Annotated[Path, typer.Option("--output", "-o", help=OUT_HELP)],
    classifier: Annotated[Optional[Path], typer.Option("--classifier", help=CLASSIFIER_HELP)] = None,
    stats_json: StatsJson = None,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Give each prompt without a category its path: by an LLM (--judge-model) or a classifier (--classifier)."""
    if (classifier is None) == (not settings.get("judge_model")):
        raise InputError(
            "cheems categorize apply needs exactly one of --judge-model (an LLM at --base-url) or --classifier "
            "(a folder from cheems categorize fit)",
            path="--judge-model" if classifier is None else "--classifier",
            hint="e.g. --judge-model qwen2.5-72b-instruct --base-url http://localhost:8000/v1",
        )
    if classifier is not None:
        from cheems.prompts.classifier import classify_files, print_classify_run

        fields = CategorizeSettings.model_fields  # --help shows their defaults: only another value is given
        llm_only = [k for k, v in settings.items() if k in fields and k != "overwrite" and v != fields[k].default]
        if llm_only:
            option = "--" + llm_only[0].replace("_", "-")
            hint = "leave it out, or use --judge-model instead of --classifier"
            raise InputError(f"{option} is for --judge-model, not --classifier", path=option, hint=hint)
        stats = classify_files(source, output, classifier, settings_of(ClassifySettings, settings), stats_json)
        print_classify_run(stats, output, console)
        return
    from cheems.prompts.categorize import categorize_files, print_categorize_run

    if settings.get("min_confidence"):
        hint = "an LLM's answer has no probability; leave --min-confidence out"
        raise InputError("--min-confidence is for --classifier", path="--min-confidence", hint=hint)
    cfg = settings_of(CategorizeSettings, settings)
    run = categorize_files(source, output, cfg, stats_json=stats_json, progress=not no_progress)
    print_categorize_run(run, console)


@categorize_app.command("fit")
@settings_options(
    FitSettings,
    "output",
    "encoder",
    "held_out",
    "seed",
    "taxonomy",
    "max_length",
    "device",
    "dtype",
    show_defaults=True,
)
def fit(
    *,
    sources: Annotated[list[Path], typer.Argument(metavar="LABELLED...", help=LABELLED_HELP)],
    output: Annotated[Path, typer.Option("--output", "-o", help="Classifier folder (created when missing).")],
    settings: dict[str, Any],
) -> None:
    """Train a local classifier (sentence embeddings + logistic regression) on prompts that carry categories."""
    from cheems.prompts.classifier import fit_files, print_fit

    report = fit_files(sources, output, settings_of(FitSettings, settings))
    print_fit(report, output, console)
