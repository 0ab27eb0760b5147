"""``cheems winrate``: best-of-N picks against a baseline response, judged by an LLM judge or by people.

Registered in :mod:`cheems.cli.main` as ``app.command()(winrate)``. The run is
:func:`cheems.analysis.winrate.winrate_files`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console, err, report_skipped
from cheems.cli.judge import JUDGE_OPTIONS
from cheems.cli.options import NoProgress, settings_options
from cheems.cli.scoring import scored_by
from cheems.evaluate.run_settings import WinrateSettings
from cheems.judge.judge_settings import JudgeSettings
from cheems.settings import settings_of

NEEDS = "cheems winrate needs --pool, --baseline-field and exactly one of --judge-model, --annotate or --from-export"
HINT = "e.g. cheems winrate picks.jsonl --pool pool.jsonl --baseline-field reference --judge-model NAME --base-url URL"
Opt = Optional[Path]
EXPORT_HELP = "Instead of a judge: the `cheems annotate export` of that project."


@settings_options(
    (JudgeSettings, WinrateSettings),
    *("pool", "baseline_field", *JUDGE_OPTIONS, "cache", "batch_size", "device", "annotate", "people", "overlap"),
    *("from_export", "output_json", "resamples", "bootstrap_seed", "skip_missing", "no_progress"),
    show_defaults=True,
)
def winrate(
    *,
    picks: Annotated[
        Path, typer.Argument(metavar="PICKS.jsonl", help="Picks {prompt_id, response_id, score}, one per prompt.")
    ],
    pool: Annotated[Opt, typer.Option("--pool", help="The pool the picks come from (records).")] = None,
    annotate: Annotated[
        Opt, typer.Option("--annotate", help="Instead of a judge: make a human annotation project here.")
    ] = None,
    people: Annotated[Opt, typer.Option("--people", help="With --annotate: PEOPLE.yaml.")] = None,
    from_export: Annotated[Opt, typer.Option("--from-export", help=EXPORT_HELP)] = None,
    output_json: Annotated[
        Opt, typer.Option("--output-json", help="Write the numbers and every prompt's outcome as JSON.")
    ] = None,
    no_progress: NoProgress = False,
    settings: dict[str, Any],
) -> None:
    """Win rate of best-of-N picks against a baseline: wins, losses, ties, (wins + ties/2)/n with a 95% CI."""
    from cheems.analysis.winrate import WinRate, print_winrate, print_winrate_project, winrate_files

    w = settings_of(WinrateSettings, settings)
    ok = bool(pool and w.baseline_field)
    judge = scored_by(settings, None, ok=ok, needs=NEEDS, hint=HINT, others=(annotate, from_export)).judge
    assert pool is not None  # refused above without it
    files = {"from_export": from_export, "annotate": annotate, "people": people, "output_json": output_json}
    result = winrate_files(picks, pool, w, judge, **files, progress=not no_progress, on_skipped=report_skipped)
    if isinstance(result, WinRate):
        print_winrate(result, console)
    else:  # the plan of the --annotate project
        assert annotate is not None
        print_winrate_project(result, annotate, picks, pool, w, console, err)
