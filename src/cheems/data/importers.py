"""Importers: the preference formats people actually have -> canonical ``Record``s.

The four preference formats (``pairwise``, ``ranked``, ``ratings``, ``official``) are registered in
:data:`~cheems.data.formats.FORMATS` (a new format is one function of an :class:`ImportJob` and one
``@register_format`` line; ``cheems import`` lists it) beside the benchmarks' layouts
(``cheems.data.bench_importers``; never guessed, always named). The keys each format reads, with an
example file of each: docs/formats.md.

Every problem is an ``InputError`` naming file, line and field; with ``skip_invalid`` the bad
row goes to ``ReadResult.skipped`` and the import goes on.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field

from cheems.data.formats import (
    FORMATS,
    ImportJob,
    Prompt,
    _as_input,
    _check_row,
    _guard,
    _message,
    _messages,
    _string,
    _validate,
    _Where,
    distinct_pairs,
    drop_worse_copies,
    register_format,
    same_text_warning,
)
from cheems.data.io import ReadResult, iter_rows, record_line, write_lines
from cheems.data.schema import Record, dense_ranks
from cheems.data.stream import same_record, stream_records
from cheems.errors import InputError
from cheems.outputs import claim_outputs
from cheems.settings import Settings

T = TypeVar("T")


# Keys tried, in order, for each part of a row.
CHOSEN_KEYS = ("chosen", "response_chosen", "安全有用回答")
REJECTED_KEYS = ("rejected", "response_rejected", "违规回答")
_PLAIN_PROMPT_KEYS = ("prompt", "input", "question", "问题")
_CHAT_PROMPT_KEYS = ("conversations", "messages")
_PROMPT_HINT = "give the prompt as prompt, instruction(+input), question, 问题, conversations or messages"


# ---------------------------------------------------------------- shared helpers


def _present(row: dict[str, Any], key: str) -> bool:
    """A key counts as given unless absent or null (CSV files have no nulls, JSON may)."""
    return row.get(key) is not None


def _history(value: Any, where: _Where) -> list[dict[str, str]]:
    """LLaMA-Factory ``history`` ``[[user, assistant], ...]`` -> chat messages."""
    if not isinstance(value, list):
        raise where.error(f"must be a list of [user, assistant] pairs, got {type(value).__name__}", "history")
    out: list[dict[str, str]] = []
    for i, turn in enumerate(value):
        if not (isinstance(turn, list) and len(turn) == 2):
            raise where.error("must be a [user, assistant] pair", f"history[{i}]")
        out.append({"role": "user", "content": _string(turn[0], f"history[{i}][0]", where)})
        out.append({"role": "assistant", "content": _string(turn[1], f"history[{i}][1]", where)})
    return out


def extract_prompt(row: dict[str, Any], where: _Where) -> tuple[Prompt | None, set[str]]:
    """The row's prompt (or None when it names none) and the keys that made it.

    Tried in order: ``instruction`` (+ non-empty ``input`` on a new line), ``prompt``, ``input``,
    ``question``, ``问题``, ShareGPT ``conversations``, chat ``messages``. A ``system`` string and a
    ``history`` of [user, assistant] pairs turn a plain prompt into a chat list.
    """
    used: set[str] = set()
    prompt: Prompt | None = None
    if _present(row, "instruction"):
        prompt = _string(row["instruction"], "instruction", where)
        used.add("instruction")
        if _present(row, "input"):
            extra = _string(row["input"], "input", where)
            used.add("input")
            if extra.strip():
                prompt = f"{prompt}\n{extra}"
    else:
        for key in _PLAIN_PROMPT_KEYS:
            if _present(row, key):
                value = row[key]
                prompt = _messages(value, key, where) if isinstance(value, list) else _string(value, key, where)
                used.add(key)
                break
        else:
            for key in _CHAT_PROMPT_KEYS:
                if _present(row, key):
                    prompt = _messages(row[key], key, where)
                    used.add(key)
                    break
    if prompt is None:
        return None, used
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if _present(row, "history"):
        used.add("history")
        history = _history(row["history"], where)
        if history and not isinstance(prompt, str):
            raise where.error(
                "'history' goes with a plain-text prompt, not a chat list",
                "history",
                "put the earlier turns into the chat list instead",
            )
        messages = history + messages
    if _present(row, "system"):
        used.add("system")
        messages = [{"role": "system", "content": _string(row["system"], "system", where)}] + messages
    result = _as_input(messages)
    if not result or (isinstance(result, str) and not result.strip()):
        main = next(k for k in ("instruction", *_PLAIN_PROMPT_KEYS, *_CHAT_PROMPT_KEYS) if k in used)
        raise where.error("is empty", main, "give the prompt text")
    return result, used


def _require_prompt(row: dict[str, Any], where: _Where) -> tuple[Prompt, set[str]]:
    prompt, used = extract_prompt(row, where)
    if prompt is None:
        raise where.error("is missing", "prompt", _PROMPT_HINT)
    return prompt, used


def extract_response(value: Any, field: str, where: _Where) -> tuple[str, Prompt | None]:
    """Response text from a string, a ``{from, value}`` / ``{role, content}`` dict or a message list.

    For a list (TRL conversational) the last message must be the assistant's answer; the messages
    before it are returned as the implied prompt (None when there are none).
    """
    if isinstance(value, str):
        return value, None
    if isinstance(value, dict):
        return _message(value, field, where)["content"], None
    if isinstance(value, list):
        messages = _messages(value, field, where)
        if not messages or messages[-1]["role"] != "assistant":
            raise where.error("a message list must end with the assistant's answer", field)
        before = messages[:-1]
        return messages[-1]["content"], (_as_input(before) if before else None)
    raise where.error(f"must be a string, a message or a list of messages, got {type(value).__name__}", field)


def _first_key(row: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if _present(row, k)), None)


def _category(row: dict[str, Any]) -> Any:
    """``category`` as given (string or path list); empty values mean none."""
    value = row.get("category")
    return None if value in (None, "", []) else value


def _distinct_then(fn: Callable[[Record], T], record: Record) -> T:
    """``fn`` of a record that :func:`distinct_pairs` lets through (picklable as a partial, for the workers)."""
    return fn(distinct_pairs(record))


# ---------------------------------------------------------------- format guessing


def guess_format(obj: Any) -> str:
    """Guess the format of a file from its first row; ``InputError`` when it cannot tell."""
    hint = f"name the format: one of {', '.join(FORMATS)}"
    if not isinstance(obj, dict):
        raise InputError(f"cannot guess the format of a {type(obj).__name__} row", hint=hint)
    keys = obj.keys()
    if "annotations" in keys or {"answer1", "answer2", "preference"} <= keys:
        return "official"
    if any(k in keys for k in CHOSEN_KEYS):
        return "pairwise"
    responses = obj.get("responses")
    if "scores" in keys or (
        isinstance(responses, list) and any(isinstance(r, dict) and ("score" in r or "rating" in r) for r in responses)
    ):
        return "ratings"
    if isinstance(obj.get("output"), list) or (
        isinstance(responses, list) and responses and all(isinstance(r, (str, list)) for r in responses)
    ):
        return "ranked"
    if isinstance(responses, list) and ("input" in keys or "prompt" in keys):
        return "official"  # canonical records
    raise InputError(f"cannot tell the format from the keys {', '.join(map(str, keys)) or '(none)'}", hint=hint)


# ---------------------------------------------------------------- pairwise


@dataclass
class _Group:
    """One prompt's record under construction from pairwise rows."""

    line: int
    prompt: Prompt
    category: Any = None
    responses: dict[str, str] = dc_field(default_factory=dict)  # content -> id, first appearance order
    comparisons: list[dict[str, Any]] = dc_field(default_factory=list)

    def response_id(self, content: str) -> str:
        return self.responses.setdefault(content, f"r{len(self.responses) + 1}")


@dataclass
class _Pair:
    prompt: Prompt
    chosen: str
    rejected: str
    category: Any
    extra: dict[str, Any]


def _pairwise_row(row: dict[str, Any], where: _Where) -> _Pair:
    """Normalise one pairwise row; unknown keys are kept for its comparison."""
    chosen_key, rejected_key = _first_key(row, CHOSEN_KEYS), _first_key(row, REJECTED_KEYS)
    if chosen_key is None:
        raise where.error("is missing", "chosen", f"name the better response {' / '.join(CHOSEN_KEYS)}")
    if rejected_key is None:
        raise where.error("is missing", "rejected", f"name the worse response {' / '.join(REJECTED_KEYS)}")
    chosen, chosen_prompt = extract_response(row[chosen_key], chosen_key, where)
    rejected, rejected_prompt = extract_response(row[rejected_key], rejected_key, where)
    prompt, used = extract_prompt(row, where)
    if prompt is None:  # TRL implicit prompt: the turns before the answer
        if chosen_prompt is None:
            raise where.error("is missing", "prompt", _PROMPT_HINT)
        if rejected_prompt is not None and rejected_prompt != chosen_prompt:
            raise where.error(
                f"its conversation differs from '{chosen_key}' before the answer",
                rejected_key,
                "both lists must share the same prompt turns",
            )
        prompt = chosen_prompt
    used |= {chosen_key, rejected_key, "category"}
    extra = {k: v for k, v in row.items() if k not in used}
    return _Pair(prompt, chosen, rejected, _category(row), extra)


def _add_pair(groups: dict[str, _Group], pair: _Pair, where: _Where) -> bool:
    """Add one row's pair to its prompt's group; False (nothing added) for a pair of one text (``chosen`` =
    ``rejected``: no claim, the row is dropped and counted)."""
    if pair.chosen == pair.rejected:
        return False
    key = json.dumps(pair.prompt, ensure_ascii=False, sort_keys=True)
    group = groups.get(key) or _Group(where.line, pair.prompt)
    if pair.category is not None:
        if group.category is not None and group.category != pair.category:
            raise where.error(
                f"{pair.category!r} differs from {group.category!r} given for the same prompt at line {group.line}",
                "category",
                "give one category per prompt",
            )
        group.category = pair.category
    groups[key] = group
    a, b = group.response_id(pair.chosen), group.response_id(pair.rejected)
    # Row-level keys (e.g. JADE's ID) describe this pair, so they travel with its comparison.
    group.comparisons.append({"a": a, "b": b, "label": "a", "source": "import", **pair.extra})
    return True


def _import_pairwise(
    rows: Iterable[tuple[int, Any]], path: str, result: ReadResult, skip_invalid: bool
) -> Iterator[Record]:
    """Rows grouped into one record per prompt: the groups are held until the file ends (a prompt's pairs may
    be anywhere in it), so memory grows with the file, unlike the other formats."""
    groups: dict[str, _Group] = {}
    same = 0
    for line, row in rows:
        where = _Where(path, line)
        added = _guard(
            lambda: _add_pair(groups, _pairwise_row(_check_row(row, where), where), where), result, skip_invalid
        )
        same += added is False
    if same:
        result.warnings.append(same_text_warning(path, same, "dropped (chosen = rejected claims nothing)"))
    for group in groups.values():
        obj: dict[str, Any] = {
            "input": group.prompt,
            "responses": [{"id": rid, "content": content} for content, rid in group.responses.items()],
            "comparisons": group.comparisons,
        }
        if group.category is not None:
            obj["category"] = group.category
        where = _Where(path, group.line)
        record = _guard(lambda: _validate(obj, where), result, skip_invalid)
        if record is not None:
            yield record


# ---------------------------------------------------------------- ranked and ratings (one row, one record)


def _row_extras(row: dict[str, Any], used: set[str]) -> dict[str, Any]:
    """Keys the importer did not read, kept on the record (``id``, ``reference``, metadata)."""
    reserved = {"responses", "comparisons", "rank", "input", "scores", "output", "category"}
    return {k: v for k, v in row.items() if k not in used and k not in reserved}


def _ranked_row(row: dict[str, Any], where: _Where, lower_is_better: bool = False) -> dict[str, Any]:
    """A best-first list (``output`` or ``responses``; inner lists are ties) -> record with ranks."""
    key = "output" if _present(row, "output") else "responses"
    items = row.get(key)
    if not isinstance(items, list):
        raise where.error(
            "is missing" if items is None else f"must be a list, got {type(items).__name__}",
            key,
            "give the responses as a best-first list",
        )
    if not items:
        raise where.error("is empty", key, "give at least one response")
    prompt, used = _require_prompt(row, where)
    responses: list[dict[str, str]] = []
    rank: dict[str, int] = {}
    for level, item in enumerate(items, start=1):
        if isinstance(item, str):
            group, fields = [item], [f"{key}[{level - 1}]"]
        elif isinstance(item, list) and item:
            group, fields = item, [f"{key}[{level - 1}][{j}]" for j in range(len(item))]
        else:
            raise where.error("must be a string or a non-empty list of strings (a tie group)", f"{key}[{level - 1}]")
        for content, name in zip(group, fields):
            rid = f"r{len(responses) + 1}"
            responses.append({"id": rid, "content": _string(content, name, where)})
            rank[rid] = level
    return {**_row_extras(row, used), "input": prompt, "category": _category(row), "responses": responses, "rank": rank}


def _score(value: Any, field: str, where: _Where) -> float:
    # NaN, Infinity and 1e400 never get here: cheems.data.io refuses them where the file is parsed.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.error(f"must be a number, got {value!r}", field, "scores are plain JSON numbers")
    return float(value)


def _rated_responses(row: dict[str, Any], where: _Where) -> list[tuple[dict[str, Any], float]]:
    """(response object, score) pairs from ``responses`` dicts or ``responses`` + ``scores`` lists."""
    items = row.get("responses")
    if not isinstance(items, list) or not items:
        raise where.error("must be a non-empty list", "responses", "give the rated responses")
    if _present(row, "scores"):
        scores = row["scores"]
        if not isinstance(scores, list) or len(scores) != len(items):
            got = f"{len(scores)} scores" if isinstance(scores, list) else type(scores).__name__
            raise where.error(f"needs one score per response: {len(items)} responses, {got}", "scores")
        return [
            ({"id": f"r{i + 1}", "content": _string(text, f"responses[{i}]", where)}, _score(s, f"scores[{i}]", where))
            for i, (text, s) in enumerate(zip(items, scores))
        ]
    out = []
    for i, item in enumerate(items):
        name = f"responses[{i}]"
        if not isinstance(item, dict):
            raise where.error("must be a {content, score} object (or give a separate 'scores' list)", name)
        text_key = _first_key(item, ("content", "text", "response"))
        score_key = _first_key(item, ("score", "rating"))
        if text_key is None:
            raise where.error("is missing", f"{name}.content", "give the text as content, text or response")
        if score_key is None:
            raise where.error("is missing", f"{name}.score", "give a numeric score or rating")
        score = _score(item[score_key], f"{name}.{score_key}", where)
        response = {k: v for k, v in item.items() if k not in (text_key, score_key)}
        response.setdefault("id", f"r{i + 1}")
        response["content"] = _string(item[text_key], f"{name}.{text_key}", where)
        response["score"] = score  # the original rating stays with its response
        out.append((response, score))
    return out


def _ratings_row(row: dict[str, Any], where: _Where, lower_is_better: bool = False) -> dict[str, Any]:
    """Scored responses -> dense ranks: best score rank 1, equal scores share a rank."""
    prompt, used = _require_prompt(row, where)
    rated = _rated_responses(row, where)
    responses = [r for r, _ in rated]
    rank = dense_ranks(
        {r["id"]: s for r, s in rated if isinstance(r.get("id"), str)}, higher_is_better=not lower_is_better
    )
    return {**_row_extras(row, used), "input": prompt, "category": _category(row), "responses": responses, "rank": rank}


def _import_each(
    rows: Iterable[tuple[int, Any]],
    path: str,
    result: ReadResult,
    skip_invalid: bool,
    normalise: Callable[..., dict[str, Any]],
    lower_is_better: bool,
) -> Iterator[Record]:
    """One record per row; a prompt seen again gets ``-2``, ``-3`` … (an explicit id must be unique)."""
    seen: dict[str, int] = {}
    copies = [0, 0]  # records and responses whose text a better-placed copy has

    def one(row: Any, where: _Where) -> Record:
        obj = normalise(_check_row(row, where), where, lower_is_better)
        record, dropped = drop_worse_copies(_validate(obj, where, same_text="keep"))
        if record.id in seen:
            if "id" in obj:
                raise where.error(
                    f"duplicate prompt id '{record.id}' (first at line {seen[record.id]})",
                    "id",
                    "give every prompt its own id",
                )
            # Same prompt, separate ranking (e.g. oasst1 trees with one root text): keep both, apart.
            n = 2
            while f"{record.id}-{n}" in seen:
                n += 1
            record.id = f"{record.id}-{n}"
        seen[record.id] = where.line
        copies[0] += dropped > 0
        copies[1] += dropped
        return record

    for line, row in rows:
        record = _guard(lambda: one(row, _Where(path, line)), result, skip_invalid)
        if record is not None:
            yield record
    if copies[0]:
        what = f"{copies[1]} copy(ies) placed below their own text dropped, the rest of each ranking kept"
        result.warnings.append(same_text_warning(path, copies[0], what))


# ---------------------------------------------------------------- entry point


def import_file(
    path: str | Path, fmt: str | None = None, *, skip_invalid: bool = False, lower_is_better: bool = False
) -> ReadResult:
    """Import one file of format ``fmt`` (guessed from its first row when None) as canonical records, all in memory
    (:func:`import_records` streams them)."""
    result = ReadResult()
    result.records = list(import_records(path, fmt, result, skip_invalid=skip_invalid, lower_is_better=lower_is_better))
    return result


class ImportSettings(Settings):
    """How ``cheems import`` (:func:`convert_file`) reads a file."""

    lower_is_better: bool = Field(False, description="ratings: a lower score is better.")


def convert_file(
    source: str | Path,
    fmt: str | None,
    output: str | Path,
    settings: ImportSettings | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = 1,
) -> tuple[int, ReadResult]:
    """Convert one file of format ``fmt`` (guessed when None) to canonical records in ``output``, as
    ``cheems import``: the number of records written and the rows skipped (see :func:`import_records`).

    ``output`` is claimed first (:func:`cheems.outputs.claim_outputs`): never ``source`` itself."""
    claim_outputs(inputs=[("IN", source)], files=[("--output", output)])
    settings = settings or ImportSettings()
    issues = ReadResult()
    lines = import_records(
        source,
        fmt,
        issues,
        record_line,
        skip_invalid=skip_invalid,
        lower_is_better=settings.lower_is_better,
        workers=workers,
    )
    return write_lines(output, lines), issues


def import_records(
    path: str | Path,
    fmt: str | None,
    issues: ReadResult,
    fn: Callable[[Record], T] = same_record,  # type: ignore[assignment]  # a TypeVar default: python/mypy#3737
    *,
    skip_invalid: bool = False,
    lower_is_better: bool = False,
    workers: int | None = 1,
) -> Iterator[T]:
    """``fn`` of the records of one file of format ``fmt`` (guessed from its first row when None), as they are
    read (for official records in the worker processes: e.g. :func:`cheems.data.io.record_line`).

    ``lower_is_better`` applies to ``ratings``. Raises ``InputError`` (file:line: field) on the first
    bad row, or, with ``skip_invalid``, lists bad rows in ``issues.skipped`` and goes on. Official and
    canonical records, ranked and ratings rows stream (``workers`` processes check official records);
    pairwise rows and the other benchmarks' files are grouped in memory.
    """
    if fmt is not None:
        FORMATS.get(fmt, path=str(path))  # an unknown format fails before anything is read
    before = len(issues.skipped)
    reading = iter_rows(path, skip_invalid, issues.skipped)  # a generator: reads nothing until asked
    rows: Iterator[tuple[int, Any]] = reading
    if fmt is None:
        first = next(reading, None)
        if first is None:
            return  # every line was unreadable JSON, already listed in skipped
        try:
            fmt = guess_format(first[1])
        except InputError as e:
            raise e.located(str(path), first[0]) from None
        rows = itertools.chain([first], reading)
    job = ImportJob(path, issues, fn, skip_invalid, lower_is_better, workers, rows, reading, before)
    yield from FORMATS.get(fmt)(job)


@register_format("pairwise", help="a chosen/rejected pair per row")
def _pairwise(job: ImportJob) -> Iterator[Any]:
    return map(job.fn, _import_pairwise(job.rows, str(job.path), job.issues, job.skip_invalid))


@register_format("ranked", help="a best-first list of responses per row")
def _ranked(job: ImportJob) -> Iterator[Any]:
    rows = _import_each(job.rows, str(job.path), job.issues, job.skip_invalid, _ranked_row, job.lower_is_better)
    return map(job.fn, rows)


@register_format("ratings", help="responses with numeric scores")
def _ratings(job: ImportJob) -> Iterator[Any]:
    rows = _import_each(job.rows, str(job.path), job.issues, job.skip_invalid, _ratings_row, job.lower_is_better)
    return map(job.fn, rows)


@register_format("official", help="CheemsBench / CheemsPreference files, canonical records")
def _official(job: ImportJob) -> Iterator[Any]:
    job.drop_rows()  # read again by the record reader, with its checks (and its own skipped lines)
    checked = functools.partial(_distinct_then, job.fn)
    return stream_records(job.path, checked, skip_invalid=job.skip_invalid, issues=job.issues, workers=job.workers)


# The other benchmarks' layouts register themselves; imported last, so that they are listed after the formats above.
from cheems.data import bench_importers  # noqa: E402, F401
