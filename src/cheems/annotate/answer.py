"""One annotator's answer to a task (Appendix D): scores 0-5, an integrated ranking, spans, flags, a note.

Keys (A, B, C) name the responses in the order one person saw them; :func:`by_id` turns an answer
into response ids, which is how it is stored, reviewed, compared and exported.

:class:`Answer` and :class:`Verdict` are the one check of what a person sends, shared by the JSON
API and the pages: every text has a length limit and must be valid Unicode (a lone surrogate cannot
be stored as UTF-8), and a remark made only of blanks or zero-width characters counts as empty.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from cheems.annotate.snapshot import StoredAnswer
from cheems.http_serving import field_error

KEYS = "ABCDEFGHIJ"
SPAN_LABELS = ("factual", "harmful", "garbled", "off_topic", "other")
FLAGS = ("garbled", "unusable")
# Limits of what one person may send, in characters: far above any real answer, far below what would
# slow the server or bloat the project file.
NOTE_CHARS = 5_000
REASON_CHARS = 5_000
COMMENT_CHARS = 1_000
SPAN_TEXT_CHARS = 20_000
SPANS = 200
RANKING_CHARS = 100
KEY_CHARS = 8
# Characters of the letter categories that still show nothing (Hangul fillers, the blank Braille cell).
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class AnswerError(ValueError):
    """An answer that cannot be accepted (HTTP 422): the message says what is wrong and how to fix it."""


def valid_unicode(value: object) -> object:
    """``value``; ValueError when it is a text with a lone surrogate (JSON's ``"\\ud800"``), which no UTF-8
    file or SQLite database can hold. Runs before pydantic's own string check, to name the problem."""
    found = LONE_SURROGATE.search(value) if isinstance(value, str) else None
    if found:
        raise ValueError(
            f"has a lone surrogate (U+{ord(found[0]):04X}) at character {found.start()} — send valid Unicode text"
        )
    return value


def remark(text: str) -> str:
    """``text`` without surrounding blanks; ``""`` when nothing in it shows (spaces, zero-width or control
    characters only), so that such a text is no reason and no note."""
    shows = any(unicodedata.category(ch)[0] not in "CZ" and ch not in BLANK_LETTERS for ch in text)
    return text.strip() if shows else ""


Unicode = BeforeValidator(valid_unicode)
Remark = AfterValidator(remark)
Key = Annotated[StrictStr, Field(max_length=KEY_CHARS), Unicode]


class Span(BaseModel):
    """A marked stretch ``[start, end)`` of one response's text, with what is wrong there."""

    model_config = ConfigDict(extra="forbid")
    key: Key
    start: Annotated[StrictInt, Field(ge=0)]
    end: Annotated[StrictInt, Field(ge=0)]
    label: Literal[SPAN_LABELS]  # type: ignore[valid-type]
    text: Annotated[StrictStr, Field(max_length=SPAN_TEXT_CHARS), Unicode] = ""
    comment: Annotated[StrictStr, Field(max_length=COMMENT_CHARS), Unicode, Remark] = ""


class Answer(BaseModel):
    """The body of ``POST /api/tasks/{id}/submit`` (and of the annotation page's form)."""

    model_config = ConfigDict(extra="forbid")
    scores: Annotated[dict[Key, StrictInt], Field(max_length=len(KEYS))]
    ranking: Annotated[StrictStr, Field(max_length=RANKING_CHARS), Unicode]
    spans: Annotated[list[Span], Field(max_length=SPANS)] = Field(default_factory=list)
    flags: Annotated[
        dict[Key, Annotated[list[Literal[FLAGS]], Field(max_length=len(FLAGS))]],  # type: ignore[valid-type]
        Field(max_length=len(KEYS)),
    ] = Field(default_factory=dict)
    note: Annotated[StrictStr, Field(max_length=NOTE_CHARS), Unicode, Remark] = ""
    override: StrictBool = False


class Verdict(BaseModel):
    """The body of ``POST /api/tasks/{id}/review`` (and of the review page's forms)."""

    model_config = ConfigDict(extra="forbid")
    approve: StrictBool
    reason: Annotated[StrictStr, Field(max_length=REASON_CHARS), Unicode, Remark] = ""


Sent = TypeVar("Sent", Answer, Verdict)


def read_json(text: str | bytes) -> object:
    """``text`` decoded as JSON, or AnswerError (a one-line reason that quotes none of it).

    Strings may hold lone surrogates here: :class:`Answer` and :class:`Verdict` refuse them by name.
    """
    try:
        return json.loads(text)
    except RecursionError:  # nesting deeper than the interpreter's stack: refused, as any bad JSON
        raise AnswerError("body: JSON nested too deeply — send an answer object") from None
    except ValueError as e:  # JSONDecodeError, and UnicodeDecodeError for bytes that are no Unicode
        raise AnswerError(f"body: not JSON ({str(e)[:80]})") from None


def read_body(model: type[Sent], sent: str | bytes | Mapping[str, Any] | object) -> Sent:
    """``sent`` (JSON text, or already decoded: a form's fields) as ``model``, or AnswerError naming the
    first bad field."""
    try:
        return model.model_validate(read_json(sent) if isinstance(sent, (str, bytes)) else sent)
    except ValidationError as e:
        raise AnswerError(field_error(e.errors(include_input=False))) from None


def parse_ranking(text: str, keys: Sequence[str]) -> list[list[str]]:
    """``"A>C=B"`` as levels, best first (``[["A"], ["C", "B"]]``); every key exactly once."""
    keys = list(keys)  # a string of keys would find "" and "AB" in "ABC"
    levels = [[k.strip() for k in level.split("=")] for level in text.split(">")]
    named = [k for level in levels for k in level]
    for k in named:
        if k not in keys:
            raise AnswerError(
                f"ranking {text!r} names {k!r}, which is not a response of this task"
                f" — use the keys {', '.join(keys)} joined by '>' and '='"
            )
    for k in keys:
        if named.count(k) != 1:
            how = "misses" if k not in named else "repeats"
            raise AnswerError(f"ranking {text!r} {how} {k} — name every key exactly once, e.g. {'>'.join(keys)}")
    return levels


def format_ranking(levels: Sequence[Sequence[str]]) -> str:
    """Levels back to the grammar: ``[["A"], ["C", "B"]]`` -> ``"A>C=B"``."""
    return ">".join("=".join(level) for level in levels)


def contradictions(scores: Mapping[str, int], levels: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """(x, y) where x scored higher than y yet is ranked below y."""
    level_of = {k: i for i, level in enumerate(levels) for k in level}
    return [(x, y) for x in scores for y in scores if scores[x] > scores[y] and level_of[x] > level_of[y]]


def check_answer(answer: Answer, keys: Sequence[str], texts: Mapping[str, str] | None = None) -> list[list[str]]:
    """The ranking's levels when ``answer`` is complete and consistent; AnswerError otherwise.

    ``texts`` (key -> response text) lets spans be checked against the text they mark.
    """
    keys = list(keys)
    for k in answer.scores:
        if k not in keys:
            raise AnswerError(f"scores name {k!r}, which is not a response of this task — use {', '.join(keys)}")
    for k in keys:
        if k not in answer.scores:
            raise AnswerError(f"no score for {k} — score every response from 0 to 5")
        if not 0 <= answer.scores[k] <= 5:
            raise AnswerError(f"score of {k} is {answer.scores[k]} — scores run from 0 to 5")
    levels = parse_ranking(answer.ranking, keys)
    bad = contradictions(answer.scores, levels)
    if bad and not answer.override:
        x, y = bad[0]
        raise AnswerError(
            f"ranking {answer.ranking!r} puts {x} (score {answer.scores[x]}) below {y} (score {answer.scores[y]})"
            ' — fix the ranking or the scores, or confirm it with "override": true'
        )
    for key in answer.flags:
        if key not in keys:
            raise AnswerError(f"flags name {key!r}, which is not a response of this task — use {', '.join(keys)}")
    for i, span in enumerate(answer.spans):
        if span.key not in keys:
            raise AnswerError(f"spans[{i}].key {span.key!r} is not a response of this task — use {', '.join(keys)}")
        length = len(texts[span.key]) if texts is not None else None
        if span.end <= span.start or (length is not None and span.end > length):
            raise AnswerError(
                f"spans[{i}] [{span.start}, {span.end}) is not a stretch of response {span.key}"
                " — start < end, within the response's text"
            )
    return levels


def by_id(answer: Answer, levels: list[list[str]], shown: Sequence[str]) -> dict[str, Any]:
    """The answer with keys replaced by response ids (``shown[i]`` is key ``KEYS[i]``), as stored."""
    rid = {KEYS[i]: r for i, r in enumerate(shown)}
    return {
        "scores": {rid[k]: s for k, s in answer.scores.items()},
        "levels": [[rid[k] for k in level] for level in levels],
        "spans": [{**s.model_dump(), "response": rid[s.key]} for s in answer.spans],
        "flags": {rid[k]: list(v) for k, v in answer.flags.items() if v},
        "note": answer.note,
        "override": answer.override,
    }


def by_key(stored: StoredAnswer, shown: Sequence[str]) -> dict[str, Any]:
    """A stored answer (by response id) in the keys of ``shown`` (the API's shape, ranking as text)."""
    key = {r: KEYS[i] for i, r in enumerate(shown)}
    return {
        "scores": {key[r]: s for r, s in stored.scores.items()},
        "ranking": format_ranking([[key[r] for r in level] for level in stored.levels]),
        "spans": [{**{k: v for k, v in s.items() if k != "response"}, "key": key[s["response"]]} for s in stored.spans],
        "flags": {key[r]: v for r, v in stored.flags.items()},
        "note": stored.note,
    }


def rank_levels(rank: dict[str, int], order: Sequence[str]) -> list[list[str]]:
    """The responses of ``order`` that ``rank`` ranks, as levels best first (rank 1, then 2, ...)."""
    ranked = [r for r in order if r in rank]
    return [[r for r in ranked if rank[r] == v] for v in sorted({rank[r] for r in ranked})]


def pair_labels(
    levels: Sequence[Sequence[str]], order: Sequence[str]
) -> dict[tuple[str, str], Literal["a", "b", "tie"]]:
    """``a``/``b``/``tie`` for every pair (a, b) of ``order`` with a before b, as the levels imply."""
    level_of = {r: i for i, level in enumerate(levels) for r in level}
    labels: dict[tuple[str, str], Literal["a", "b", "tie"]] = {}
    for a, b in combinations(order, 2):
        la, lb = level_of[a], level_of[b]
        labels[(a, b)] = "tie" if la == lb else ("a" if la < lb else "b")
    return labels


def agreement(levels1: Sequence[Sequence[str]], levels2: Sequence[Sequence[str]], order: Sequence[str]) -> float:
    """Share of the pairs of ``order`` on which two rankings give the same label (1 when no pair).

    Adjudication and the dashboard both test ``agreement < target``; the same rule written as
    ``disagreement > 1 - target`` differs in floats (``1 - 0.9`` is 0.09999999999999998).
    """
    one, two = pair_labels(levels1, order), pair_labels(levels2, order)
    return sum(one[p] == two[p] for p in one) / len(one) if one else 1.0
