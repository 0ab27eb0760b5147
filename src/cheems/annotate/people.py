"""Who annotates (``PEOPLE.yaml``), how a project is run (overlap, review rate, seed) and where it is served."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from cheems.settings import Cli, Number, Settings, Text, TextList, Whole, invalid
from cheems.yamlfile import load_yaml_model

Role = Literal["annotator", "reviewer", "admin"]
MAX_NAME = 64
"""Characters a name may have: it is shown in queues, tables and the tokens file."""
# Control, format (zero-width, bidi), surrogate and line/paragraph separator characters: invisible or
# breaking a line, so two names that look the same could differ only by them.
_HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def name_key(name: str) -> str:
    """What names are compared by: NFC/NFD twins, full-width letters and upper/lower case are one name."""
    return unicodedata.normalize("NFKC", name).casefold()


def _check_name(name: str) -> str:
    """A person's name: visible characters, no spaces around it, at most ``MAX_NAME`` long."""
    if len(name) > MAX_NAME:
        raise invalid(f"name is {len(name):,} characters long (at most {MAX_NAME})", "write a shorter name")
    if not name.strip():
        raise invalid("name is empty", "write the person's name")
    hidden = next((c for c in name if unicodedata.category(c) in _HIDDEN), None)
    if hidden is not None:
        raise invalid(
            f"name {name!r} holds the control or invisible character U+{ord(hidden):04X}",
            "write the name in visible characters only",
        )
    if name != name.strip():
        raise invalid(f"name {name!r} has spaces around it", "remove them: 'a ' and 'a' would look the same")
    return name


def _twins(first: str, second: str) -> str:
    """Why ``second`` is refused beside ``first`` (NFC/NFD twins print the same: shown as code points)."""
    if first == second:
        return f"'{first}' is listed twice"
    if unicodedata.normalize("NFC", first) == unicodedata.normalize("NFC", second):
        return f"{ascii(second)} is {ascii(first)} in another Unicode form"
    return f"{second!r} looks like {first!r} (names are compared ignoring case and full-width forms)"


class Person(Settings):
    """One member of the team: annotators annotate, reviewers review and adjudicate, admins see everything."""

    name: Annotated[Text, AfterValidator(_check_name)]
    role: Role = "annotator"
    categories: TextList = Field(default_factory=list)
    """Main categories this person knows best (an annotator's tasks prefer them)."""


class People(Settings):
    """``PEOPLE.yaml``: ``people: [{name, role, categories}, ...]``."""

    people: list[Person]

    @model_validator(mode="after")
    def _sound_team(self) -> "People":
        seen: dict[str, str] = {}  # name_key -> the name first given
        for i, person in enumerate(self.people):
            key = name_key(person.name)
            if key in seen:
                first = seen[key]
                raise invalid(_twins(first, person.name), "give every person a unique name", at=("people", i, "name"))
            seen[key] = person.name
        if not any(p.role == "annotator" for p in self.people):
            raise invalid("no annotator", "add at least one person with role: annotator")
        return self

    def with_role(self, role: Role) -> list[Person]:
        """The people with ``role``, in file order."""
        return [p for p in self.people if p.role == role]


def load_people(path: str | Path) -> People:
    """``PEOPLE.yaml`` as a team; an InputError names the file, the line and the key."""
    return load_yaml_model(path, People, "people list")[0]


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


class ServeSettings(Settings):
    """Where ``cheems annotate serve`` listens."""

    host: Annotated[
        Text,
        Field(description="Address to listen on (loopback unless you say so; for a team see docs/serving.md)."),
    ] = "127.0.0.1"
    port: Annotated[
        Whole, Field(ge=1, le=65535, description="Port to listen on (not 8000, which vLLM and other servers use).")
    ] = 8765


class StatusSettings(Settings):
    """How ``cheems annotate status`` shows the numbers."""

    as_json: Annotated[bool, Cli("--json", flag=True)] = Field(
        False, description="Print the numbers as JSON (as GET /api/status)."
    )
