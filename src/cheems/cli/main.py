"""The ``cheems`` command: parses arguments and calls the packages. No logic of its own."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli import scoring
from cheems.cli.console import console, report_checks, report_skipped, report_warnings, run
from cheems.cli.judge import JUDGE_OPTIONS
from cheems.cli.options import NoProgress, SkipInvalid, Verbose, Workers, settings_options
from cheems.data.importers import FORMATS, ImportSettings
from cheems.data.split import SplitSettings
from cheems.errors import CheemsWarning, InputError
from cheems.evaluate.run_settings import CompatSettings, DemoSettings, EvalSettings
from cheems.judge.judge_settings import JudgeSettings
from cheems.llm.endpoint import ConnectionSettings
from cheems.models.scoring import ScoringSettings
from cheems.runtime import is_main_process
from cheems.settings import settings_of

app = typer.Typer(
    help="Build and evaluate Chinese reward models (Cheems, Wen et al. 2025).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _show_version(given: bool) -> None:
    if given:
        from cheems.runtime import package_version

        console.print(f"cheems {package_version()}", highlight=False)
        raise typer.Exit()


@app.callback()
def _global_options(
    verbose: Verbose = False,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print cheems' version and exit.", is_eager=True, callback=_show_version),
    ] = False,
) -> None:
    """Options for every command (given before it: cheems --verbose eval ...)."""
    from cheems.models.quiet import set_verbose

    set_verbose(verbose)
    if not verbose:  # libraries' Python warnings are noise to a user; ours are one line each
        warnings.filterwarnings("ignore")
        warnings.filterwarnings("default", category=CheemsWarning)


Output = Annotated[Path, typer.Option("--output", "-o", help="Output JSONL file.")]


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Record files (canonical or official format).")],
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    plot: Annotated[
        Optional[Path],
        typer.Option("--plot", help="Draw the prompts per category and subcategory (a sunburst) to this PNG."),
    ] = None,
) -> None:
    """Check record files and print their statistics in the shape of the paper's Table 1, responses per model
    and prompts per category."""
    from cheems.analysis.distribution import validate_files
    from cheems.data.dataset_stats import print_stats

    rows = validate_files(files, skip_invalid=skip_invalid, workers=workers, plot=plot)
    for row in rows:
        report_skipped(row.issues.skipped)
        report_warnings(row.issues.warnings)
    print_stats(rows, console)
    if plot is not None:
        console.print(f"wrote {plot}")


@app.command("import")
@settings_options(ImportSettings, "output", "skip_invalid", "lower_is_better", "workers", show_defaults=True)
def import_(
    *,
    args: Annotated[
        list[str],
        typer.Argument(
            metavar="[FORMAT] IN",
            help=f"FORMAT, guessed when left out (never another benchmark's): {FORMATS.help_text()}.",
        ),
    ],
    output: Output,
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Convert pairwise, ranked, rating, official or other benchmarks' files to canonical records."""
    from cheems.data.importers import convert_file

    cfg = settings_of(ImportSettings, settings)
    if len(args) == 2 and args[0] in FORMATS:
        fmt, source = args
    elif len(args) == 1:
        fmt, source = None, args[0]
    else:
        raise InputError(
            f"expected '[FORMAT] IN', got {' '.join(args)!r}", hint=f"FORMAT is one of {', '.join(FORMATS)}"
        )
    n, issues = convert_file(source, fmt, output, cfg, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    report_warnings(issues.warnings)
    console.print(f"wrote {n} records to {output}")


@app.command()
def resolve(
    source: Annotated[Path, typer.Argument(metavar="IN", help="Records with comparisons.")],
    output: Output,
    stats_json: Annotated[
        Optional[Path], typer.Option("--stats-json", help="Write pooled conflict statistics here.")
    ] = None,
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
) -> None:
    """Resolve conflicting comparisons into ranks (Algorithm 1) and report the conflict ratio."""
    from cheems.ranking.resolve import resolve_file

    stats, warnings, issues = resolve_file(source, output, stats_json, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    report_warnings(warnings)
    console.print(
        f"{stats.records} records, {stats.comparisons} comparisons, {stats.conflicts} conflicts "
        f"(conflict ratio {stats.conflict_ratio:.3f}) -> {output}"
    )


@app.command()
@settings_options(
    SplitSettings, "train", "test", "test_fraction", "seed", "skip_invalid", "workers", show_defaults=True
)
def split(
    *,
    source: Annotated[Path, typer.Argument(metavar="IN", help="Record file (any format read_records reads).")],
    train: Annotated[Path, typer.Option("--train", help="Output JSONL for the training split.")],
    test: Annotated[Path, typer.Option("--test", help="Output JSONL for the held-out split.")],
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Hold out a fixed share of prompts (stable: depends only on prompt ids and the seed)."""
    from cheems.data.split import split_file

    cfg = settings_of(SplitSettings, settings)
    n_train, n_test, issues = split_file(source, train, test, cfg, skip_invalid=skip_invalid, workers=workers)
    report_skipped(issues.skipped)
    console.print(f"{n_train} prompts -> {train}, {n_test} held out -> {test}")


BenchOpt = Annotated[list[Path], typer.Option("--bench", help="Bench file(s); the file stem names the subset.")]


@app.command()
@settings_options(
    (*scoring.SCORING_MODELS, CompatSettings),
    *("model", "bench", "output", "compat", *scoring.SCORING_AND_SERVER, "workers"),
    show_defaults=True,
)
def score(
    *,
    bench: BenchOpt = [],  # noqa: B006 - typer reads the default
    output: Output = Path("scores.jsonl"),
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Score every response of the bench files with a reward model (--compat upstream: as eval --compat upstream
    asks it, without the sys_prompt)."""
    from cheems.data.io import ReadResult, write_scores
    from cheems.evaluate.evaluation import score_files
    from cheems.models.scoring import ScoringSettings
    from cheems.outputs import claim_outputs

    cfg = settings_of(ScoringSettings, settings)
    if not cfg.model or not bench:
        raise InputError(
            "cheems score needs --model and at least one --bench",
            hint="e.g. cheems score --model length --bench open.jsonl -o s.jsonl",
        )
    connection = settings_of(ConnectionSettings, settings)
    claim_outputs(inputs=cfg.inputs(bench), files=[("--output", output)])
    issues = ReadResult()
    compat = settings_of(CompatSettings, settings).compat
    scores = score_files(bench, cfg, connection, workers=workers, issues=issues, compat=compat)
    if not is_main_process():  # under a launcher every rank scores its share of each chunk; rank 0 writes
        for _ in scores:
            pass
        return
    n = write_scores(output, scores)
    report_warnings(issues.warnings)
    console.print(f"wrote {n} scores to {output}")


@app.command("eval")
@settings_options(
    (ScoringSettings, JudgeSettings, EvalSettings),
    *("bench", "scores", "model", *JUDGE_OPTIONS),
    *"metric compat output_json report details resamples bootstrap_seed checks".split(),
    *(*scoring.SCORING_OPTIONS, "no_progress", "workers"),
    show_defaults=True,
)
def eval_(
    *,
    bench: BenchOpt = [],  # noqa: B006 - typer reads the default
    scores: Annotated[
        Optional[Path], typer.Option("--scores", help="Scores JSONL {prompt_id, response_id, score}.")
    ] = None,
    output_json: Annotated[
        Optional[Path], typer.Option("--output-json", help="Write the metrics as JSON (docs/formats.md).")
    ] = None,
    details: Annotated[
        Optional[Path], typer.Option("--details", help="Write every prompt's pairs and outcomes (for cheems compare).")
    ] = None,
    report: Annotated[
        Optional[Path], typer.Option("--report", help="Folder for report.json, report.md and report.html.")
    ] = None,
    cache: scoring.EitherCache = None,
    no_progress: NoProgress = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Evaluate a reward model, a scores file or an LLM judge on bench files: accuracy and exact match."""
    from cheems.evaluate.evaluation import eval_run
    from cheems.evaluate.report import print_evaluation

    needs = "cheems eval needs --bench and exactly one of --scores, --model or --judge-model"
    hint = "e.g. cheems eval --bench open.jsonl --model length"
    by = scoring.scored_by({**settings, "cache": cache}, scores, ok=bool(bench), needs=needs, hint=hint)
    measure = settings_of(EvalSettings, settings)
    outputs = {"output_json": output_json, "report": report, "details": details}
    run = eval_run(bench, by, measure, **outputs, workers=workers, progress=not no_progress)
    if run is None:  # under a launcher rank 0 prints and writes the one report
        return
    report_warnings(run.warnings)
    if by.judge is None:
        scoring.warn_unmatched(run.report.unmatched_scores, by.source, "the bench")
    print_evaluation(run, console)
    report_checks(run.report.checks)
    run.write(output_json, report, details)


@app.command()
@settings_options(DemoSettings, "output", "model", "no_train", show_defaults=True)
def demo(
    *,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the demo's files.")] = Path("cheems-demo"),
    settings: dict[str, Any],
) -> None:
    """Run the whole job offline on the shipped sample: resolve, score, evaluate, train, evaluate."""
    from cheems.outputs import claim_outputs
    from cheems.workflows.demo import run_demo

    cfg = settings_of(DemoSettings, settings)
    claim_outputs(folders=[("--output", output, ())])
    run_demo(output, cfg.model, console, train=not cfg.no_train)


# the commands and sub-apps living in their own modules, in --help's order: cheems.cli.MODULE[:its name there];
# the command is named as the module, or as its name there less _command or _app when a module holds several
# (an underscore is a dash: train_judge_command is train-judge)
MODULES = (
    "prompts:dedup prompts:decontaminate categorize:categorize_app train:train_command judge bon suite compare generate"
)
MODULES += " train_judge:train_judge_command"
MODULES += " leaderboard correlate doctor curate:curate_app annotate:annotate_app serve export:export_app"
for _module, _, _attr in (m.partition(":") for m in (*MODULES.split(), "analyze:analyze_app", "winrate")):
    _command = getattr(importlib.import_module(f"cheems.cli.{_module}"), _attr or _module)
    _name = (_attr.removesuffix("_command").removesuffix("_app") or _module).replace("_", "-")
    if isinstance(_command, typer.Typer):
        app.add_typer(_command, name=_name)
    else:
        app.command(_name)(_command)


def main() -> None:
    """Entry point of the ``cheems`` command."""
    run(app)
