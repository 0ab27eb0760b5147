"""``cheems curate``: quality filters, distant supervision, length debias, and the whole recipe.

Registered in :mod:`cheems.cli.main` as ``app.add_typer(curate_app, name="curate")``. Thin:
each command reads, calls :mod:`cheems.curate`, writes, and prints the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import report_skipped
from cheems.cli.options import SkipInvalid, Workers, from_options, settings_of, settings_options
from cheems.cli.scoring import scored_by
from cheems.curate.debias import DebiasSettings
from cheems.curate.distant import DistantSettings
from cheems.curate.filters import FilterConfig
from cheems.models.scoring import ScoringSettings

curate_app = typer.Typer(
    help="Curate a preference set: quality filters, distant supervision, length debias (Cheems part 2).",
    no_args_is_help=True,
)

InPath = Annotated[Path, typer.Argument(metavar="IN", help="Records (canonical or official format).")]
Output = Annotated[Path, typer.Option("--output", "-o", help="Output JSONL file (canonical records).")]
ReportJson = Annotated[Optional[Path], typer.Option("--report-json", help="Write the report as JSON here.")]


def _console() -> Any:
    from rich.console import Console

    return Console()


def _claim(source: Path, output: Path, report_json: Path | None, *more_inputs: tuple[str, Path | None]) -> None:
    """Check the outputs against the inputs before anything is read (see ``cheems.outputs``)."""
    from cheems.outputs import claim_outputs

    claim_outputs(inputs=[("IN", source), *more_inputs], files=[("--output", output), ("--report-json", report_json)])


def _table(title: str, rows: Sequence[tuple[str, ...]], columns: tuple[str, ...]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    return table


@curate_app.command("filter")
@settings_options(
    FilterConfig,
    "config",
    "max_chars",
    "max_length_ratio",
    "long_min_chars",
    "max_non_chinese_share",
    "report_json",
    "skip_invalid",
    "workers",
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
    from cheems.yamlfile import load_yaml_model

    _claim(source, output, report_json, ("--config", config))
    in_file = load_yaml_model(config, FilterConfig)[0].model_dump() if config else {}
    cfg = from_options(FilterConfig, settings, in_file)
    report, issues = filter_file(source, output, cfg, report_json, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    print_filter(report, output)


def print_filter(report: Any, output: Path) -> None:
    """The responses dropped by reason, with an example each, and what is left."""
    rows = [
        (
            reason,
            str(n),
            " | ".join(f"{e.prompt_id}/{e.response_id}: {e.excerpt}" for e in report.examples.get(reason, [])[:1]),
        )
        for reason, n in report.dropped.items()
    ]
    console = _console()
    console.print(_table("responses dropped", rows, ("reason", "responses", "example")))
    console.print(
        f"{report.records_in} records, {report.responses_in} responses -> {report.records_out} records, "
        f"{report.responses_out} responses ({report.records_dropped} records left with < 2 responses "
        f"dropped) -> {output}"
    )


@curate_app.command()
@settings_options(
    (ScoringSettings, DistantSettings),
    "output",
    "scores",
    "model",
    "margin",
    "sources",
    "all_sources",
    "batch_size",
    "max_length",
    "device",
    "dtype",
    "no_shared_prefix",
    "report_json",
    "skip_invalid",
    "workers",
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
    settings: dict,
) -> None:
    """Drop the judge comparisons the gold-trained RM disagrees with; resolve ranks; report conflict ratios."""
    from cheems.workflows.curation import curate_distant

    needs = "cheems curate distant needs exactly one of --scores or --model"
    hint = "e.g. cheems curate distant judged.jsonl --scores rm_scores.jsonl -o out.jsonl"
    by = scored_by(settings, scores, ok=True, needs=needs, hint=hint)
    cfg = settings_of(DistantSettings, settings)
    _claim(source, output, report_json, ("--scores", scores))
    report, issues = curate_distant(source, output, by, cfg, report_json, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    print_distant(report, cfg.margin, cfg.filtered, output)


def print_distant(report: Any, margin: float, sources: list[str] | None, output: Path) -> None:
    """The comparisons kept and dropped by source, and the conflict ratios before and after."""
    rows = [(s, str(c.before), str(c.kept), str(c.dropped)) for s, c in sorted(report.by_source.items())]
    rows.append(
        (
            "all",
            str(report.comparisons_before),
            str(report.comparisons_kept),
            str(report.comparisons_before - report.comparisons_kept),
        )
    )
    console = _console()
    console.print(
        _table(
            f"comparisons (margin {margin:g}, filtered: {'all sources' if sources is None else ', '.join(sources)})",
            rows,
            ("source", "before", "kept", "dropped"),
        )
    )
    console.print(
        f"conflict ratio {report.conflicts_before.conflict_ratio:.3f} -> {report.conflicts_after.conflict_ratio:.3f}; "
        f"{report.records_emptied} records with no comparison left (dropped); "
        f"{report.records_cyclic} records not acyclic; {report.records_out} records -> {output}"
    )


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
    settings: dict,
) -> None:
    """Downsample chosen-longer or chosen-shorter pairs so both groups are the same size."""
    from cheems.curate.debias import GROUPS, debias_file

    cfg = settings_of(DebiasSettings, settings)
    _claim(source, output, report_json)
    report, issues = debias_file(source, output, cfg, report_json, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    rows = [(g, str(report.before[g]), str(report.after[g])) for g in GROUPS]
    console = _console()
    console.print(_table(f"pairs by length ({report.unit}, seed {cfg.seed})", rows, ("group", "before", "after")))
    console.print(
        f"{report.records_in} records -> {report.records_out} ({report.records_emptied} with no pair left "
        f"dropped) -> {output}"
    )


@curate_app.command()
def run(
    recipe: Annotated[
        Path, typer.Argument(metavar="RECIPE.yaml", help="The recipe: inputs, stages and their settings.")
    ],
    skip_invalid: SkipInvalid = False,
) -> None:
    """Run a recipe: filter -> judge -> distant supervision -> debias -> merge with the human subset."""
    from cheems.workflows.curation import run_curation

    console = _console()
    summary = run_curation(recipe, skip_invalid=skip_invalid, log=console.print)
    rows = [
        (
            s.name,
            str(s.stats["prompts"]),
            str(s.stats["responses"]),
            str(s.stats["comparisons"]),
            f"{s.stats['avg_chosen_chars']:.1f}",
            f"{s.stats['avg_rejected_chars']:.1f}",
            f"{s.conflicts['conflict_ratio']:.3f}",
        )
        for s in summary.stages
    ]
    console.print(
        _table(
            "curation summary (Tables 1 and 5)",
            rows,
            ("stage", "prompts", "responses", "comparisons", "chosen chars", "rejected chars", "conflict ratio"),
        )
    )
    if summary.skipped:
        console.print(f"skipped: {', '.join(summary.skipped)}")
