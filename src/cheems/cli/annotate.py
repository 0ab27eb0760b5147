"""``cheems annotate``: the human annotation app — init a project, serve it, export the labels, show the numbers.

Registered in :mod:`cheems.cli.main` as ``app.add_typer(annotate_app, name="annotate")``. Thin:
the project lives in :mod:`cheems.annotate`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.annotate.people import ProjectSettings, ServeSettings
from cheems.cli.console import console, err, report_skipped
from cheems.cli.options import SkipInvalid, from_options, settings_options

annotate_app = typer.Typer(
    help="Human annotation (the paper's triple-wise protocol): init a project, serve it, export, status.",
    no_args_is_help=True,
)

ProjectDir = Annotated[Path, typer.Argument(metavar="DIR", help="The project folder made by `cheems annotate init`.")]


@annotate_app.command()
@settings_options(ProjectSettings, "overlap", "review_rate", "seed", "agreement_target", show_defaults=True)
def init(
    *,
    records: Annotated[Path, typer.Argument(metavar="RECORDS.jsonl", help="Prompts with their responses.")],
    project: Annotated[Path, typer.Option("--project", help="The project folder to create (new or empty).")],
    people: Annotated[Path, typer.Option("--people", help="PEOPLE.yaml: name, role and categories of everyone.")],
    gold: Annotated[
        Optional[Path], typer.Option("--gold", help="Prompts with a known rank, planted invisibly in the queues.")
    ] = None,
    skip_invalid: SkipInvalid = False,
    settings: dict[str, Any],
) -> None:
    """Plan the triple-wise tasks and create the project: SQLite file and one login token per person."""
    from cheems.annotate.people import load_people
    from cheems.annotate.store import Project
    from cheems.data.stream import read_records

    cfg = from_options(ProjectSettings, settings)
    team = load_people(people)
    result = read_records(records, skip_invalid=skip_invalid)
    report_skipped(result.skipped)
    gold_records = []
    if gold is not None:
        gold_result = read_records(gold, skip_invalid=skip_invalid)
        report_skipped(gold_result.skipped)
        gold_records = gold_result.records
    _, _, plan = Project.create(project, result.records, team, gold_records, cfg)
    print_plan(plan, team, cfg, records, people, project)


@annotate_app.command()
@settings_options(ServeSettings, "host", "port", show_defaults=True)
def serve(*, project: ProjectDir, settings: dict[str, Any]) -> None:
    """Run the annotation web app (pages for people, JSON API for scripts) until Ctrl-C."""
    from cheems.annotate.store import TOKENS_NAME
    from cheems.annotate.web import serve as run_server

    cfg = from_options(ServeSettings, settings)
    if cfg.host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"[yellow]warning:[/] listening on {cfg.host}: anyone who can reach it sees the login page")
    address = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    run_server(
        project,
        cfg,
        ready=lambda: console.print(
            f"serving {project} at http://{address}:{cfg.port}/ — log in with a token from {project / TOKENS_NAME}",
            soft_wrap=True,
        ),
    )


@annotate_app.command()
def export(
    project: ProjectDir,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output JSONL: records with the human comparisons.")],
) -> None:
    """Write every standing answer as comparisons (then `cheems resolve` gives ranks and the conflict ratio)."""
    from cheems.annotate.export import export_records
    from cheems.annotate.store import PROJECT_FILES, Project
    from cheems.data.io import write_records
    from cheems.outputs import claim_outputs

    # the project's own files (the lock too, before any serve); a rerun may replace its export beside them
    claim_outputs(inputs=[("DIR", project / name) for name in PROJECT_FILES], files=[("--output", output)])
    opened = Project.open(project)
    records, stats = export_records(opened.snapshot())
    write_records(output, records)
    console.print(
        f"wrote {stats.prompts} prompts, {stats.comparisons} comparisons from {stats.answers} answers"
        f" ({stats.adjudicated} adjudicated) to {output}; {stats.waiting} prompt(s) have no answer yet"
    )
    console.print(f"next: cheems resolve {output} -o ranked.jsonl")


@annotate_app.command()
def status(
    project: ProjectDir,
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON (as GET /api/status).")] = False,
) -> None:
    """The dashboard's numbers: progress, throughput, agreement, gold accuracy, conflict ratio, queues."""
    from cheems.annotate.quality import status_report
    from cheems.annotate.store import Project

    report = status_report(Project.open(project).snapshot())
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2, allow_nan=False))
        return
    from cheems.cli.annotate_status import print_status

    print_status(report, console)


def print_plan(plan: Any, team: Any, cfg: ProjectSettings, records: Path, people: Path, project: Path) -> None:
    """The planned project, its tokens and the next step; warnings for prompts without a task and a team too
    small or without a reviewer."""
    from cheems.annotate.store import TOKENS_NAME

    for prompt_id in plan.skipped:
        err.print(f"[yellow]warning:[/] {records}: prompt '{prompt_id}' has fewer than 2 responses — no task")
    if plan.shared:
        err.print(
            f"[yellow]warning:[/] {len(plan.shared)} prompt(s) have more tasks × overlap (up to {plan.wanted})"
            f" than the {len(team.with_role('annotator'))} annotators: some annotators get two tasks of one prompt"
            f" (give the team {plan.wanted} annotators, or lower --overlap)"
        )
    if not team.with_role("reviewer") and not team.with_role("admin") and (cfg.review_rate > 0 or cfg.overlap > 1):
        err.print(
            f"[yellow]warning:[/] {people}: no reviewer or admin — nothing will be reviewed or adjudicated"
            " (add a person with role: reviewer)"
        )
    console.print(
        f"planned {plan.tasks} tasks over {plan.prompts} prompts: {plan.items} queue items"
        f" ({plan.gold_items} gold), overlap {cfg.overlap}, review rate {cfg.review_rate:g}"
    )
    console.print(f"project: {project}   tokens: {project / TOKENS_NAME} (one per person; keep it private)")
    console.print(f"next: cheems annotate serve {project}")
