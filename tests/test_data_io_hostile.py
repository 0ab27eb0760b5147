"""Hostile input files for the commands that read records and scores (issue 8, classes 1-3).

Each catalogue case is a file a user could really have: JSON Lines saved as ``.json``, a GBK CSV
from Excel, NaN scores from numpy, a lone surrogate from a broken scraper, a bench where every
response ties. Each asserts the exit code, one ``error:`` line naming file:line (and the field),
no traceback, and that the folder holds exactly what it held before: no output created, no
earlier output changed, no temporary file left behind. The ``--skip-invalid`` cases check that
records in = records out + records listed as skipped.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from cheems.data.io import load_rows, read_scores
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.evaluate import evaluate_scores
from cheems.metrics import overall
from cheems.metrics.cheemsbench import GroupMetrics
from helpers import assert_user_error, record, run_cheems, run_main, write_jsonl

# ---------------------------------------------------------------- building blocks

RESPONSES = [{"id": "r1", "content": "等于2。"}, {"id": "r2", "content": "等于3。"}, {"id": "r3", "content": "不知道"}]


def rec(pid: str = "p1", **changes) -> dict:
    """A good ranked record (three responses, three levels)."""
    return {
        "id": pid,
        "input": "1+1等于几？",
        "category": ["数学"],
        "responses": [dict(r) for r in RESPONSES],
        "rank": {"r1": 1, "r2": 2, "r3": 3},
    } | changes


def dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)


def lines(*rows) -> bytes:
    """JSONL bytes; a str row is written as it is."""
    return "".join((r if isinstance(r, str) else dump(r)) + "\n" for r in rows).encode("utf-8")


def with_raw(obj: dict, placeholder: str, raw: str) -> str:
    """``obj`` as JSON with the string ``placeholder`` replaced by raw JSON text (NaN, an escape, …)."""
    text = dump(obj)
    assert f'"{placeholder}"' in text
    return text.replace(f'"{placeholder}"', raw)


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


PAIR = {"prompt": "问", "chosen": "好", "rejected": "差"}
RANKED = {"prompt": "问", "responses": ["好", "中", "差"]}
RATED = {"prompt": "问", "responses": [{"content": "好", "score": 3}, {"content": "差", "score": 1}]}
OFFICIAL_PAIR = {"input": "问", "answer1": "好", "answer2": "差", "preference": 1}


def score_rows(*pids: str) -> list[dict]:
    return [{"prompt_id": p, "response_id": r["id"], "score": 3.0 - i} for p in pids for i, r in enumerate(RESPONSES)]


# ---------------------------------------------------------------- the catalogue


@dataclass
class Case:
    command: str  # validate | import[:FORMAT] | resolve | split | score | eval | eval-scores
    filename: str
    content: bytes
    line: int | None  # None: the error names the file only
    says: str
    field: str | None = None


def case(id_: str, *args, **kwargs) -> pytest.param:
    return pytest.param(Case(*args, **kwargs), id=id_)


GOOD_JSONL = [rec(f"p{i}") for i in range(1, 101)]
PRETTY_TWO = (
    json.dumps(rec("p1"), ensure_ascii=False, indent=2) + "\n" + json.dumps(rec("p2"), ensure_ascii=False, indent=2)
).encode()
PRETTY_TWO_SECOND = len(json.dumps(rec("p1"), indent=2).splitlines()) + 1
PRETTY_ARRAY = json.dumps([rec("p1"), rec("p2")], ensure_ascii=False, indent=2)
SECOND_ITEM_LINE = PRETTY_ARRAY.splitlines().index("  {", 2) + 1  # line where the second record opens
GBK_CSV = b"prompt,chosen,rejected\n" + "问题,好的回答,差的回答\n".encode("gbk")

CATALOGUE = [
    # ---- class 1: a file is read whole, or refused with the line
    case(
        "jsonl-named-json-bad-line-57",
        "validate",
        "data.json",
        lines(*GOOD_JSONL[:56], '{"id": "p57", "input": ', *GOOD_JSONL[57:]),
        57,
        "invalid JSON",
    ),
    case(
        "jsonl-named-json-pairwise-type-error-line-40",
        "import",
        "pairs.json",
        lines(*[PAIR | {"prompt": f"问{i}"} for i in range(39)], PAIR | {"chosen": 5}, PAIR),
        40,
        "must be a string",
        "chosen",
    ),
    case("two-indented-objects-in-json", "resolve", "data.json", PRETTY_TWO, PRETTY_TWO_SECOND, "a second JSON value"),
    case(
        "object-then-stray-brace",
        "split",
        "data.json",
        (dump(rec()) + "}").encode(),
        1,
        "more text after the JSON value",
    ),
    case(
        "array-then-second-array",
        "score",
        "open.json",
        f"[{dump(rec('p1'))}]\n[{dump(rec('p2'))}]".encode(),
        2,
        "a second JSON value after the JSON array",
    ),
    case(
        "array-not-closed",
        "import:official",
        "data.json",
        f"[{dump(rec('p1'))},\n{dump(rec('p2'))}\n".encode(),
        3,
        "JSON array is not closed",
    ),
    case(
        "indented-array-broken-in-second-item",
        "eval",
        "open.json",
        PRETTY_ARRAY.replace('"p2"', '"p2" "x"', 1).encode(),
        SECOND_ITEM_LINE + 1,
        "invalid JSON",
    ),
    case("indented-json-named-jsonl", "validate", "data.jsonl", PRETTY_ARRAY.encode(), 1, "name it .json"),
    case(
        "two-objects-on-one-jsonl-line",
        "resolve",
        "data.jsonl",
        lines(rec("p1"), dump(rec("p2")) + dump(rec("p3"))),
        2,
        "more text after the JSON value",
    ),
    case(
        "array-then-text",
        "import:ranked",
        "r.json",
        f"[{dump(RANKED)}]\nend of export\n".encode(),
        2,
        "more text after the JSON array",
    ),
    case("nesting-100000-deep", "validate", "data.jsonl", lines(rec("p1"), deep(100_000)), 2, "nested more than"),
    case(
        "nesting-deep-in-chosen",
        "import:pairwise",
        "pairs.jsonl",
        lines(PAIR, PAIR, with_raw(PAIR | {"chosen": "X"}, "X", deep(50_000))),
        3,
        "nested more than",
    ),
    case(
        "nesting-150-in-metadata",
        "resolve",
        "data.jsonl",
        lines(rec("p1"), with_raw(rec("p2", meta="X"), "X", deep(150))),
        2,
        "field 'meta[0][0][0]",
    ),
    case(
        "nesting-deep-in-scores",
        "eval-scores",
        "s.jsonl",
        lines(score_rows("p1")[0], with_raw(score_rows("p1")[1] | {"extra": "X"}, "X", deep(5000))),
        2,
        "nested more than",
    ),
    case(
        "nesting-deep-in-indented-array-item",
        "import",
        "data.json",
        PRETTY_ARRAY.replace('"p2"', '"p2", "meta": ' + deep(200), 1).encode(),
        SECOND_ITEM_LINE,
        "nested more than",
    ),
    case(
        "lone-surrogate-in-response",
        "validate",
        "data.jsonl",
        lines(
            rec("p1"),
            with_raw(
                rec("p2", responses=[RESPONSES[0], {"id": "r2", "content": "X"}, RESPONSES[2]]), "X", '"\\ud800坏"'
            ),
        ),
        2,
        "lone surrogate",
        "responses[1].content",
    ),
    case(
        "lone-surrogate-in-chosen",
        "import:pairwise",
        "pairs.jsonl",
        lines(PAIR, with_raw(PAIR | {"chosen": "X"}, "X", '"\\udfff"')),
        2,
        "lone surrogate",
        "chosen",
    ),
    case(
        "lone-surrogate-in-ranked-list",
        "import:ranked",
        "r.jsonl",
        lines(with_raw(RANKED | {"responses": ["好", "X"]}, "X", '"a\\ud834"')),
        1,
        "lone surrogate",
        "responses[1]",
    ),
    case(
        "lone-surrogate-in-prompt",
        "import:ratings",
        "rated.jsonl",
        lines(RATED, with_raw(RATED | {"prompt": "X"}, "X", '"\\udc00?"')),
        2,
        "lone surrogate",
        "prompt",
    ),
    case(
        "lone-surrogate-in-official-answer",
        "import:official",
        "official.jsonl",
        lines(with_raw(OFFICIAL_PAIR | {"answer2": "X"}, "X", '"\\ud800"')),
        1,
        "lone surrogate",
        "answer2",
    ),
    case(
        "lone-surrogate-in-a-key",
        "resolve",
        "data.jsonl",
        lines(rec("p1"), dump(rec("p2"))[:-1] + ', "\\udc80": 1}'),
        2,
        "lone surrogate",
    ),
    case(
        "high-surrogate-without-low",
        "split",
        "data.jsonl",
        lines(with_raw(rec("p1", input="X"), "X", '"\\ud83dabc"')),
        1,
        "lone surrogate",
        "input",
    ),
    case(
        "lone-surrogate-in-response-id",
        "score",
        "open.jsonl",
        lines(with_raw(rec("p1", responses=[{"id": "X", "content": "a"}], rank=None), "X", '"r\\ud800"')),
        1,
        "lone surrogate",
        "responses[0].id",
    ),
    case(
        "lone-surrogate-in-prompt-id",
        "eval-scores",
        "s.jsonl",
        lines(*score_rows("p1"), with_raw(score_rows("p1")[0] | {"prompt_id": "X"}, "X", '"\\udbff"')),
        4,
        "lone surrogate",
        "prompt_id",
    ),
    case(
        "latin1-byte-on-line-3",
        "validate",
        "data.jsonl",
        lines(rec("p1"), rec("p2")) + dump(rec("p3")).encode("utf-8")[:-2] + b'\xe9"}\n',
        3,
        "not UTF-8",
    ),
    case("gbk-csv-from-excel", "import:pairwise", "pairs.csv", GBK_CSV, 2, "not UTF-8"),
    case("utf16-with-bom", "resolve", "data.jsonl", lines(rec("p1")).decode().encode("utf-16"), 1, "UTF-16"),
    case(
        "utf16-without-bom",
        "split",
        "data.jsonl",
        lines(rec("p1", input="1+1?", responses=[{"id": "r1", "content": "2"}], rank=None))
        .decode()
        .encode("utf-16-le"),
        1,
        "NUL byte",
    ),
    case(
        "cut-utf8-sequence",
        "score",
        "open.jsonl",
        lines(rec("p1")) + '{"id": "p2", "input": "问'.encode()[:-1] + b'"}\n',
        2,
        "not UTF-8",
    ),
    case(
        "binary-byte-in-scores",
        "eval-scores",
        "s.jsonl",
        lines(*score_rows("p1")) + b'{"prompt_id": "\xff"}\n',
        4,
        "not UTF-8",
    ),
    case("json-saved-as-csv", "import:pairwise", "pairs.csv", lines(PAIR, PAIR), 1, "holds JSON, not CSV"),
    case(
        "tab-separated-csv",
        "import:pairwise",
        "pairs.csv",
        b"prompt\tchosen\trejected\nq\ta\tb\n",
        1,
        "not comma-separated",
    ),
    case(
        "csv-header-twice-the-same",
        "import:pairwise",
        "pairs.csv",
        b"prompt,chosen,chosen\nq,a,b\n",
        1,
        "'chosen' twice",
    ),
    case(
        "csv-quote-never-closed",
        "import:pairwise",
        "pairs.csv",
        'prompt,chosen,rejected\n问,好,差\n问2,"好,差\n问3,好,差\n问4,好,差\n'.encode(),
        3,
        "not valid CSV",
    ),
    case(
        "csv-stray-quote",
        "import:pairwise",
        "pairs.csv",
        'prompt,chosen,rejected\n问,"好"的,差\n'.encode(),
        2,
        "not valid CSV",
    ),
    case(
        "csv-more-cells-than-header",
        "import",
        "pairs.csv",
        "prompt,chosen,rejected\n问,好,差\n问,好,差,多余\n".encode(),
        3,
        "row has 4 cells",
    ),
    case(
        "csv-error-after-multiline-cell",
        "import:pairwise",
        "pairs.csv",
        'prompt,chosen,rejected\n问,"多\n行\n回答",差\n问2,好,差,多余\n'.encode(),
        5,
        "row has 4 cells",
    ),
    case(
        "csv-blank-lines-then-stray-quote",
        "import:pairwise",
        "pairs.csv",
        'prompt,chosen,rejected\n\n问,好,差\n\n\n问2,"好"差,差\n'.encode(),
        6,
        "not valid CSV",
    ),
    case("csv-nul-byte", "validate", "data.csv", b"input,responses\nq,\x00\n", 2, "NUL byte"),
    # ---- class 2: NaN, Infinity and 1e400 in any number of a record or scores file
    case(
        "rank-nan",
        "validate",
        "data.jsonl",
        lines(rec("p1"), with_raw(rec("p2", rank={"r1": 1, "r2": "X", "r3": 3}), "X", "NaN")),
        2,
        "NaN is not a finite number",
        "rank.r2",
    ),
    case(
        "rank-infinity",
        "resolve",
        "data.jsonl",
        lines(with_raw(rec("p1", rank={"r1": "X", "r2": 2, "r3": 3}), "X", "Infinity")),
        1,
        "Infinity is not a finite number",
        "rank.r1",
    ),
    case(
        "rank-1e400",
        "split",
        "data.jsonl",
        lines(rec("p1"), rec("p2"), with_raw(rec("p3", rank={"r1": 1, "r2": 2, "r3": "X"}), "X", "1e400")),
        3,
        "1e400 is too large",
        "rank.r3",
    ),
    case(
        "rank-minus-infinity",
        "score",
        "open.jsonl",
        lines(with_raw(rec("p1", rank={"r1": "X", "r2": 2, "r3": 3}), "X", "-Infinity")),
        1,
        "-Infinity is not a finite number",
        "rank.r1",
    ),
    case(
        "rank-nan-in-bench",
        "eval",
        "open.jsonl",
        lines(with_raw(rec("p1", rank={"r1": 1, "r2": "X", "r3": 3}), "X", "NaN")),
        1,
        "NaN",
        "rank.r2",
    ),
    case(
        "rating-infinity",
        "import:ratings",
        "rated.jsonl",
        lines(
            RATED,
            with_raw(
                RATED | {"responses": [{"content": "好", "score": "X"}, {"content": "差", "score": 1}]}, "X", "Infinity"
            ),
        ),
        2,
        "Infinity",
        "responses[0].score",
    ),
    case(
        "ratings-list-nan",
        "import:ratings",
        "rated.jsonl",
        lines(with_raw({"prompt": "问", "responses": ["好", "差"], "scores": [1, "X"]}, "X", "NaN")),
        1,
        "NaN",
        "scores[1]",
    ),
    case(
        "rating-1e400",
        "import:ratings",
        "rated.json",
        (
            "["
            + with_raw(
                {"prompt": "问", "responses": [{"text": "好", "rating": 2}, {"text": "差", "rating": "X"}]},
                "X",
                "1e400",
            )
            + "]"
        ).encode(),
        1,
        "too large",
        "responses[1].rating",
    ),
    case(
        "ratings-list-minus-1e999",
        "import",
        "rated.jsonl",
        lines(RATED, with_raw({"prompt": "问", "responses": ["好", "差"], "scores": ["X", 1]}, "X", "-1e999")),
        2,
        "too large",
        "scores[0]",
    ),
    case(
        "rating-400-digit-integer",
        "import:ratings",
        "rated.jsonl",
        lines(
            with_raw(
                RATED | {"responses": [{"content": "好", "score": "X"}, {"content": "差", "score": 1}]}, "X", "9" * 400
            )
        ),
        1,
        "too large",
        "responses[0].score",
    ),
    case(
        "ranked-extra-field-nan",
        "import:ranked",
        "r.jsonl",
        lines(RANKED, with_raw(RANKED | {"weight": "X"}, "X", "NaN")),
        2,
        "NaN",
        "weight",
    ),
    case(
        "pairwise-margin-infinity",
        "import:pairwise",
        "pairs.jsonl",
        lines(with_raw(PAIR | {"margin": "X"}, "X", "Infinity")),
        1,
        "Infinity",
        "margin",
    ),
    case(
        "official-preference-nan",
        "import:official",
        "official.jsonl",
        lines(OFFICIAL_PAIR, with_raw(OFFICIAL_PAIR | {"preference": "X"}, "X", "NaN")),
        2,
        "NaN",
        "preference",
    ),
    case(
        "comparison-margin-nan",
        "validate",
        "data.jsonl",
        lines(
            with_raw(
                rec("p1", rank=None, comparisons=[{"a": "r1", "b": "r2", "label": "a", "margin": "X"}]), "X", "NaN"
            )
        ),
        1,
        "NaN",
        "comparisons[0].margin",
    ),
    case(
        "official-annotation-nan",
        "import:official",
        "official.jsonl",
        lines(with_raw({"input": "问", "responses": RESPONSES, "annotations": [["r1", "r2", "X"]]}, "X", "NaN")),
        1,
        "NaN",
        "annotations[0][2]",
    ),
    case(
        "score-nan",
        "eval-scores",
        "s.jsonl",
        lines(score_rows("p1")[0], with_raw(score_rows("p1")[1] | {"score": "X"}, "X", "NaN"), score_rows("p1")[2]),
        2,
        "NaN is not a finite number",
        "score",
    ),
    case(
        "score-infinity",
        "eval-scores",
        "s.jsonl",
        lines(*score_rows("p1")[:2], with_raw(score_rows("p1")[2] | {"score": "X"}, "X", "Infinity")),
        3,
        "Infinity",
        "score",
    ),
    case(
        "score-minus-infinity",
        "eval-scores",
        "s.jsonl",
        lines(with_raw(score_rows("p1")[0] | {"score": "X"}, "X", "-Infinity"), *score_rows("p1")[1:]),
        1,
        "-Infinity",
        "score",
    ),
    case(
        "score-1e400",
        "eval-scores",
        "s.jsonl",
        lines(*score_rows("p1")[:2], with_raw(score_rows("p1")[2] | {"score": "X"}, "X", "1e400")),
        3,
        "too large",
        "score",
    ),
    case(
        "score-1e309-in-json-array",
        "eval-scores",
        "s.json",
        (
            "[\n"
            + ",\n".join(
                [dump(r) for r in score_rows("p1")[:2]] + [with_raw(score_rows("p1")[2] | {"score": "X"}, "X", "1e309")]
            )
            + "\n]"
        ).encode(),
        4,
        "too large",
        "score",
    ),
    case(
        "rank-one-and-a-half",
        "validate",
        "data.jsonl",
        lines(rec("p1", rank={"r1": 1, "r2": 1.5, "r3": 3})),
        1,
        "whole number",
        "rank",
    ),
    case(
        "rank-zero",
        "resolve",
        "data.jsonl",
        lines(rec("p1"), rec("p2", rank={"r1": 0, "r2": 1, "r3": 2})),
        2,
        ">= 1",
        "rank",
    ),
    case(
        "reference-nan",
        "resolve",
        "data.jsonl",
        lines(with_raw(rec("p1", reference="X"), "X", "NaN")),
        1,
        "NaN",
        "reference",
    ),
    # ---- class 3: evaluation never averages in what cannot be measured
    case(
        "bench-every-rank-one-level",
        "eval",
        "open.jsonl",
        lines(rec("p1", rank={"r1": 1, "r2": 1, "r3": 1}), rec("p2", rank={"r1": 1})),
        None,
        "no prompt in any bench file has a ranked pair",
    ),
    case(
        "bench-without-rank-or-comparisons",
        "eval",
        "open.jsonl",
        lines(rec("p1", rank=None), rec("p2", rank=None)),
        None,
        "has a ranked pair",
    ),
    case(
        "bench-only-tie-comparisons",
        "eval",
        "open.jsonl",
        lines(
            rec(
                "p1",
                rank=None,
                comparisons=[{"a": "r1", "b": "r2", "label": "tie"}, {"a": "r2", "b": "r3", "label": "tie"}],
            )
        ),
        None,
        "has a ranked pair",
    ),
    case(
        "score-as-string",
        "eval-scores",
        "s.jsonl",
        lines(*score_rows("p1")[:2], score_rows("p1")[2] | {"score": "0.9"}),
        3,
        "wrong type str",
        "score",
    ),
    case(
        "score-row-without-response-id",
        "eval-scores",
        "s.jsonl",
        lines({"prompt_id": "p1", "score": 1.0}),
        1,
        "is missing",
        "response_id",
    ),
    case("score-row-twice", "eval-scores", "s.jsonl", lines(*score_rows("p1"), score_rows("p1")[0]), 4, "second score"),
    case(
        "score-missing-for-a-ranked-response",
        "eval-scores",
        "s.jsonl",
        lines(*score_rows("p1")[:2]),
        None,
        "no score for prompt 'p1' response 'r3'",
    ),
    case(
        "scores-jsonl-named-json-bad-line-5",
        "eval-scores",
        "s.json",
        lines(
            *score_rows("p1"),
            {"prompt_id": "p9", "response_id": "r1", "score": 1},
            '{"prompt_id": "p9", "response_id": "r2", "score": }',
        ),
        5,
        "invalid JSON",
    ),
    case("scores-json-saved-as-csv", "eval-scores", "s.csv", lines(*score_rows("p1")), 1, "holds JSON, not CSV"),
]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (to prove nothing was created, changed or left behind)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def command_line(c: Case, src: Path, folder: Path) -> list[object]:
    out = folder / "out.jsonl"
    if c.command == "validate":
        return ["validate", src]
    if c.command.startswith("import"):
        fmt = c.command.partition(":")[2]
        return ["import", *([fmt] if fmt else []), src, "-o", out]
    if c.command == "resolve":
        return ["resolve", src, "-o", out, "--stats-json", folder / "stats.json"]
    if c.command == "split":
        return ["split", src, "--train", out, "--test", folder / "test.jsonl"]
    if c.command == "score":
        return ["score", "--model", "length", "--bench", src, "-o", out, "--no-cache"]
    metrics = ["--output-json", folder / "metrics.json", "--report", folder / "report"]
    if c.command == "eval":
        return [
            "eval",
            "--bench",
            src,
            "--scores",
            write_jsonl(folder / "good-scores.jsonl", score_rows("p1", "p2")),
            *metrics,
        ]
    assert c.command == "eval-scores"
    return ["eval", "--bench", write_jsonl(folder / "bench.jsonl", [rec("p1")]), "--scores", src, *metrics]


def test_catalogue_is_large_enough():
    assert len(CATALOGUE) >= 60


def check_hostile_file(tmp_path: Path, c: Case, run) -> None:
    """``c``'s file given to its command (``run(*args)``: in this process or as a real one): one located error
    line, nothing written, an earlier output unchanged."""
    src = tmp_path / c.filename
    src.write_bytes(c.content)
    (tmp_path / "out.jsonl").write_text('{"earlier": "output"}\n', encoding="utf-8")  # must survive unchanged
    args = command_line(c, src, tmp_path)
    before = snapshot(tmp_path)
    proc = run(*args)
    where = f"{src}:{c.line}:" if c.line is not None else f"{src}"
    line = assert_user_error(proc, where, c.says, *([f"field '{c.field}'"] if c.field else []))
    if c.line is None:
        assert not re.search(re.escape(str(src)) + r":\d", line), line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("c", CATALOGUE)
def test_hostile_file_is_one_located_error_and_nothing_written(tmp_path, monkeypatch, capsys, c: Case):
    # through the real entry point in this process: each case costs milliseconds, not an interpreter start
    check_hostile_file(tmp_path, c, lambda *args: run_main(*args, monkeypatch=monkeypatch, capsys=capsys))


REAL_PROCESS = {"jsonl-named-json-bad-line-57", "nesting-deep-in-chosen", "indented-array-broken-in-second-item"}


@pytest.mark.parametrize("c", [p for p in CATALOGUE if p.id in REAL_PROCESS])
def test_the_real_command_says_the_same(tmp_path, c: Case):
    """A few catalogue cases as a user runs them (a JSON error, deep nesting, a bench): a separate process, its
    exit code and stderr."""
    check_hostile_file(tmp_path, c, run_cheems)


# ---------------------------------------------------------------- --skip-invalid: nothing lost

# name: (command, file name, content, records in the file, records that must be skipped)
SKIP_CASES = {
    "jsonl: NaN, surrogate, deep, broken": (
        "import:official",
        "data.jsonl",
        lines(
            rec("p1"),
            with_raw(rec("p2", rank={"r1": "X", "r2": 2, "r3": 3}), "X", "NaN"),
            rec("p3"),
            with_raw(rec("p4", input="X"), "X", '"\\ud800"'),
            deep(5000),
            '{"id": "p6", ',
            rec("p7"),
        ),
        7,
        4,
    ),
    "jsonl named .json with bad lines": (
        "resolve",
        "data.json",
        lines(
            *[rec(f"p{i}") for i in range(1, 40)],
            '{"id": "p40"',
            with_raw(rec("p41", reference="X"), "X", "Infinity"),
            rec("p42"),
        ),
        42,
        2,
    ),
    "indented array with a 1e400 item": (
        "split",
        "data.json",
        json.dumps([rec("p1"), rec("p2", rank={"r1": 1, "r2": 2, "r3": "X"}), rec("p3")], ensure_ascii=False, indent=1)
        .replace('"X"', "1e400")
        .encode(),
        3,
        1,
    ),
    "ratings with NaN and -Infinity": (
        "import:ratings",
        "rated.jsonl",
        lines(
            RATED,
            with_raw(RATED | {"prompt": "问2", "scores": "X", "responses": ["a", "b"]}, "X", "[1, NaN]"),
            RATED | {"prompt": "问3"},
            with_raw(RATED | {"prompt": "问4", "responses": [{"content": "好", "score": "X"}]}, "X", "-Infinity"),
        ),
        4,
        2,
    ),
    "pairwise csv with surplus cells": (
        "import:pairwise",
        "pairs.csv",
        "prompt,chosen,rejected\n问1,好,差\n问2,好,差,多余\n问3,好,差\n".encode(),
        3,
        1,
    ),
    "pairwise with a surrogate": (
        "import",
        "pairs.jsonl",
        lines(PAIR, with_raw(PAIR | {"prompt": "问2", "rejected": "X"}, "X", '"\\udead"'), PAIR | {"prompt": "问3"}),
        3,
        1,
    ),
}


def count_records(path: Path) -> int:
    return sum(1 for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip())


@pytest.mark.parametrize("name", sorted(SKIP_CASES))
def test_skip_invalid_loses_nothing(tmp_path, monkeypatch, capsys, name):
    command, filename, content, records_in, n_bad = SKIP_CASES[name]
    src = tmp_path / filename
    src.write_bytes(content)
    args = command_line(Case(command, filename, content, None, ""), src, tmp_path)
    proc = run_main(*args, "--skip-invalid", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    skipped = [ln for ln in proc.stderr.splitlines() if ln.startswith("skipped ")]
    assert len(skipped) == n_bad and f"{n_bad} line(s) skipped" in proc.stderr, proc.stderr
    assert all(re.match(rf"skipped {re.escape(str(src))}:\d+: ", ln) for ln in skipped), skipped
    written = count_records(tmp_path / "out.jsonl") + (
        count_records(tmp_path / "test.jsonl") if command == "split" else 0
    )
    assert written + n_bad == records_in


# ---------------------------------------------------------------- what is read whole is read right


def test_jsonl_saved_as_json_imports_every_record(tmp_path):
    src = tmp_path / "data.json"
    src.write_bytes(lines(*GOOD_JSONL))
    proc = run_cheems("import", src, "-o", tmp_path / "out.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert count_records(tmp_path / "out.jsonl") == 100


@pytest.mark.parametrize(
    "raw,kept", [("0.7405", "0.7405"), ("1.10", "1.10"), ("42", "42"), ("1e-5", "1e-5"), ("-3.0", "-3.0")]
)
def test_numeric_reference_is_kept_as_written(tmp_path, monkeypatch, capsys, raw, kept):
    src = tmp_path / "math.jsonl"
    src.write_bytes(lines(with_raw(rec("p1", reference="X"), "X", raw)))
    assert read_records(src).records[0].reference == kept
    proc = run_main("resolve", src, "-o", tmp_path / "out.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))["reference"] == kept


def test_line_separators_inside_strings_are_text_and_round_trip(tmp_path):
    text = "第一段\u2028第二段\x85第三段\u2029完"
    src = write_jsonl(tmp_path / "in.jsonl", [rec("p1", input=text), rec("p2")])
    out = tmp_path / "out.jsonl"
    assert run_cheems("resolve", src, "-o", out).returncode == 0
    assert [r.input for r in read_records(out).records] == [text, "1+1等于几？"]  # our own output reads back


def test_files_joined_with_cat_and_crlf_lines_are_read(tmp_path):
    src = tmp_path / "joined.jsonl"
    src.write_bytes(
        b"\xef\xbb\xbf" + dump(rec("p1")).encode() + b"\r\n\xef\xbb\xbf" + dump(rec("p2")).encode() + b"\r\n\r\n"
    )
    assert [(line, row["id"]) for line, row in load_rows(src)] == [(1, "p1"), (2, "p2")]


def test_one_indented_object_in_json_is_one_record(tmp_path):
    src = tmp_path / "one.json"
    src.write_text(json.dumps(rec("p1"), ensure_ascii=False, indent=2) + "\n\n", encoding="utf-8")
    assert [(line, row["id"]) for line, row in load_rows(src)] == [(1, "p1")]


def test_csv_lines_count_multiline_cells_and_blank_lines(tmp_path):
    src = tmp_path / "pairs.csv"
    src.write_text('\nprompt,chosen,rejected\n问1,"多\n行",差\n\n问2,好,差\n', encoding="utf-8")
    assert [(line, row["prompt"]) for line, row in load_rows(src)] == [(3, "问1"), (6, "问2")]


def test_scores_are_plain_floats(tmp_path):
    src = write_jsonl(tmp_path / "s.jsonl", [{"prompt_id": "p", "response_id": "r", "score": 0.25}])
    assert read_scores(src) == {("p", "r"): 0.25}
    assert type(read_scores(src)[("p", "r")]) is float


# ---------------------------------------------------------------- evaluation: hand-computed


def scores_for(pid: str, values: dict[str, float]) -> dict:
    return {(pid, rid): float(s) for rid, s in values.items()}


def test_subset_without_pairs_is_left_out_not_averaged_as_zero():
    # a: p1 r1>r2>r3 all right (3 pairs); p2 r1>r2 wrong (1 pair) -> accuracy 3/4, exact 1/2
    a = [
        record(3, rank={"r1": 1, "r2": 2, "r3": 3}, pid="p1", category="数学"),
        record(2, rank={"r1": 1, "r2": 2}, pid="p2", category="数学"),
    ]
    b = [record(2, rank={"r1": 1, "r2": 1}, pid="q1")]  # one tie: no pair at all
    scores = {
        **scores_for("p1", {"r1": 3, "r2": 2, "r3": 1}),
        **scores_for("p2", {"r1": 0, "r2": 1}),
        **scores_for("q1", {"r1": 0, "r2": 0}),
    }
    report = evaluate_scores({"a": a, "b": b}, scores)
    assert list(report.subsets) == ["a"] and report.without_pairs == ["b"]
    assert report.subsets["a"].accuracy == pytest.approx(3 / 4)
    assert report.subsets["a"].exact_match == pytest.approx(1 / 2)
    assert report.overall == pytest.approx((3 / 4 + 1 / 2) / 2)  # not ((3/4 + 1/2) / 2 + 0) / 2
    assert report.to_dict()["subsets_without_pairs"] == ["b"]


def test_overall_refuses_a_subset_it_cannot_measure():
    with pytest.raises(ValueError):
        overall({})
    with pytest.raises(ValueError):
        overall({"a": GroupMetrics(1.0, 1.0, 1, 1), "b": GroupMetrics(0.0, 0.0, 0, 0)})


def test_unmatched_scores_and_unranked_responses_are_counted():
    rec3 = record(3, rank={"r1": 1, "r2": 2}, pid="p")  # r3 is left out of the rank
    scores = {**scores_for("p", {"r1": 2, "r2": 1, "r3": 0}), ("p", "r9"): 1.0, ("other", "r1"): 1.0}
    report = evaluate_scores({"s": [rec3]}, scores)
    assert sorted(report.unmatched_scores) == [("other", "r1"), ("p", "r9")]
    assert report.unranked_responses == 1
    out = report.to_dict()
    assert (out["unmatched_scores"], out["unranked_responses"], out["overall"]) == (2, 1, 1.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_model_score_that_is_not_finite_is_an_error(bad):
    rec2 = record(2, rank={"r1": 1, "r2": 2}, pid="p")
    with pytest.raises(InputError, match="the score for prompt 'p' response 'r2' is"):
        evaluate_scores({"s": [rec2]}, {("p", "r1"): 1.0, ("p", "r2"): bad}, "model-x")


def test_eval_cli_reports_what_it_leaves_out(tmp_path):
    open_ = write_jsonl(tmp_path / "open.jsonl", [rec("p1"), rec("p2", rank={"r1": 1, "r2": 2})])
    human = write_jsonl(tmp_path / "human.jsonl", [rec("h1", rank={"r1": 1, "r2": 1, "r3": 1})])
    values = {"p1": (3, 2, 1), "p2": (0, 1, 5), "h1": (1, 1, 1)}
    rows = [
        {"prompt_id": p, "response_id": f"r{i + 1}", "score": v} for p, vs in values.items() for i, v in enumerate(vs)
    ]
    scores = write_jsonl(tmp_path / "s.jsonl", [*rows, {"prompt_id": "zz", "response_id": "r1", "score": 0}])
    out = tmp_path / "m.json"
    proc = run_cheems("eval", "--bench", open_, "--bench", human, "--scores", scores, "--output-json", out)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    metrics = json.loads(out.read_text())
    # open: 4 pairs, 3 right -> accuracy 0.75; p1 all right, p2 wrong -> exact 0.5; human has no pair
    assert list(metrics["subsets"]) == ["open"]
    assert metrics["overall"] == pytest.approx((0.75 + 0.5) / 2)
    assert (metrics["subsets_without_pairs"], metrics["unmatched_scores"], metrics["unranked_responses"]) == (
        ["human"],
        1,
        1,
    )
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning ")]
    assert any(f"{human}:" in ln and "left out of overall" in ln for ln in warnings), proc.stderr
    assert any(f"{open_}:2: field 'rank'" in ln and "leaves out 1 of 3 responses (r3)" in ln for ln in warnings), (
        proc.stderr
    )
    assert any(f"{scores}:" in ln and "1 score(s) match no response" in ln and "'zz'" in ln for ln in warnings), (
        proc.stderr
    )


def test_validate_says_where_a_rank_leaves_responses_out(tmp_path):
    src = write_jsonl(
        tmp_path / "bench.jsonl", [rec("p1"), rec("p2", rank={"r2": 1}), rec("p3", rank={"r1": 1, "r3": 2})]
    )
    proc = run_cheems("validate", src)
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning ")]
    assert len(warnings) == 2, proc.stderr
    assert f"{src}:2: field 'rank': prompt 'p2': rank leaves out 2 of 3 responses (r1, r3)" in warnings[0]
    assert f"{src}:3: field 'rank': prompt 'p3': rank leaves out 1 of 3 responses (r2)" in warnings[1]
