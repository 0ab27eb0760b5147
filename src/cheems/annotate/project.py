"""``cheems annotate`` as one call per command: a new project from files (:func:`init_project`), a project's
export (:func:`export_project`) and its numbers (:func:`project_status`); :func:`print_new_project` shows a plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cheems.annotate.export import ExportStats
from cheems.annotate.people import People, ProjectSettings
from cheems.annotate.store import PlanSummary
from cheems.errors import Notify, unlisted

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class NewProject:
    """A project :func:`init_project` made: its folder, plan, team and settings."""

    folder: Path
    plan: PlanSummary
    team: People
    settings: ProjectSettings


def init_project(
    folder: Path,
    records: Path,
    people: Path,
    gold: Path | None = None,
    settings: ProjectSettings | None = None,
    *,
    skip_invalid: bool = False,
    on_skipped: Notify = unlisted,
) -> NewProject:
    """Plan the triple-wise tasks of the records file and create the project in ``folder`` (new or empty): SQLite
    file and one login token per person of the ``people`` file; the prompts of ``gold`` (known ranks) are planted
    in the queues. Lines skipped with ``skip_invalid`` go to ``on_skipped``."""
    from cheems.annotate.people import load_people
    from cheems.annotate.store import Project
    from cheems.data.stream import read_records

    settings = settings or ProjectSettings()
    team = load_people(people)
    read = read_records(records, skip_invalid=skip_invalid)
    on_skipped(read.skipped)
    gold_records = []
    if gold is not None:
        gold_read = read_records(gold, skip_invalid=skip_invalid)
        on_skipped(gold_read.skipped)
        gold_records = gold_read.records
    plan = Project.create(folder, read.records, team, gold_records, settings)[2]
    return NewProject(folder, plan, team, settings)


def export_project(folder: Path, output: Path) -> ExportStats:
    """Write every standing answer of the project as comparisons into ``output`` (then :func:`cheems.resolve` gives
    ranks and the conflict ratio); the project's own files are never replaced."""
    from cheems.annotate.export import export_records
    from cheems.annotate.store import PROJECT_FILES, Project
    from cheems.data.io import write_records
    from cheems.outputs import claim_outputs

    # the project's own files (the lock too, before any serve); a rerun may replace its export beside them
    claim_outputs(inputs=[("DIR", folder / name) for name in PROJECT_FILES], files=[("--output", output)])
    records, stats = export_records(Project.open(folder).snapshot())
    write_records(output, records)
    return stats


def project_status(folder: Path) -> dict[str, Any]:
    """The dashboard's numbers (:func:`cheems.annotate.quality.status_report`) of the project in ``folder``."""
    from cheems.annotate.quality import status_report
    from cheems.annotate.store import Project

    return status_report(Project.open(folder).snapshot())


def print_new_project(new: NewProject, records: Path, people: Path, console: Console, err: Console) -> None:
    """The planned project, its tokens and the next step; warnings (on ``err``) for prompts without a task and a team
    too small or without a reviewer."""
    from rich.text import Text  # a style for our words, never markup in a string

    from cheems.annotate.store import TOKENS_NAME

    plan, team, cfg, project = new.plan, new.team, new.settings, new.folder
    for prompt_id in plan.skipped:
        err.print(
            Text.assemble(
                ("warning: ", "yellow"), f"{records}: prompt '{prompt_id}' has fewer than 2 responses — no task"
            )
        )
    if plan.shared:
        err.print(
            Text.assemble(("warning: ", "yellow"), f"{len(plan.shared)} prompt(s) have more tasks × overlap")
            + f" (up to {plan.wanted}) than the {len(team.with_role('annotator'))} annotators: some annotators get"
            f" two tasks of one prompt (give the team {plan.wanted} annotators, or lower --overlap)"
        )
    if not team.with_role("reviewer") and not team.with_role("admin") and (cfg.review_rate > 0 or cfg.overlap > 1):
        err.print(
            Text.assemble(("warning: ", "yellow"), f"{people}: no reviewer or admin")
            + " — nothing will be reviewed or adjudicated (add a person with role: reviewer)"
        )
    console.print(
        f"planned {plan.tasks} tasks over {plan.prompts} prompts: {plan.items} queue items"
        f" ({plan.gold_items} gold), overlap {cfg.overlap}, review rate {cfg.review_rate:g}"
    )
    console.print(f"project: {project}   tokens: {project / TOKENS_NAME} (one per person; keep it private)")
    console.print(f"next: cheems annotate serve {project}")
