"""``cheems winrate``: best-of-N picks against a baseline response, judged by an LLM judge or by people.

Registered in :mod:`cheems.cli.main` as ``app.command()(winrate)``. Thin: the matchups, outcomes
and interval live in :mod:`cheems.evaluate.winrate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console, err, report_skipped
from cheems.cli.judge import JUDGE_OPTIONS
from cheems.cli.options import NoProgress, from_options, settings_of, settings_options
from cheems.cli.scoring import scored_by
from cheems.errors import InputError
from cheems.evaluate.run_settings import WinrateSettings
from cheems.judge.judge_settings import JudgeSettings

NEEDS = "cheems winrate needs --pool, --baseline-field and exactly one of --judge-model, --annotate or --from-export"
HINT = "e.g. cheems winrate picks.jsonl --pool pool.jsonl --baseline-field reference --judge-model NAME --base-url URL"


@settings_options(
    (JudgeSettings, WinrateSettings),
    "pool",
    "baseline_field",
    *JUDGE_OPTIONS,
    "cache",
    "batch_size",
    "device",
    "annotate",
    "people",
    "overlap",
    "from_export",
    "output_json",
    "resamples",
    "bootstrap_seed",
    "skip_missing",
    "no_progress",
    show_defaults=True,
)
def winrate(
    *,
    picks: Annotated[
        Path, typer.Argument(metavar="PICKS.jsonl", help="Picks {prompt_id, response_id, score}, one per prompt.")
    ],
    pool: Annotated[Optional[Path], typer.Option("--pool", help="The pool the picks come from (records).")] = None,
    annotate: Annotated[
        Optional[Path], typer.Option("--annotate", help="Instead of a judge: make a human annotation project here.")
    ] = None,
    people: Annotated[Optional[Path], typer.Option("--people", help="With --annotate: PEOPLE.yaml.")] = None,
    from_export: Annotated[
        Optional[Path],
        typer.Option("--from-export", help="Instead of a judge: the `cheems annotate export` of that project."),
    ] = None,
    output_json: Annotated[
        Optional[Path], typer.Option("--output-json", help="Write the numbers and every prompt's outcome as JSON.")
    ] = None,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Win rate of best-of-N picks against a baseline: wins, losses, ties, (wins + ties/2)/n with a 95% CI."""
    from cheems.data.io import write_json
    from cheems.data.stream import read_records
    from cheems.evaluate.winrate import build_matchups
    from cheems.evaluate.winrate import winrate as winrate_of
    from cheems.outputs import Named, claim_outputs

    w = settings_of(WinrateSettings, settings)
    ok = bool(pool and w.baseline_field)
    cfg = scored_by(settings, None, ok=ok, needs=NEEDS, hint=HINT, others=(annotate, from_export)).judge
    assert pool is not None and w.baseline_field is not None  # refused above without them
    if annotate is not None and people is None:
        raise InputError("is needed with --annotate", path="--people", hint="PEOPLE.yaml names who annotates")
    inputs: list[Named] = [("PICKS", picks), ("--pool", pool), ("--people", people), ("--from-export", from_export)]
    inputs += cfg.inputs() if cfg is not None else []
    claim_outputs(inputs=inputs, files=[("--output-json", output_json)], folders=[("--annotate", annotate, ())])
    read = read_records(pool)
    report_skipped(read.skipped)
    matchups, skipped = build_matchups(picks, read.records, pool, w.baseline_field, w.skip_missing)
    report_skipped(skipped)
    if annotate is not None:
        assert people is not None  # refused above without --people
        make_project(annotate, people, w.overlap, matchups, picks, pool, w.baseline_field)
        return
    assert cfg is not None or from_export is not None  # the one left of the three
    by = cfg if cfg is not None else from_export
    result = winrate_of(matchups, by, progress=not no_progress, resamples=w.resamples, seed=w.bootstrap_seed)
    print_winrate(result, cfg.judge_model if cfg is not None else f"people ({from_export})")
    if output_json:
        write_json(output_json, result.to_dict())


def make_project(
    folder: Path, people: Path, overlap: int, matchups: list, picks: Path, pool: Path, baseline_field: str
) -> None:
    """Create the annotation project of the matchups and say how to serve, export and read it back."""
    from cheems.annotate.people import ProjectSettings, load_people
    from cheems.annotate.store import TOKENS_NAME, Project
    from cheems.evaluate.winrate import annotation_records

    team = load_people(people)
    settings = from_options(ProjectSettings, {"overlap": overlap})
    _, _, plan = Project.create(folder, annotation_records(matchups), team, (), settings)
    if plan.shared:
        err.print(f"[yellow]warning:[/] {len(plan.shared)} prompt(s) have more overlap than annotators")
    console.print(
        f"planned {plan.tasks} pairwise tasks (pick vs baseline) over {plan.prompts} prompts, overlap {overlap}"
    )
    console.print(f"project: {folder}   tokens: {folder / TOKENS_NAME} (one per person; keep it private)")
    console.print(f"next: cheems annotate serve {folder}", soft_wrap=True)
    console.print(f"then: cheems annotate export {folder} -o exported.jsonl", soft_wrap=True)
    console.print(
        f"then: cheems winrate {picks} --pool {pool} --baseline-field {baseline_field} --from-export exported.jsonl",
        soft_wrap=True,
    )


def print_winrate(result: Any, judged_by: str) -> None:
    """The numbers as a small table on stdout."""
    from rich.table import Table

    numbers = result.to_dict()
    table = Table(title=f"win rate against the baseline: {judged_by}", show_header=False)
    table.add_column("what")
    table.add_column("n", justify="right")
    for key in ("n", "wins", "losses", "ties"):
        table.add_row(key, str(numbers[key]))
    if numbers["parse_failures"]:
        table.add_row(
            "unparseable replies (their prompts are ties)",
            f"{numbers['parse_failures']} in {numbers['prompts_with_parse_failure']} prompt(s)",
        )
    rate, interval = numbers["win_rate"], numbers["interval"]
    text = "-" if rate is None else f"{rate:.3f}"
    if interval is not None:
        text += f" [{interval['low']:.3f}, {interval['high']:.3f}]"
    table.add_row("win rate (wins + ties/2)/n, 95% CI", text)
    console.print(table)
