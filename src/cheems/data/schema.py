"""The canonical record: one prompt, its responses, the comparisons made on them and their ranks.

Described for users in docs/formats.md ("Preference records"). Unknown keys are kept (``extra="allow"``)
so that a file passed through any ``cheems`` command loses nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator

UNCATEGORISED = "未分类"


class Message(BaseModel):
    """One chat turn of a multi-turn ``input``."""

    model_config = ConfigDict(extra="allow")
    role: StrictStr
    content: StrictStr


class Response(BaseModel):
    """One candidate answer to the prompt."""

    model_config = ConfigDict(extra="allow")
    id: StrictStr = Field(min_length=1)
    content: StrictStr
    model: str | None = None
    models: list[StrictStr] | None = None
    """Every model that gave this exact text, ``model`` first (a pool built by ``cheems generate``)."""
    merged: list[StrictStr] | None = None
    """The ids of the other models' samples stored in this response (their text was this one)."""

    @property
    def all_models(self) -> list[str]:
        """The models that gave this text: ``models`` when several did, else ``model`` (none when unknown)."""
        return self.models or ([self.model] if self.model else [])


class Comparison(BaseModel):
    """One pairwise judgement: ``label`` says which of ``a`` / ``b`` is better, or ``tie``."""

    model_config = ConfigDict(extra="allow")
    a: StrictStr
    b: StrictStr
    label: Literal["a", "b", "tie"]
    annotator: str | None = None
    source: str | None = None

    def winner_loser(self) -> tuple[str, str] | None:
        """(winner, loser) ids, or None for a tie."""
        if self.label == "a":
            return self.a, self.b
        if self.label == "b":
            return self.b, self.a
        return None


def pool_response(responses: list[Response], response: Response) -> None:
    """Add ``response`` to a prompt's pool ``responses`` (in place): the one rule for identical responses
    wherever a pool is built (``cheems generate``, a model added to a pool, ``annotate init``).

    A text is stored once, whoever gave it, the same model twice included: a response whose text the pool
    holds is not added; the response holding the text lists in ``models`` every model that gave it (its own
    ``model`` first) and in ``merged`` the ids stored in it, so the pool keeps who said what, a rerun knows the
    sample is there, and no task or pair compares a text with itself.
    """
    for index, kept in enumerate(responses):
        if kept.content == response.content:
            models = list(dict.fromkeys([*kept.all_models, *response.all_models]))
            merged = list(dict.fromkeys([*(kept.merged or []), response.id, *(response.merged or [])]))
            update: dict[str, Any] = {"merged": merged}
            if models != kept.all_models:
                update["models"] = models
            responses[index] = kept.model_copy(update=update)
            return
    responses.append(response)


def dense_ranks(values: Mapping[str, float], *, higher_is_better: bool = False) -> dict[str, int]:
    """Ranks from values: 1 for the best, equal values share a rank, ranks consecutive (1, 2, 3, …)."""
    levels = sorted(set(values.values()), reverse=higher_is_better)
    level_of = {v: i for i, v in enumerate(levels, start=1)}
    return {key: level_of[v] for key, v in values.items()}


def prompt_id(prompt: str | list[dict[str, Any]]) -> str:
    """Stable id derived from the prompt text, used when a record has none."""
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False, sort_keys=True)
    return "p-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def prompt_messages(prompt: str | list[Message] | list[dict[str, str]]) -> list[dict[str, str]]:
    """The prompt as a chat list of ``{"role", "content"}`` dicts (a plain string is one user turn)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [m if isinstance(m, dict) else {"role": m.role, "content": m.content} for m in prompt]


class Record(BaseModel):
    """One prompt with its responses, comparisons and (optional) resolved ranks."""

    model_config = ConfigDict(extra="allow")
    id: StrictStr = ""
    input: StrictStr | list[Message]
    category: list[StrictStr] = Field(default_factory=list)
    reference: str | None = None
    responses: list[Response]
    comparisons: list[Comparison] = Field(default_factory=list)
    rank: dict[str, int] | None = None
    sys_prompt: StrictStr | None = None
    """The system message (official CheemsBench / CheemsPreference files)."""

    @field_validator("category", mode="before")
    @classmethod
    def _category_path(cls, value: Any) -> Any:
        if value is None:
            return []
        return [value] if isinstance(value, str) else value

    @field_validator("reference", mode="before")
    @classmethod
    def _numeric_reference(cls, value: Any) -> Any:
        # A math answer (0.7405) is a JSON number in real files: keep it as text, as written in the
        # file (cheems.data.io keeps a float's own text, so 1.10 stays "1.10", not "1.1").
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return getattr(value, "text", None) or str(value)
        return value

    @field_validator("rank", mode="before")
    @classmethod
    def _strict_rank_values(cls, value: Any) -> Any:
        # bool is an int in Python; "1" is a str: both are mistakes in a rank.
        if isinstance(value, dict):
            for rid, r in value.items():
                if isinstance(r, bool) or not isinstance(r, int) or r < 1:
                    raise ValueError(f"rank of '{rid}' must be a whole number >= 1, got {r!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "Record":
        if not self.id:
            self.id = prompt_id(self.input if isinstance(self.input, str) else [m.model_dump() for m in self.input])
        if not self.responses:
            raise ValueError("'responses' is empty — give each prompt at least one response")
        ids = [r.id for r in self.responses]
        seen: set[str] = set()
        for rid in ids:
            if rid in seen:
                raise ValueError(f"duplicate response id '{rid}' — make response ids unique within a prompt")
            seen.add(rid)
        for i, c in enumerate(self.comparisons):
            for side in ("a", "b"):
                rid = getattr(c, side)
                if rid not in seen:
                    raise ValueError(
                        f"comparisons[{i}].{side} names unknown response '{rid}' — use one of {', '.join(ids)}"
                    )
        if self.rank is not None:
            for rid in self.rank:
                if rid not in seen:
                    raise ValueError(f"rank names unknown response '{rid}' — use one of {', '.join(ids)}")
        return self

    @property
    def main_category(self) -> str:
        """First element of the category path (the unit metrics are averaged over)."""
        return self.category[0] if self.category else UNCATEGORISED

    @property
    def prompt(self) -> str | list[Message]:
        """``input`` as every model sees it (scoring, judging, training).

        With a ``sys_prompt`` it becomes a chat whose first turn is that system message, as the
        official loader does, unless the input already opens with a system turn of its own.
        """
        if not self.sys_prompt:
            return self.input
        turns = [Message(role="user", content=self.input)] if isinstance(self.input, str) else list(self.input)
        if turns and turns[0].role == "system":
            return self.input
        return [Message(role="system", content=self.sys_prompt), *turns]

    def ranked_pairs(self) -> list[tuple[str, str]]:
        """Every (better, worse) pair of responses with different ranks, in response order."""
        if not self.rank:
            return []
        ranked = [r.id for r in self.responses if r.id in self.rank]
        pairs = []
        for x, y in combinations(ranked, 2):
            if self.rank[x] < self.rank[y]:
                pairs.append((x, y))
            elif self.rank[y] < self.rank[x]:
                pairs.append((y, x))
        return pairs

    def unranked(self) -> list[str]:
        """Ids of responses a ``rank`` leaves out (none when there is no rank at all)."""
        if self.rank is None:
            return []
        return [r.id for r in self.responses if r.id not in self.rank]

    def pooled(self) -> "Record":
        """The record with each response text once (:func:`pool_response`). For a pool: comparisons and ranks
        are not carried over to the response that keeps a text, so call it on records without them."""
        responses: list[Response] = []
        for response in self.responses:
            pool_response(responses, response)
        return self if len(responses) == len(self.responses) else self.model_copy(update={"responses": responses})

    def response(self, rid: str) -> Response:
        """The response with id ``rid``."""
        for r in self.responses:
            if r.id == rid:
                return r
        raise KeyError(rid)

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON object; unset optional keys are left out."""
        return self.model_dump(mode="json", exclude_none=True)
