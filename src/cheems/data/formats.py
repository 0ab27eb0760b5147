"""The import formats' registry, :data:`FORMATS`, and what every format's rows share: the job an importer gets,
where a row is, its strings and messages checked, the record it becomes.

The formats themselves register in :mod:`cheems.data.importers` (preference files) and
:mod:`cheems.data.bench_importers` (other benchmarks' layouts).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar

from pydantic import ValidationError

from cheems.data.io import ReadResult, validation_error
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.registries import Registry

T = TypeVar("T")


@dataclass
class ImportJob:
    """One file's import, as every importer gets it: the file, the options, and its rows as read."""

    path: str | Path
    issues: ReadResult  # skipped rows go to issues.skipped
    fn: Callable[[Record], Any]  # what to yield of each record
    skip_invalid: bool
    lower_is_better: bool  # ratings: a lower score is better
    workers: int | None
    rows: Iterator[tuple[int, Any]]  # (line, row); the first one was read already when the format was guessed
    reading: Generator[tuple[int, Any], None, None]  # the reader under ``rows``
    before: int  # len(issues.skipped) before the reader started

    def drop_rows(self) -> None:
        """For an importer that reads the file itself: stop the row reader and forget the lines it skipped."""
        self.reading.close()
        del self.issues.skipped[self.before :]


Importer: TypeAlias = Callable[[ImportJob], Iterator[Any]]
"""A registered format: an import job -> ``job.fn`` of each record of the file."""


FORMATS: Registry[Importer] = Registry("format", "FORMAT")


register_format = FORMATS.register
"""Decorator: ``@register_format("name", help="what a row holds")`` makes an importer ``cheems import name``."""


Prompt = str | list[dict[str, str]]  # a plain prompt or a chat list of {role, content}


# ShareGPT speaker names -> chat roles.
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


SAME_TEXT_HINT = (
    "one text cannot be better than itself: give the row two different responses, or pass --skip-invalid to drop it"
)


@dataclass
class _Where:
    """File and line of the row being read, to build located errors."""

    path: str
    line: int

    def error(self, message: str, field: str | None = None, hint: str | None = None) -> InputError:
        return InputError(message, path=self.path, line=self.line, field=field, hint=hint)


def _string(value: Any, field: str, where: _Where) -> str:
    if not isinstance(value, str):
        raise where.error(f"must be a string, got {type(value).__name__}", field, "put the text in a JSON string")
    return value


def _message(item: Any, field: str, where: _Where) -> dict[str, str]:
    """One chat turn from a ShareGPT ``{from, value}`` or a ``{role, content}`` dict."""
    if isinstance(item, dict) and "from" in item and "value" in item:
        role, content = item["from"], item["value"]
        role_field, content_field = f"{field}.from", f"{field}.value"
    elif isinstance(item, dict) and "role" in item and "content" in item:
        role, content = item["role"], item["content"]
        role_field, content_field = f"{field}.role", f"{field}.content"
    else:
        raise where.error("must be a {from, value} or {role, content} message", field)
    role = _string(role, role_field, where)
    if role not in _ROLES:  # a tool or function turn, a typo: no model is asked to read it as a chat turn
        raise where.error(f"unknown role {role!r}", role_field, f"use one of {', '.join(_ROLES)}")
    return {"role": _ROLES[role], "content": _string(content, content_field, where)}


def _messages(value: Any, field: str, where: _Where) -> list[dict[str, str]]:
    if not isinstance(value, list):
        raise where.error(f"must be a list of messages, got {type(value).__name__}", field)
    if not value:
        raise where.error("is empty", field, "give at least one message")
    return [_message(item, f"{field}[{i}]", where) for i, item in enumerate(value)]


def _as_input(messages: list[dict[str, str]]) -> Prompt:
    """Canonical input for a chat list: empty system turns dropped, a lone user turn as plain text.

    Collapsing keeps one prompt one key: the same question imported from an alpaca row and from a
    one-message ShareGPT row groups together and gets the same id.
    """
    kept = [m for m in messages if not (m["role"] == "system" and not m["content"].strip())]
    if len(kept) == 1 and kept[0]["role"] == "user":
        return kept[0]["content"]
    return kept


def same_text_pairs(record: Record) -> list[tuple[str, str, str]]:
    """Every judged pair of ``record`` whose two responses are one text: ``(better id, worse id, field)``, the
    field ``rank`` or ``comparisons[i]``.

    A pair is judged when a rank puts one response above the other or a comparison names a winner (a tie
    between copies of one text is no claim and is not listed).
    """
    contents = [r.content for r in record.responses]
    if len(set(contents)) == len(contents) and all(c.a != c.b for c in record.comparisons):
        return []
    text = {r.id: r.content for r in record.responses}
    judged = [(c.a, c.b, f"comparisons[{i}]") for i, c in enumerate(record.comparisons) if c.label != "tie"]
    judged += [(better, worse, "rank") for better, worse in record.ranked_pairs()]
    return [(a, b, field) for a, b, field in judged if text[a] == text[b]]


def distinct_pairs(record: Record) -> Record:
    """``record`` when no pair it judges holds one text twice (:func:`same_text_pairs`), else ``InputError``
    (field ``rank`` or ``comparisons[i]``, not located).

    The rule of ``import official``; the training formats drop the copy instead (:func:`drop_worse_copies`,
    pairwise rows with ``chosen`` = ``rejected``), the benchmarks keep it (their upstream scores it).
    """
    for a, b, field in same_text_pairs(record)[:1]:
        what = f"compares response '{a}' with itself" if a == b else f"responses '{a}' and '{b}' are the same text"
        raise InputError(f"{what}, yet one is judged better", field=field, hint=SAME_TEXT_HINT)
    return record


def drop_worse_copies(record: Record) -> tuple[Record, int]:
    """``record`` without the responses that a ``rank`` places below a copy of their own text, and how many.

    The rule of the training formats (``ranked``, ``ratings``): a text ranked twice keeps its best place, so the
    one impossible comparison (the text above itself) goes and every other comparison stays (those of the
    dropped copy with the rest are the kept copy's, or contradict them). Copies tied at one rank are kept.
    """
    worse = {b for _, b, field in same_text_pairs(record) if field == "rank"}
    if not worse:
        return record, 0
    assert record.rank is not None  # a rank pair was found
    responses = [r for r in record.responses if r.id not in worse]
    rank = {rid: r for rid, r in record.rank.items() if rid not in worse}
    return record.model_copy(update={"responses": responses, "rank": rank}), len(worse)


def same_text_warning(path: str | Path, count: int, what: str) -> InputError:
    """The one warning line an import gives for its ``count`` rows with two identical texts (``what``: what it
    did with them)."""
    return InputError(f"{count} row(s) judge two identical texts: {what}", path=str(path))


def _validate(obj: dict[str, Any], where: _Where, same_text: Literal["refuse", "keep"] = "refuse") -> Record:
    """The record of one imported row (or group of rows), checked as every importer checks it; a pair judged
    between two copies of one text refused (:func:`distinct_pairs`), or with ``same_text="keep"`` kept."""
    try:
        record = Record.model_validate(obj)
        return distinct_pairs(record) if same_text == "refuse" else record
    except ValidationError as e:
        raise validation_error(e, where.path, where.line) from None
    except InputError as e:
        raise e.located(where.path, where.line) from None


def _check_row(row: Any, where: _Where) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise where.error(f"expected a JSON object, got {type(row).__name__}")
    return row


def _guard(step: Callable[[], Any], result: ReadResult, skip_invalid: bool) -> Any:
    """Run one row's step; with ``skip_invalid`` an ``InputError`` is recorded instead of raised."""
    try:
        return step()
    except InputError as e:
        if not skip_invalid:
            raise
        result.skipped.append(e)
        return None
