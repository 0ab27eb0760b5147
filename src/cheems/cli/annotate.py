"""``cheems annotate``: the human annotation app — init a project, serve it, export the labels, show the numbers.

Registered in :mod:`cheems.cli.main` as ``app.add_typer(annotate_app, name="annotate")``. Thin:
the project lives in :mod:`cheems.annotate` (:mod:`cheems.annotate.project`: one call per command).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.annotate.people import ProjectSettings, ServeSettings, StatusSettings
from cheems.cli.console import console, err, report_skipped
from cheems.cli.options import SkipInvalid, settings_options
from cheems.settings import settings_of

annotate_app = typer.Typer(
    help="Human annotation (the paper's triple-wise protocol): init a project, serve it, export, status.",
    no_args_is_help=True,
)

ProjectDir = Annotated[Path, typer.Argument(metavar="DIR", help="The project folder made by `cheems annotate init`.")]
GOLD_HELP = "Prompts with a known rank, planted invisibly in the queues."


@annotate_app.command()
@settings_options(ProjectSettings, "overlap", "review_rate", "seed", "agreement_target", show_defaults=True)
def init(
    *,
    records: Annotated[Path, typer.Argument(metavar="RECORDS.jsonl", help="Prompts with their responses.")],
    project: Annotated[Path, typer.Option("--project", help="The project folder to create (new or empty).")],
    people: Annotated[Path, typer.Option("--people", help="PEOPLE.yaml: name, role and categories of everyone.")],
    gold: Annotated[Optional[Path], typer.Option("--gold", help=GOLD_HELP)] = None,
    skip_invalid: SkipInvalid = False,
    settings: dict[str, Any],
) -> None:
    """Plan the triple-wise tasks and create the project: SQLite file and one login token per person."""
    from cheems.annotate.project import init_project, print_new_project

    cfg = settings_of(ProjectSettings, settings)
    new = init_project(project, records, people, gold, cfg, skip_invalid=skip_invalid, on_skipped=report_skipped)
    print_new_project(new, records, people, console, err)


@annotate_app.command()
@settings_options(ServeSettings, "host", "port", show_defaults=True)
def serve(*, project: ProjectDir, settings: dict[str, Any]) -> None:
    """Run the annotation web app (pages for people, JSON API for scripts) until Ctrl-C."""
    from cheems.annotate.store import TOKENS_NAME
    from cheems.annotate.web import serve as run_server

    cfg = settings_of(ServeSettings, settings)
    if cfg.host not in ("127.0.0.1", "localhost", "::1"):
        from rich.text import Text  # a style for our words, never markup in a string

        err.print(
            Text.assemble(
                ("warning: ", "yellow"), f"listening on {cfg.host}: anyone who can reach it sees the login page"
            )
        )
    address = f"http://{f'[{cfg.host}]' if ':' in cfg.host else cfg.host}:{cfg.port}/"
    line = f"serving {project} at {address} — log in with a token from {project / TOKENS_NAME}"
    run_server(project, cfg, ready=lambda: console.print(line, soft_wrap=True))


@annotate_app.command()
def export(
    project: ProjectDir,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output JSONL: records with the human comparisons.")],
) -> None:
    """Write every standing answer as comparisons (then `cheems resolve` gives ranks and the conflict ratio)."""
    from cheems.annotate.project import export_project

    stats = export_project(project, output)
    console.print(
        f"wrote {stats.prompts} prompts, {stats.comparisons} comparisons from {stats.answers} answers"
        f" ({stats.adjudicated} adjudicated) to {output}; {stats.waiting} prompt(s) have no answer yet"
    )
    console.print(f"next: cheems resolve {output} -o ranked.jsonl")


@annotate_app.command()
@settings_options(StatusSettings, "as_json", show_defaults=True)
def status(*, project: ProjectDir, settings: dict[str, Any]) -> None:
    """The dashboard's numbers: progress, throughput, agreement, gold accuracy, conflict ratio, queues."""
    from cheems.annotate.project import project_status
    from cheems.annotate.status_tables import print_status

    as_json = settings_of(StatusSettings, settings).as_json
    report = project_status(project)
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2, allow_nan=False))
    else:
        print_status(report, console)
