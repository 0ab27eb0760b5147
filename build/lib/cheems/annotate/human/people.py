"""Who annotates (``PEOPLE.yaml``) and how a project is run (overlap, review rate, seed)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from cheems.data.settings import Cli, Number, Settings, Text, TextList, Whole, invalid, rule

Role = Literal["annotator", "reviewer", "admin"]


class Person(Settings):
    """One member of the team: annotators annotate, reviewers review and adjudicate, admins see everything."""

    name: Annotated[
        Text,
        rule(
            lambda v: bool(v.strip()) and "\t" not in v and "\n" not in v,
            "name {value!r} must be a non-empty text without tabs or line breaks",
        ),
    ]
    role: Role = "annotator"
    categories: TextList = Field(default_factory=list)
    """Main categories this person knows best (an annotator's tasks prefer them)."""


class People(Settings):
    """``PEOPLE.yaml``: ``people: [{name, role, categories}, ...]``."""

    people: list[Person]

    @model_validator(mode="after")
    def _sound_team(self) -> "People":
        seen: set[str] = set()
        for i, person in enumerate(self.people):
            if person.name in seen:
                raise invalid(
                    f"'{person.name}' is listed twice", "give every person a unique name", at=("people", i, "name")
                )
            seen.add(person.name)
        if not any(p.role == "annotator" for p in self.people):
            raise invalid("no annotator", "add at least one person with role: annotator")
        return self

    def with_role(self, role: Role) -> list[Person]:
        """The people with ``role``, in file order."""
        return [p for p in self.people if p.role == role]


class ProjectSettings(Settings):
    """How ``cheems annotate init`` plans the work."""

    overlap: Annotated[Whole, Field(ge=1, description="Annotators per task (K): K-1 more, double-blind.")] = 1
    review_rate: Annotated[
        Number, Field(ge=0.0, le=1.0, description="Share of submitted tasks sent to review (seeded).")
    ] = 0.3
    seed: Annotated[
        Whole, Cli("--seed"), Field(description="Seed of the response order, assignment and review draw.")
    ] = 0
    agreement_target: Annotated[
        Number,
        Field(gt=0.0, le=1.0, description="Overlapping answers agreeing on fewer pairs than this go to adjudication."),
    ] = 0.9
