"""Reading and writing records and scores, with errors that name file, line and field.

``read_records`` accepts the canonical format and the official CheemsBench /
CheemsPreference files unchanged: records with ``annotations`` (``[id1, id2, pref]`` or
``{"answer1", "answer2", "preference"}``) and pairwise rows ``input/answer1/answer2/preference``,
which are grouped by ``input`` into one record each.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.outputs import atomic_file, together

Row = tuple[int, Any]  # (1-based line number where the item starts, parsed item)


@dataclass
class ReadResult:
    """Records read from one or more files, the lines skipped with ``skip_invalid``, and warnings.

    A warning is a located message about a record that was read but that not all of is used
    (a ``rank`` that leaves responses out).
    """

    records: list[Record] = field(default_factory=list)
    skipped: list[InputError] = field(default_factory=list)
    warnings: list[InputError] = field(default_factory=list)


def _check_path(path: Path) -> None:
    if not path.exists():
        raise InputError("no such file", path=str(path), hint="check the path")
    if path.is_dir():
        raise InputError("is a folder, not a file", path=str(path), hint="name a .jsonl/.json/.csv file")


def _not_utf8(path: Path, data: bytes, e: UnicodeDecodeError, first_line: int = 1) -> InputError:
    """The error for bytes that are not UTF-8; ``data`` starts on line ``first_line`` of the file."""
    if first_line == 1 and data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        what = "UTF-16 text, not UTF-8"
    else:
        column = e.start - data.rfind(b"\n", 0, e.start)
        what = f"not UTF-8 text ({e.reason} at byte {column} of the line)"
    line = first_line + data.count(b"\n", 0, e.start)
    return InputError(what, path=str(path), line=line, hint="save it as UTF-8")


def _has_nul(path: Path, text: str, first_line: int = 1) -> InputError | None:
    nul = text.find("\x00")
    if nul < 0:
        return None
    return InputError(  # binary data, or UTF-16 without its BOM
        "holds a NUL byte: binary data or UTF-16 text, not UTF-8 text",
        path=str(path),
        line=first_line + text.count("\n", 0, nul),
        hint="save it as UTF-8",
    )


def _empty(path: Path) -> InputError:
    return InputError("file is empty", path=str(path), line=1, hint="give it at least one record")


def _read_text(path: Path) -> str:
    """The whole file as text; a BOM is dropped, bytes that are not UTF-8 are named by line."""
    _check_path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _not_utf8(path, data, e) from None
    nul = _has_nul(path, text)
    if nul is not None:
        raise nul
    if not text.strip():
        raise _empty(path)
    return text


def jsonl_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """The non-blank lines of a JSON Lines file, decoded, with their 1-based numbers, read a line at a time.

    The checks of a whole-file read, made line by line so that memory stays bounded: UTF-8 (a BOM is
    dropped, also one that ``cat`` left mid-file), no NUL byte, not empty. Lines end at ``\\n`` only:
    U+2028 and other separators are text inside strings.
    """
    path = Path(path)
    _check_path(path)
    seen_text = False
    with path.open("rb") as f:
        for n, data in enumerate(f, start=1):
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _not_utf8(path, data, e, first_line=n) from None
            nul = _has_nul(path, raw, first_line=n)
            if nul is not None:
                raise nul
            raw = raw.removesuffix("\n").removeprefix("\ufeff")
            if raw.strip():
                seen_text = True
                yield n, raw
    if not seen_text:
        raise _empty(path)


def file_kind(path: str | Path) -> str:
    """``csv``, ``json`` (an array, one value, or JSON Lines under a .json name) or ``jsonl``, as
    :func:`load_rows` reads it: by suffix, and for another suffix by whether the text opens with ``[``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".json", ".jsonl"):
        return suffix[1:]
    _check_path(path)
    with path.open("rb") as f:
        while block := f.read(1 << 16):
            start = block.lstrip(b" \t\r\n\f\v")
            if start.startswith(b"\xef\xbb\xbf"):
                start = start[3:].lstrip()
            if start:
                return "json" if start.startswith(b"[") else "jsonl"
    return "jsonl"


# ---------------------------------------------------------------- JSON values, checked once for every reader

MAX_DEPTH = 100
"""Deepest nesting of lists and objects accepted in one record (real records nest about 5 deep)."""

_WS = re.compile(r"[ \t\r\n]*")  # JSON's own whitespace
_ARRAY_GAP = re.compile(r"[ \t\r\n,]*")


def _gap_end(gap: re.Pattern[str], text: str, pos: int = 0) -> int:
    """Where ``gap`` (``_WS`` or ``_ARRAY_GAP``, which match the empty string too) ends, from ``pos``."""
    match = gap.match(text, pos)
    assert match is not None  # a pattern of only `[...]*` always matches
    return match.end()


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")  # a valid escaped pair decodes to one character outside this range


class JsonFloat(float):
    """A JSON float that remembers how it was written (``reference: 1.10`` is kept as ``"1.10"``)."""

    __slots__ = ("text",)
    text: str


class _NotFinite:
    """Stands in for NaN, Infinity or an out-of-range number until the row's field is named."""

    def __init__(self, text: str, too_large: bool) -> None:
        shown = text if len(text) <= 24 else f"{text[:12]}… ({len(text)} characters)"
        self.message = f"{shown} is {'too large for a number' if too_large else 'not a finite number'}"


class Decoder:
    """``json`` decoding that refuses NaN, Infinity and numbers beyond a float, nesting deeper than
    ``MAX_DEPTH`` and lone surrogates (``"\\ud800"``, which cannot be written back as UTF-8)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.flagged = False
        self.json = json.JSONDecoder(parse_float=self._float, parse_int=self._int, parse_constant=self._not_finite)

    def _not_finite(self, text: str, too_large: bool = False) -> _NotFinite:
        self.flagged = True
        return _NotFinite(text, too_large)

    def _float(self, text: str) -> JsonFloat | _NotFinite:
        value = JsonFloat(text)
        if math.isinf(value):  # 1e400
            return self._not_finite(text, too_large=True)
        value.text = text
        return value

    def _int(self, text: str) -> int | _NotFinite:
        if len(text) > 300:  # past a float's range (and Python's 4300-digit limit): every use would overflow
            return self._not_finite(text, too_large=True)
        return int(text)

    def decode(
        self, text: str, pos: int, line: int, *, text_line: int = 1, hint: str = "fix the JSON syntax"
    ) -> tuple[Any, int]:
        """The JSON value starting at ``pos`` (on ``line``) and where it ends.

        ``text`` begins on line ``text_line`` of the file, so a syntax error names the file's line.
        """
        self.flagged = False
        try:
            return self.json.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(
                f"invalid JSON: {e.msg} (column {e.colno})", path=self.path, line=text_line + e.lineno - 1, hint=hint
            ) from None
        except RecursionError:
            raise InputError(
                f"nested more than {MAX_DEPTH} levels deep", path=self.path, line=line, hint="flatten the record"
            ) from None

    def check(self, value: Any, text: str, start: int, end: int, line: int) -> None:
        """Raise for the first bad number, lone surrogate or too deep nesting in ``value`` (``text[start:end]``)."""
        suspect = (
            self.flagged
            or _SURROGATE_ESCAPE.search(text, start, end) is not None
            or text.count("[", start, end) + text.count("{", start, end) > MAX_DEPTH
        )
        problem = _first_problem(value) if suspect else None
        if problem is not None:
            field, message, hint = problem
            raise InputError(message, path=self.path, line=line, field=_field_name(field) or None, hint=hint)


def _first_problem(value: Any) -> tuple[str, str, str] | None:
    """(field path, what is wrong, how to fix) for the first bad value, walking without recursion."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, _NotFinite):
            return where, item.message, "write a plain number (JSON has no NaN or Infinity)"
        if isinstance(item, str) and _LONE_SURROGATE.search(item):
            return (
                where,
                "holds a lone surrogate escape (\\ud800-\\udfff), which is not text",
                "fix or remove the escape",
            )
        if not isinstance(item, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            return where, f"nested more than {MAX_DEPTH} levels deep", "flatten the record"
        if isinstance(item, dict):
            for key in item:
                if _LONE_SURROGATE.search(key):
                    return (
                        where,
                        f"key {json.dumps(key)} holds a lone surrogate escape, which is not text",
                        "fix or remove the escape",
                    )
            children = [(v, f"{where}.{k}" if where else k) for k, v in item.items()]
        else:
            children = [(v, f"{where}[{i}]") for i, v in enumerate(item)]
        stack.extend((v, w, depth + 1) for v, w in reversed(children))
    return None


def _field_name(where: str) -> str | None:
    """A field path short enough for one line (a path 100 levels deep is not)."""
    return where if len(where) <= 80 else where[:80] + "…"


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _json_rows(path: Path, text: str, skip_invalid: bool, skipped: list[InputError]) -> list[Row]:
    """A ``.json`` file read whole: the items of an array, one value, or JSON Lines.

    A file whose first value is a one-line object with more values on the following lines is
    JSON Lines under a ``.json`` name and is read as such; any other text after the first value
    is refused with its line, never ignored.
    """
    decoder = Decoder(path)
    pos = _gap_end(_WS, text)
    first_line = _line_of(text, pos)
    is_array = text[pos] == "["
    if is_array:
        rows, end = _array_items(decoder, text, pos, first_line, skip_invalid, skipped)
    else:
        value, end = decoder.decode(text, pos, first_line)
    after = _gap_end(_WS, text, end)
    if after < len(text):
        next_line = _line_of(text, after)
        if not is_array and text[pos] == "{" and _line_of(text, end) == first_line < next_line:
            return list(_jsonl_rows(path, _text_lines(text), skip_invalid, skipped))
        what = "a second JSON value" if text[after] in "[{" else "more text"
        raise InputError(
            f"{what} after the JSON {'array' if is_array else 'value'} that ends on line {_line_of(text, end)}",
            path=str(path),
            line=next_line,
            hint="a .json file holds one array or object; for one record per line name it .jsonl",
        )
    if is_array:
        return rows
    try:
        decoder.check(value, text, pos, end, first_line)
    except InputError as e:
        _skip(e, skip_invalid, skipped)
        return []
    return [(first_line, value)]


def _array_items(
    decoder: Decoder, text: str, pos: int, line: int, skip_invalid: bool, skipped: list[InputError]
) -> tuple[list[Row], int]:
    """Items of the JSON array opening at ``pos`` with the line each starts on, and where the array ends."""
    rows: list[Row] = []
    pos += 1
    counted_to = pos
    while True:
        pos = _gap_end(_ARRAY_GAP, text, pos)
        if pos >= len(text):
            raise InputError(
                "JSON array is not closed", path=decoder.path, line=_line_of(text, pos), hint="add the closing ']'"
            )
        if text[pos] == "]":
            return rows, pos + 1
        line += text.count("\n", counted_to, pos)
        counted_to = pos
        value, end = decoder.decode(text, pos, line)
        try:
            decoder.check(value, text, pos, end, line)
            rows.append((line, value))
        except InputError as e:
            _skip(e, skip_invalid, skipped)
        pos = end


def _skip(error: InputError, skip_invalid: bool, skipped: list[InputError]) -> None:
    """A bad row: raise it, or with ``skip_invalid`` list it in ``skipped`` so that nothing goes silently."""
    if not skip_invalid:
        raise error
    skipped.append(error)


def _jsonl_rows(
    path: Path, lines: Iterable[tuple[int, str]], skip_invalid: bool, skipped: list[InputError]
) -> Iterator[Row]:
    """One JSON value per non-blank line of ``lines`` ((number, text) pairs, as :func:`jsonl_lines` gives them)."""
    decoder = Decoder(path)
    for n, raw in lines:
        try:
            yield n, decode_jsonl_line(decoder, raw, n)
        except InputError as e:
            _skip(e, skip_invalid, skipped)


def _text_lines(text: str) -> Iterator[tuple[int, str]]:
    """The non-blank lines of text already in memory. Lines end at ``\\n`` only: U+2028 and other separators are
    text inside strings."""
    for n, raw in enumerate(text.split("\n"), start=1):
        raw = raw.removeprefix("\ufeff")  # files joined with `cat` keep each one's BOM
        if raw.strip():
            yield n, raw


def decode_jsonl_line(decoder: Decoder, raw: str, n: int) -> Any:
    start = _gap_end(_WS, raw)
    looks_indented = n == 1 and raw.strip() in ("[", "{")
    value, end = decoder.decode(
        raw,
        start,
        n,
        text_line=n,
        hint="the file looks like one indented JSON value: name it .json"
        if looks_indented
        else "each line must be one JSON object",
    )
    if _gap_end(_WS, raw, end) != len(raw):
        raise InputError(
            f"more text after the JSON value (column {end + 1})",
            path=decoder.path,
            line=n,
            hint="put one JSON object on each line",
        )
    decoder.check(value, raw, start, end, n)
    return value


def _csv_rows(path: Path, text: str, skip_invalid: bool, skipped: list[InputError]) -> Iterator[Row]:
    """Rows of a CSV file as dicts keyed by the header, each with the line it starts on."""
    if text.lstrip()[:1] in ("{", "["):
        raise InputError(
            "holds JSON, not CSV",
            path=str(path),
            line=_line_of(text, len(text) - len(text.lstrip())),
            hint="name it .jsonl (one object per line) or .json",
        )
    csv.field_size_limit(max(csv.field_size_limit(), len(text)))  # a long response is one big cell
    lines = io.StringIO(text, newline="")
    consumed = 0

    def physical_lines() -> Iterator[str]:
        nonlocal consumed
        for physical in lines:
            consumed += 1
            yield physical

    # strict: a quote left open would otherwise swallow every following line into one cell
    reader = csv.reader(physical_lines(), strict=True)
    start = 1
    try:
        header = next(reader)
        while not header:  # blank lines before the header
            start = consumed + 1
            header = next(reader)
        _check_header(header, str(path), start)
        while True:
            start = consumed + 1
            cells = next(reader, None)
            if cells is None:
                return
            if not cells:
                continue  # a blank line
            if len(cells) > len(header):
                _skip(
                    InputError(
                        f"row has {len(cells)} cells, the header {len(header)}",
                        path=str(path),
                        line=start,
                        hint="quote cells that contain commas",
                    ),
                    skip_invalid,
                    skipped,
                )
                continue
            yield start, dict(zip(header, cells + [None] * (len(header) - len(cells))))  # missing cells read as absent
    except csv.Error as e:
        raise InputError(
            f"not valid CSV: {e} in the row that starts here",
            path=str(path),
            line=start,
            hint='quote a cell as "…" and write a quote inside it as ""',
        ) from None


def _check_header(header: list[str], path: str, line: int) -> None:
    """Refuse a header that would lose columns: a name used twice, or one column in a tab/semicolon file."""
    dupes = sorted({name for name in header if header.count(name) > 1})
    if dupes:
        raise InputError(
            f"the header names {', '.join(map(repr, dupes))} twice",
            path=path,
            line=line,
            hint="give every column its own name",
        )
    if len(header) == 1:
        sep = next((s for s in ("\t", ";") if s in header[0]), None)
        if sep is not None:
            raise InputError(
                f"the header is one column holding {sep!r}: the file is not comma-separated",
                path=path,
                line=line,
                hint="save it as comma-separated CSV",
            )


def load_rows(path: str | Path, skip_invalid: bool = False, skipped: list[InputError] | None = None) -> list[Row]:
    """Parse a ``.jsonl``, ``.json`` (array, object or JSON Lines) or ``.csv`` file into (line, item) rows.

    The whole file is read; nothing after a first value is ignored. Every number is finite, every
    string is real text and nesting is at most ``MAX_DEPTH`` deep, or the row is refused with its
    line and field. With ``skip_invalid``, such rows go to ``skipped`` instead of raising.
    """
    return list(iter_rows(path, skip_invalid, skipped))


def iter_rows(
    path: str | Path, skip_invalid: bool = False, skipped: list[InputError] | None = None
) -> Generator[Row, None, None]:
    """The rows of :func:`load_rows` as they are read: a JSON Lines file a line at a time, other formats parsed
    whole first. A file with no rows at all (and none skipped) is refused at its end."""
    path = Path(path)
    skipped = skipped if skipped is not None else []
    before = len(skipped)
    kind = file_kind(path)
    if kind == "jsonl":
        rows: Iterable[Row] = _jsonl_rows(path, jsonl_lines(path), skip_invalid, skipped)
    else:
        text = _read_text(path)
        rows = (
            _csv_rows(path, text, skip_invalid, skipped)
            if kind == "csv"
            else _json_rows(path, text, skip_invalid, skipped)
        )
    any_row = False
    for row in rows:
        any_row = True
        yield row
    if not any_row and len(skipped) == before:
        raise InputError("file holds no records", path=str(path), line=1, hint="give it at least one record")


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
        raise InputError(
            f"preference {pref!r} is not 1, 2 or 'tie'",
            path=path,
            line=line,
            field="preference",
            hint="use 1 when answer1 is better, 2 when answer2 is better",
        )
    return label


def add_official_pair(obj: dict[str, Any], answer1: Any, answer2: Any, pref: Any, path: str, line: int) -> None:
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
            add_official_pair(obj, ann["answer1"], ann["answer2"], ann["preference"], path, line)
        elif isinstance(ann, (list, tuple)) and len(ann) == 3:
            # CheemsRM (cheems/train/dataset.py SampleDataset) makes a pair of a triple only when p is "1", the
            # first id being the better, and drops it silently otherwise: refused here rather than read another way
            if str(ann[2]).strip() != "1" or isinstance(ann[2], bool):
                raise InputError(
                    f"annotations[{i}] is [{ann[0]!r}, {ann[1]!r}, {ann[2]!r}]: in an [id1, id2, p] triple p must be "
                    '"1" (id1 is the better); CheemsRM drops a triple with any other p',
                    path=path,
                    line=line,
                    field=f"annotations[{i}]",
                    hint='write the better id first with "1"; a tie as a comparison {"a", "b", "label": "tie"}',
                )
            obj.setdefault("comparisons", []).append({"a": ann[0], "b": ann[1], "label": "a", "source": "official"})
        else:
            raise InputError(
                f"annotations[{i}] is neither [id1, id2, preference] nor an answer1/answer2/preference object",
                path=path,
                line=line,
                field=f"annotations[{i}]",
            )


def is_official_pair(obj: Any) -> bool:
    return isinstance(obj, dict) and {"answer1", "answer2", "preference"} <= obj.keys()


def parse_record(obj: Any, path: str, line: int, id_scope: str | None = None, *, prompts: bool = False) -> Record:
    """Validate one canonical (or official) record object. A record without an ``id`` is named by its prompt
    text; with ``id_scope`` (a bench file's subset) that name is ``SCOPE/p-…``, so that the same prompt in two
    bench files is two prompts, as upstream evaluates each file on its own. With ``prompts`` the record may be a
    prompt alone (a prompt pool: no ``responses`` or ``"responses": []``, as ``categorize apply`` writes): it
    comes back with no responses, the rest of it checked as any record's."""
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=line)
    obj = dict(obj)
    if prompts and not obj.get("responses"):
        # A record needs a response to be valid: check the rest of the row with a stand-in, then drop it.
        record = parse_record({**obj, "responses": [{"id": "-", "content": ""}]}, path, line, id_scope)
        return record.model_copy(update={"responses": []})
    if "input" not in obj and isinstance(obj.get("prompt"), (str, list)):
        obj["input"] = obj.pop("prompt")
    if "annotations" in obj:
        _official_annotations(obj, path, line)
    try:
        record = Record.model_validate(obj)
    except ValidationError as e:
        raise validation_error(e, path, line) from None
    if id_scope is not None and not obj.get("id"):
        record.id = f"{id_scope}/{record.id}"
    return record


def json_line(row: dict[str, Any]) -> str:
    """One JSONL line (without its newline) as every writer here writes it: UTF-8, Chinese kept readable."""
    return json.dumps(row, ensure_ascii=False)


def record_line(record: Record) -> str:
    """A record as one line of a canonical record file (what :func:`write_records` writes)."""
    return json_line(record.to_json())


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write dicts as UTF-8 JSONL (Chinese kept readable), atomically; return how many were written."""
    return write_lines(path, (json_line(row) for row in rows))


def write_lines(path: str | Path, lines: Iterable[str]) -> int:
    """Write ready-made JSONL lines (a newline added to each) atomically, as they come; return how many."""
    n = 0
    with atomic_file(path) as f:  # a crash or Ctrl-C mid-write never leaves a half file under the real name
        for line in lines:
            f.write(line + "\n")
            n += 1
    return n


def write_lines_and_report(
    path: str | Path, lines: Iterable[str], report_path: str | Path | None, report: Callable[[], Any]
) -> int:
    """:func:`write_lines`, then (with ``report_path``) the JSON ``report()`` that writing them filled in: both
    files or neither. Returns the number of lines."""
    with together():
        n = write_lines(path, lines)
        if report_path is not None:
            write_json(report_path, report())
    return n


def write_json(path: str | Path, obj: Any) -> None:
    """Write one indented UTF-8 JSON document (reports, metrics, statistics) atomically, creating its folder."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write a UTF-8 text file (a markdown report) atomically, creating its folder."""
    with atomic_file(path) as f:
        f.write(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write a binary file (a PNG chart) atomically, creating its folder."""
    with atomic_file(path, binary=True) as f:
        f.write(data)


def write_records(path: str | Path, records: Iterable[Record]) -> int:
    """Write records in the canonical format."""
    return write_lines(path, (record_line(r) for r in records))


ScoreKey = tuple[str, str]  # (prompt_id, response_id)


def score_row(row: Any, path: str | Path, line: int) -> tuple[ScoreKey, float]:
    """One row of a scores file, checked: ``((prompt_id, response_id), score)``."""
    if not isinstance(row, dict):
        raise InputError("expected a JSON object", path=str(path), line=line)
    for key, kind in (("prompt_id", str), ("response_id", str), ("score", (int, float))):
        if key not in row:
            raise InputError(
                "is missing", path=str(path), line=line, field=key, hint="rows are {prompt_id, response_id, score}"
            )
        if not isinstance(row[key], kind) or isinstance(row[key], bool):
            raise InputError(f"has the wrong type {type(row[key]).__name__}", path=str(path), line=line, field=key)
    return (row["prompt_id"], row["response_id"]), float(row["score"])


def repeated_score(key: ScoreKey, path: str | Path, line: int) -> InputError:
    """The error for a second row of the same response in a scores file."""
    return InputError(
        f"second score for prompt '{key[0]}' response '{key[1]}'",
        path=str(path),
        line=line,
        hint="keep one row per response",
    )


def read_scores(path: str | Path) -> dict[ScoreKey, float]:
    """Read a scores file: JSONL rows ``{"prompt_id", "response_id", "score"}``."""
    scores: dict[ScoreKey, float] = {}
    for line, row in load_rows(path):
        key, value = score_row(row, path, line)
        if key in scores:
            raise repeated_score(key, path, line)
        scores[key] = value
    return scores


def write_scores(path: str | Path, scores: Mapping[ScoreKey, float] | Iterable[tuple[ScoreKey, float]]) -> int:
    """Write a scores file: a dict, or ``(key, score)`` pairs as they come (consumed lazily)."""
    pairs = scores.items() if isinstance(scores, Mapping) else scores
    return write_jsonl(path, ({"prompt_id": p, "response_id": r, "score": s} for (p, r), s in pairs))


def id_places(paths: Iterable[str | Path], rid: str, limit: int = 2) -> list[str]:
    """``path:line`` of the first ``limit`` rows whose written ``id`` is ``rid``, for an error about an id that two
    records share when the reader that found it kept no lines (read again: the error path only). An id derived from
    the prompt text repeats only with the text, so the ids that clash are written ones."""
    places: list[str] = []
    for path in paths:
        for line, row in iter_rows(path, skip_invalid=True):
            if isinstance(row, dict) and row.get("id") == rid:
                places.append(f"{path}:{line}")
                if len(places) == limit:
                    return places
    return places
