"""A read-only copy of a project's state, as plain rows: what the dashboard and the export compute from.

:meth:`cheems.annotate.store.Project.snapshot` builds one in a single read transaction, so
the numbers of one status report all describe the same moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cheems.annotate.people import Person, ProjectSettings
from cheems.data.schema import Record


@dataclass(frozen=True)
class TaskRow:
    """One planned task: response ids in plan order."""

    task_id: str
    prompt_id: str
    responses: list[str]
    gold: bool


@dataclass(frozen=True)
class ItemRow:
    """One entry of one person's queue (``kind``: annotate, review or adjudicate)."""

    item_id: str
    kind: str
    task_id: str
    person: str
    state: str
    """annotate: open, submitted or approved (a rejected item is open again, its earlier answers kept);
    review and adjudicate: open or done."""
    gold: bool
    shown: list[str]
    """Response ids in the order this person sees them (key A first)."""
    reviews: str | None = None
    """For a review item: the annotate item it reviews (None for a planted gold review)."""


@dataclass(frozen=True, kw_only=True)
class StoredAnswer:
    """An answer as the project stores it, by response id (:func:`cheems.annotate.answer.by_id` writes it)."""

    scores: dict[str, int]
    levels: list[list[str]]
    spans: list[dict[str, Any]]
    flags: dict[str, list[str]]
    note: str
    override: bool


@dataclass(frozen=True, kw_only=True)
class AnswerRow(StoredAnswer):
    """One submitted answer, with its item, task, person and time."""

    item_id: str
    task_id: str
    person: str
    kind: str
    submitted_at: datetime
    current: bool
    """The latest answer of an item that stands (submitted, approved, or a finished adjudication)."""


@dataclass(frozen=True)
class ReviewRow:
    """One reviewer's verdict. For a planted gold review, ``correct`` says whether the verdict was right."""

    item_id: str
    reviewed: str | None
    person: str
    approve: bool
    reason: str
    gold: bool
    correct: bool | None
    at: datetime


@dataclass
class Snapshot:
    """Everything a status report or an export needs, read at one moment."""

    settings: ProjectSettings
    people: list[Person]
    prompts: dict[str, Record]
    """Prompts to annotate, in file order (the gold prompts are not here)."""
    gold: dict[str, Record]
    """Gold prompts, with their known ``rank``."""
    tasks: list[TaskRow] = field(default_factory=list)
    items: list[ItemRow] = field(default_factory=list)
    answers: list[AnswerRow] = field(default_factory=list)
    reviews: list[ReviewRow] = field(default_factory=list)
