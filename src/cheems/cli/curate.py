"""``cheems curate``: quality filters, distant supervision, length debias, the whole recipe (:mod:`cheems.curate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console, report_skipped
from cheems.cli.options import SkipInvalid, Workers, settings_options
from cheems.cli.scoring import scored_by
from cheems.curate.debias import DebiasSettings
from cheems.curate.distant import DistantSettings
from cheems.curate.filters import FilterConfig
from cheems.models.scoring import ScoringSettings
from cheems.outputs import claim_outputs
from cheems.settings import from_options, settings_of

curate_app = typer.Typer(
    help="Curate a preference set: quality filters, distant supervision, length debias (Cheems part 2).",
    no_args_is_help=True,
)

InPath = Annotated[Path, typer.Argument(metavar="IN", help="Records (canonical or official format).")]
Output = Annotated[Path, typer.Option("--output", "-o", help="Output JSONL file (canonical records).")]
ReportJson = Annotated[Optional[Path], typer.Option("--report-json", help="Write the report as JSON here.")]


def _claim(source: Path, output: Path, report_json: Path | None, *more_inputs: tuple[str, Path | None]) -> None:
    """Check the outputs against the inputs before anything is read (see ``cheems.outputs``): the library function
    checks them again, but knows neither a ``--config`` file nor, before a model scores, the command's outputs."""
    claim_outputs(inputs=[("IN", source), *more_inputs], files=[("--output", output), ("--report-json", report_json)])


@curate_app.command("filter")
@settings_options(
    FilterConfig,
    *"config max_chars max_length_ratio long_min_chars max_non_chinese_share report_json skip_invalid workers".split(),
)
def filter_(
    *,
    source: InPath,
    output: Output,
    config: Annotated[
        Optional[Path],
        typer.Option("--config", "-c", help="YAML with FilterConfig thresholds; the options below override it."),
    ] = None,
    report_json: ReportJson = None,
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Drop empty, over-long, non-Chinese, truncated and repetitive responses (with a report)."""
    from cheems.curate.filters import filter_file
    from cheems.curate.tables import print_filter
    from cheems.yamlfile import load_yaml_model

    _claim(source, output, report_json, ("--config", config))
    in_file = load_yaml_model(config, FilterConfig)[0].model_dump() if config else {}
    cfg = from_options(FilterConfig, settings, in_file)
    report, issues = filter_file(source, output, cfg, report_json, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    print_filter(report, output, console)


@curate_app.command()
@settings_options(
    (ScoringSettings, DistantSettings),
    *"output scores model margin sources all_sources batch_size max_length device dtype no_shared_prefix".split(),
    *("report_json", "skip_invalid", "workers"),
    show_defaults=True,
)
def distant(
    *,
    source: InPath,
    output: Output,
    scores: Annotated[
        Optional[Path],
        typer.Option("--scores", help="Scores JSONL {prompt_id, response_id, score} of the gold-trained RM."),
    ] = None,
    report_json: ReportJson = None,
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Drop the judge comparisons the gold-trained RM disagrees with; resolve ranks; report conflict ratios."""
    from cheems.curate.tables import print_distant
    from cheems.workflows.curation import curate_distant

    needs = "cheems curate distant needs exactly one of --scores or --model"
    hint = "e.g. cheems curate distant judged.jsonl --scores rm_scores.jsonl -o out.jsonl"
    by = scored_by(settings, scores, ok=True, needs=needs, hint=hint)
    cfg = settings_of(DistantSettings, settings)
    _claim(source, output, report_json, ("--scores", scores))
    report, issues = curate_distant(source, output, by, cfg, report_json, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    print_distant(report, cfg.margin, cfg.filtered, output, console)


@curate_app.command()
@settings_options(
    DebiasSettings, "output", "seed", "tokenizer", "report_json", "skip_invalid", "workers", show_defaults=True
)
def debias(
    *,
    source: InPath,
    output: Output,
    report_json: ReportJson = None,
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Downsample chosen-longer or chosen-shorter pairs so both groups are the same size."""
    from cheems.curate.debias import debias_file
    from cheems.curate.tables import print_debias

    cfg = settings_of(DebiasSettings, settings)
    report, issues = debias_file(source, output, cfg, report_json, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    print_debias(report, output, console)


@curate_app.command()
def run(
    recipe: Annotated[
        Path, typer.Argument(metavar="RECIPE.yaml", help="The recipe: inputs, stages and their settings.")
    ],
    skip_invalid: SkipInvalid = False,
) -> None:
    """Run a recipe: filter -> judge -> distant supervision -> debias -> merge with the human subset."""
    from cheems.curate.tables import print_summary
    from cheems.workflows.curation import run_curation

    summary = run_curation(recipe, skip_invalid=skip_invalid, log=console.print)
    print_summary(summary, console)
