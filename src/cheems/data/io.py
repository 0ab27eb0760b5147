"""Reading and writing records and scores, with errors that name file, line and field.

``read_records`` accepts the canonical format and the official CheemsBench /
CheemsPreference files unchanged: records with ``annotations`` (``[id1, id2, pref]`` or
``{"answer1", "answer2", "preference"}``) and pairwise rows ``input/answer1/answer2/preference``,
which are grouped by ``input`` into one record each.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cheems.errors import InputError
from cheems.data.outputs import atomic_file
from cheems.data.schema import Record

Row = tuple[int, Any]  # (1-based line number where the item starts, parsed item)


@dataclass
class ReadResult:
    """Records read from one or more files, and the lines skipped with ``skip_invalid``."""

    records: list[Record] = field(default_factory=list)
    skipped: list[InputError] = field(default_factory=list)


def _read_text(path: Path) -> str:
    if not path.exists():
        raise InputError("no such file", path=str(path), hint="check the path")
    if path.is_dir():
        raise InputError("is a folder, not a file", path=str(path), hint="name a .jsonl/.json/.csv file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start})", path=str(path), hint="save it as UTF-8") from None
    if not text.strip():
        raise InputError("file is empty", path=str(path), line=1, hint="give it at least one record")
    return text


def _json_rows(path: Path, text: str) -> Iterator[Row]:
    """Items of a JSON array (or one JSON object) with the line each starts on."""
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if text[pos] != "[":
        try:
            obj, _ = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"invalid JSON: {e.msg}", path=str(path), line=e.lineno, hint="fix the JSON syntax") from None
        yield text.count("\n", 0, pos) + 1, obj
        return
    pos += 1
    line, counted_to = 1, 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            raise InputError("JSON array is not closed", path=str(path), line=text.count("\n") + 1, hint="add the closing ']'")
        if text[pos] == "]":
            return
        line += text.count("\n", counted_to, pos)
        counted_to = pos
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"invalid JSON: {e.msg}", path=str(path), line=e.lineno, hint="fix the JSON syntax") from None
        yield line, obj


def _jsonl_rows(path: Path, text: str, skip_invalid: bool, skipped: list[InputError]) -> Iterator[Row]:
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield n, json.loads(raw)
        except json.JSONDecodeError as e:
            err = InputError(f"invalid JSON: {e.msg} (column {e.colno})", path=str(path), line=n, hint="each line must be one JSON object")
            if not skip_invalid:
                raise err from None
            skipped.append(err)


def _csv_rows(path: Path, text: str) -> Iterator[Row]:
    reader = csv.DictReader(text.splitlines(keepends=True))
    start = 2  # line 1 is the header; a quoted field may span several lines
    for row in reader:
        yield start, row
        start = reader.line_num + 1


def load_rows(path: str | Path, skip_invalid: bool = False, skipped: list[InputError] | None = None) -> list[Row]:
    """Parse a ``.jsonl``, ``.json`` (array or object) or ``.csv`` file into (line, item) rows.

    With ``skip_invalid``, JSONL lines that are not JSON go to ``skipped`` instead of raising.
    """
    path = Path(path)
    text = _read_text(path)
    skipped = skipped if skipped is not None else []
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = list(_csv_rows(path, text))
    elif suffix == ".json" or (suffix != ".jsonl" and text.lstrip().startswith("[")):
        rows = list(_json_rows(path, text))
    else:
        rows = list(_jsonl_rows(path, text, skip_invalid, skipped))
    if not rows and not skipped:
        raise InputError("file holds no records", path=str(path), line=1, hint="give it at least one record")
    return rows


def validation_error(e: ValidationError, path: str, line: int) -> InputError:
    """Turn pydantic's report into one line naming the first bad field."""
    first = e.errors()[0]
    loc = ".".join(str(x) for x in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        return InputError("is missing", path=path, line=line, field=loc, hint="add it")
    return InputError(msg, path=path, line=line, field=loc or None)


def response_id_for(content: str) -> str:
    """Response id the official release derives from the text (md5), so ids match theirs."""
    return hashlib.md5(content.encode("utf-8")).hexdigest()


_PREFERENCE = {"1": "a", "2": "b", "tie": "tie"}


def _official_label(pref: Any, path: str, line: int) -> str:
    label = _PREFERENCE.get(str(pref).strip().lower())
    if label is None:
        raise InputError(f"preference {pref!r} is not 1, 2 or 'tie'", path=path, line=line, field="preference",
                         hint="use 1 when answer1 is better, 2 when answer2 is better")
    return label


def _add_official_pair(obj: dict[str, Any], answer1: Any, answer2: Any, pref: Any, path: str, line: int) -> None:
    """Add one official ``answer1/answer2/preference`` judgement to a record under construction."""
    for name, value in (("answer1", answer1), ("answer2", answer2)):
        if not isinstance(value, str):
            raise InputError(f"must be a string, got {type(value).__name__}", path=path, line=line, field=name)
    label = _official_label(pref, path, line)
    responses = obj.setdefault("responses", [])
    known = {r.get("id") for r in responses if isinstance(r, dict)}
    ids = []
    for content in (answer1, answer2):
        rid = response_id_for(content)
        if rid not in known:
            responses.append({"id": rid, "content": content})
            known.add(rid)
        ids.append(rid)
    obj.setdefault("comparisons", []).append({"a": ids[0], "b": ids[1], "label": label, "source": "official"})


def _official_annotations(obj: dict[str, Any], path: str, line: int) -> None:
    """Move an official ``annotations`` list into canonical ``comparisons`` (in place)."""
    annotations = obj.pop("annotations")
    if not isinstance(annotations, list):
        raise InputError("must be a list", path=path, line=line, field="annotations")
    for i, ann in enumerate(annotations):
        if isinstance(ann, dict) and {"answer1", "answer2", "preference"} <= ann.keys():
            _add_official_pair(obj, ann["answer1"], ann["answer2"], ann["preference"], path, line)
        elif isinstance(ann, (list, tuple)) and len(ann) == 3:
            label = _official_label(ann[2], path, line)
            obj.setdefault("comparisons", []).append({"a": ann[0], "b": ann[1], "label": label, "source": "official"})
        else:
            raise InputError(f"annotations[{i}] is neither [id1, id2, preference] nor an answer1/answer2/preference object",
                             path=path, line=line, field=f"annotations[{i}]")


def _is_official_pair(obj: Any) -> bool:
    return isinstance(obj, dict) and {"answer1", "answer2", "preference"} <= obj.keys()


def parse_record(obj: Any, path: str, line: int) -> Record:
    """Validate one canonical (or official) record object."""
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=line)
    obj = dict(obj)
    if "input" not in obj and isinstance(obj.get("prompt"), (str, list)):
        obj["input"] = obj.pop("prompt")
    if "annotations" in obj:
        _official_annotations(obj, path, line)
    try:
        return Record.model_validate(obj)
    except ValidationError as e:
        raise validation_error(e, path, line) from None


def read_records(paths: str | Path | Iterable[str | Path], skip_invalid: bool = False) -> ReadResult:
    """Read canonical or official record files; raise ``InputError`` on the first bad line.

    With ``skip_invalid`` bad lines are collected in ``ReadResult.skipped`` instead; nothing
    is dropped without a record of it.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    result = ReadResult()
    seen: dict[str, str] = {}
    for p in paths:
        path = str(p)
        pairs: dict[str, tuple[int, dict[str, Any]]] = {}  # official pairwise rows grouped by input
        for line, obj in load_rows(p, skip_invalid, result.skipped):
            try:
                if _is_official_pair(obj):
                    key = json.dumps(obj.get("input"), ensure_ascii=False, sort_keys=True)
                    first_line, group = pairs.setdefault(key, (line, {k: v for k, v in obj.items() if k not in ("answer1", "answer2", "preference")}))
                    _add_official_pair(group, obj["answer1"], obj["answer2"], obj["preference"], path, line)
                    continue
                record = parse_record(obj, path, line)
                if record.id in seen:
                    raise InputError(f"duplicate prompt id '{record.id}' (first at {seen[record.id]})", path=path, line=line,
                                     field="id", hint="give every prompt its own id")
                seen[record.id] = f"{path}:{line}"
                result.records.append(record)
            except InputError as e:
                if not skip_invalid:
                    raise
                result.skipped.append(e)
        for line, group in pairs.values():
            try:
                result.records.append(parse_record(group, path, line))
            except InputError as e:
                if not skip_invalid:
                    raise
                result.skipped.append(e)
    return result


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write dicts as UTF-8 JSONL (Chinese kept readable), atomically; return how many were written."""
    n = 0
    with atomic_file(path) as f:  # a crash or Ctrl-C mid-write never leaves a half file under the real name
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def write_json(path: str | Path, obj: Any) -> None:
    """Write one indented UTF-8 JSON document (reports, metrics, statistics) atomically, creating its folder."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write a UTF-8 text file (a markdown report) atomically, creating its folder."""
    with atomic_file(path) as f:
        f.write(text)


def write_records(path: str | Path, records: Iterable[Record]) -> int:
    """Write records in the canonical format."""
    return write_jsonl(path, (r.to_json() for r in records))


ScoreKey = tuple[str, str]  # (prompt_id, response_id)


def read_scores(path: str | Path) -> dict[ScoreKey, float]:
    """Read a scores file: JSONL rows ``{"prompt_id", "response_id", "score"}``."""
    scores: dict[ScoreKey, float] = {}
    for line, row in load_rows(path):
        if not isinstance(row, dict):
            raise InputError("expected a JSON object", path=str(path), line=line)
        for key, kind in (("prompt_id", str), ("response_id", str), ("score", (int, float))):
            if key not in row:
                raise InputError("is missing", path=str(path), line=line, field=key, hint="rows are {prompt_id, response_id, score}")
            if not isinstance(row[key], kind) or isinstance(row[key], bool):
                raise InputError(f"has the wrong type {type(row[key]).__name__}", path=str(path), line=line, field=key)
        key = (row["prompt_id"], row["response_id"])
        if key in scores:
            raise InputError(f"second score for prompt '{key[0]}' response '{key[1]}'", path=str(path), line=line,
                             hint="keep one row per response")
        scores[key] = float(row["score"])
    return scores


def write_scores(path: str | Path, scores: dict[ScoreKey, float]) -> int:
    """Write a scores file."""
    return write_jsonl(path, ({"prompt_id": p, "response_id": r, "score": s} for (p, r), s in scores.items()))
