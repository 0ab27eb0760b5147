"""``cheems dedup``: the one normalisation of prompt text, near duplicates that must be caught and look-alikes that
must not be merged, nothing lost, the same output for any number of workers, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cheems.data import stream
from cheems.prompts.dedup import dedup_files
from cheems.prompts.minhash import NearSettings
from cheems.prompts.textnorm import normalize
from helpers import assert_user_error, run_cheems, run_main, write_jsonl

BASE = "请详细解释一下量子计算的基本原理，以及它和经典GPU计算相比有哪些优势和局限？"
# each must land in BASE's cluster: (why, text)
NEAR = [
    ("punctuation", "请详细解释一下量子计算的基本原理、以及它和经典GPU计算相比有哪些优势和局限"),
    ("full width", "请详细解释一下量子计算的基本原理，以及它和经典ＧＰＵ计算相比有哪些优势和局限?"),
    ("spacing", "请 详细解释一下 量子计算的基本原理， 以及它和经典 GPU 计算相比\n有哪些优势和局限？"),
    ("one changed character", "请详细解释一下量子计算的基本原理，以及它和古典GPU计算相比有哪些优势和局限？"),
    ("traditional", "請詳細解釋一下量子計算的基本原理，以及它和經典GPU計算相比有哪些優勢和局限？"),
]
# alike, yet other questions: none may be merged with another
APART = [
    "请计算 12 乘以 34 等于多少，并写出详细的竖式计算步骤和每一步的理由。",
    "请计算 12 乘以 35 等于多少，并写出详细的竖式计算步骤和每一步的理由。",
    "请详细解释一下区块链的基本原理，以及它和经典GPU计算相比有哪些优势和局限？",
    "写一首诗",
    "写一首关于春天的诗，要求描写桃花和细雨，表达对故乡的思念。",
]


def rec(rid: str, text: str | list[dict[str, str]]) -> dict:
    return {"id": rid, "input": text, "responses": [{"id": "r1", "content": "回答"}]}


def test_normalize_folds_what_a_reader_does_not_see() -> None:
    assert normalize("ＡＢＣ１２３，你好！") == normalize("abc123你好") == "abc123你好"
    assert normalize("請問這個問題") == normalize("请问这个问题")
    assert normalize("你 好\t世界\u3000！") == "你好世界"
    assert normalize("3+5=8") == "3+5=8"  # signs are kept: they change the question


@settings(max_examples=60, deadline=None)
@given(
    # no digits: punctuation inside a number is kept (test_normalize_keeps_what_changes_the_question)
    st.text(alphabet="量子计算原理优势局限abcXYZ", min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 30), st.sampled_from([" ", "，", "。", "？", "!", "\n", "\u3000", "、"]))),
)
def test_normalize_ignores_inserted_punctuation_and_spaces(text: str, inserts: list[tuple[int, str]]) -> None:
    noisy = text
    for at, mark in inserts:
        noisy = noisy[:at] + mark + noisy[at:]
    assert normalize(noisy) == normalize(text)


def dedup(tmp_path: Path, *files: list[dict], **kw) -> tuple[dict, list[str]]:
    paths = [write_jsonl(tmp_path / f"in{i}.jsonl", rows) for i, rows in enumerate(files)]
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    dedup_files(paths, out, report, NearSettings(**kw), workers=1)
    kept = [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]
    return json.loads(report.read_text(encoding="utf-8")), kept


@pytest.mark.parametrize(("why", "text"), NEAR, ids=[w for w, _ in NEAR])
def test_a_near_duplicate_in_another_file_is_dropped(tmp_path: Path, why: str, text: str) -> None:
    report, kept = dedup(tmp_path, [rec("base", BASE)], [rec("other", "你好"), rec("dup", text)])
    assert kept == ["base", "other"], why
    [cluster] = report["clusters"]
    assert cluster["kept"] == "base"
    assert [d["id"] for d in cluster["dropped"]] == ["dup"]
    assert 0.8 <= cluster["dropped"][0]["similarity"] <= 1


def test_look_alikes_are_kept_apart(tmp_path: Path) -> None:
    report, kept = dedup(tmp_path, [rec(f"p{i}", t) for i, t in enumerate([BASE, *APART])])
    assert kept == [f"p{i}" for i in range(len(APART) + 1)]
    assert report["clusters"] == [] and report["dropped"] == 0


def test_every_cluster_and_count_is_reported(tmp_path: Path) -> None:
    rows = [rec("base", BASE), *(rec(why, text) for why, text in NEAR), *(rec(f"a{i}", t) for i, t in enumerate(APART))]
    chat = [{"role": "user", "content": "写一首诗"}, {"role": "assistant", "content": "好的"}]
    rows += [rec("chat", chat), rec("chat2", [{**m, "content": m["content"] + "。"} for m in chat])]
    report, kept = dedup(tmp_path, rows)
    assert report["records"] == len(rows) == report["kept"] + report["dropped"] == len(kept) + report["dropped"]
    dropped = [d["id"] for c in report["clusters"] for d in c["dropped"]]
    assert sorted(dropped + kept) == sorted(r["id"] for r in rows)
    assert [c["kept"] for c in report["clusters"]] == ["base", "chat"]  # a multi-turn prompt by its full text
    assert report["exact_duplicates"] + report["near_duplicates"] == report["dropped"]
    assert {d["kind"] for d in report["clusters"][0]["dropped"]} == {"exact", "near"}


def test_the_first_of_a_cluster_is_kept(tmp_path: Path) -> None:
    _, kept = dedup(tmp_path, [rec("z-first", NEAR[3][1]), rec("a-second", BASE)])
    assert kept == ["z-first"]


def test_workers_do_not_change_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 300)
    rows = [rec(f"p{i}", t) for i, t in enumerate([BASE, *APART, *(t for _, t in NEAR)] * 3)]
    rows = [{**r, "id": f"{r['id']}-{i}"} for i, r in enumerate(rows)]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    outputs = []
    for workers in (1, 2):
        out, report = tmp_path / f"out{workers}.jsonl", tmp_path / f"report{workers}.json"
        dedup_files([source], out, report, workers=workers)
        outputs.append((out.read_bytes(), report.read_bytes()))
    assert outputs[0] == outputs[1]


def test_cli_dedups_across_files(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [rec("base", BASE), rec("x", APART[0])])
    b = write_jsonl(tmp_path / "b.jsonl", [rec("dup", NEAR[4][1]), rec("y", APART[1])])
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    proc = run_cheems("dedup", a, b, "-o", out, "--report", report, "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert "4 records: kept 3, dropped" in proc.stdout
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == ["base", "x", "y"]
    assert json.loads(report.read_text(encoding="utf-8"))["clusters"][0]["dropped"][0]["id"] == "dup"


@pytest.mark.parametrize(
    ("args", "contains"),
    [
        (["--threshold", "1.5"], "--threshold"),
        (["--threshold", "nan"], "--threshold"),
        (["--shingle", "0"], "--shingle"),
        (["missing.jsonl"], "missing.jsonl"),
        (["-o", "{a}"], "--output"),
        (["--report", "{a}"], "--report"),
        (["{bad}"], "bad.jsonl:2"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, args: list[str], contains: str
) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [rec("base", BASE)])
    bad = write_jsonl(tmp_path / "bad.jsonl", [rec("x", "你好"), "{not json"])
    before = a.read_bytes()
    args = [s.format(a=a, bad=bad) for s in args]
    out = tmp_path / "out.jsonl"
    cmd = ["dedup", a, *args] if "-o" in args else ["dedup", a, "-o", out, *args]
    monkeypatch.chdir(tmp_path)  # "missing.jsonl" is relative
    assert_user_error(run_main(*cmd, monkeypatch=monkeypatch, capsys=capsys), contains)
    assert not out.exists() and a.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "bad.jsonl"]


def test_prompts_without_ids_may_repeat(tmp_path: Path) -> None:
    rows = [{k: v for k, v in rec("", text).items() if k != "id"} for text in [BASE, APART[3], BASE, NEAR[4][1]]]
    report, kept = dedup(tmp_path, rows[:2], rows[2:])
    assert len(kept) == 2 and report["dropped"] == 2 and report["exact_duplicates"] == 2


def test_two_prompts_with_one_id_are_an_error(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [rec("p1", BASE), rec("p1", APART[3])])
    proc = run_cheems("dedup", a, "-o", tmp_path / "out.jsonl")
    assert_user_error(proc, "'p1'")
    assert not (tmp_path / "out.jsonl").exists()


# ------------------------------------------------------------------------------ issue 31


# (one, other): another question each time, which no normalisation may merge
APART_ONCE_NORMALISED = [
    ("计算 1.5+2", "计算 15+2"),  # a decimal point
    ("求 -5 的立方", "求 5 的立方"),  # a sign
    ("求 −5 的立方", "求 5 的立方"),  # the minus sign (U+2212)
    ("计算 (2+3)*4", "计算 2+34"),  # brackets and an operator
    ("1/2 是多少", "12 是多少"),
    ("打 8% 的折扣", "打 8 的折扣"),
    ("print(A)", "Print(a)"),  # case in code
    ("x = Foo.bar", "x = foo.Bar"),
]


@pytest.mark.parametrize(("one", "other"), APART_ONCE_NORMALISED)
def test_normalize_keeps_what_changes_the_question(tmp_path: Path, one: str, other: str) -> None:
    assert normalize(one) != normalize(other)
    report, kept = dedup(tmp_path, [rec("one", one), rec("other", other)])
    assert kept == ["one", "other"] and report["dropped"] == 0


def test_normalize_still_folds_width_case_and_punctuation_around_numbers() -> None:
    assert normalize("计算１．５＋２。") == normalize("计算 1.5+2") == "计算1.5+2"  # full width, the full stop
    assert normalize("第1题：答案是5。") == "第1题答案是5"  # punctuation next to a number, not inside one
    assert normalize("Hello, World!") == normalize("hello world")  # prose: case folded
    assert normalize("求 - 5") == normalize("求-5")  # white space inside a formula is no sign


SYSTEM = "你是一位严谨的数学老师，只给出最终答案。"


def chat(*turns: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]


def test_the_system_prompt_and_earlier_turns_are_part_of_the_prompt(tmp_path: Path) -> None:
    rows = [
        {**rec("plain", BASE)},
        {**rec("teacher", BASE), "sys_prompt": SYSTEM},
        {**rec("poet", BASE), "sys_prompt": "你是一位诗人。"},
        {**rec("teacher-again", BASE + "!"), "sys_prompt": SYSTEM + " "},  # the same prompt: dropped
        {**rec("teacher-near", NEAR[3][1]), "sys_prompt": SYSTEM},  # a near duplicate under the same system prompt
        rec("history-a", chat("你好", "你好！有什么可以帮你？", BASE)),
        rec("history-b", chat("在吗", "在的，请讲。", BASE)),
        rec("one-turn", "你好你好！有什么可以帮你？" + BASE),  # the same text, but one turn
        {**rec("system-turn", [{"role": "system", "content": SYSTEM}, {"role": "user", "content": BASE}])},
    ]
    report, kept = dedup(tmp_path, rows)
    assert kept == ["plain", "teacher", "poet", "history-a", "history-b", "one-turn"]
    dropped = {d["id"]: (c["kept"], d["kind"]) for c in report["clusters"] for d in c["dropped"]}
    assert dropped == {
        "teacher-again": ("teacher", "exact"),
        "teacher-near": ("teacher", "near"),
        "system-turn": ("teacher", "exact"),  # a system turn is a sys_prompt, as every model sees it
    }


def test_templated_prompts_with_other_numbers_never_become_candidates() -> None:
    """The numbers rule cuts candidates in the LSH buckets: a template filled with many numbers costs no similarity
    computations (it made dedup quadratic: 32,000 such prompts took 130 s)."""
    from cheems.data.schema import Record
    from cheems.prompts.minhash import NearIndex, prompt_key

    def key(i: int, j: int) -> object:
        text = f"请计算 {i} 乘以 {j} 等于多少，并写出详细的竖式计算步骤和每一步的理由。"
        return prompt_key(3, Record.model_validate(rec(f"t{i}-{j}", text)))

    index = NearIndex(0.8)
    for i in range(200):
        index.add(key(i, 7))
    assert index.candidates(key(500, 7)) == set()
    assert index.candidates(key(5, 7)) == {5}  # the same numbers: a candidate (an exact duplicate)


def test_progress_is_shown_off_a_terminal_as_plain_lines() -> None:
    import io

    from rich.console import Console

    from cheems.runtime import ProgressBar

    log = io.StringIO()
    bar = ProgressBar(4, "dedup", terminal_only=True, log_every_s=0.0, console=Console(file=log))
    bar.advance(1, stats="2.0 MB/s")
    bar.advance(1)
    bar.close()
    lines = log.getvalue().splitlines()
    assert lines[-1].startswith("dedup: 2/4 (50%), ") and lines[-1].endswith(" s, 2.0 MB/s")
    quiet = io.StringIO()
    ProgressBar(4, "x", terminal_only=True, console=Console(file=quiet)).advance(2)  # no log_every_s: nothing
    assert quiet.getvalue() == ""


def test_a_prompt_pool_is_a_valid_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Records without responses, or with the ``"responses": []`` that ``categorize apply`` writes."""

    def cheems(*args: object):
        return run_main(*args, monkeypatch=monkeypatch, capsys=capsys)

    rows = [
        {"id": "a", "input": BASE, "category": ["知识", "科学"]},
        {"id": "b", "input": NEAR[0][1], "responses": []},
        {"id": "c", "input": APART[0]},
    ]
    src = write_jsonl(tmp_path / "pool.jsonl", rows)
    out = tmp_path / "out.jsonl"
    proc = cheems("dedup", src, "-o", out)
    assert proc.returncode == 0, proc.stderr
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in written] == ["a", "c"] and written[0]["category"] == ["知识", "科学"]
    proc = cheems("validate", src)
    assert proc.returncode == 0, proc.stderr
    assert "3" in proc.stdout
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "a", "input": BASE, "category": 5}])
    assert_user_error(cheems("dedup", bad, "-o", out), "bad.jsonl:1")


def _waiting_for_lock(inode: int) -> bool:
    """Whether some process waits for an flock on the file or folder ``inode`` (Linux lists waiters with ``->``)."""
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and f":{inode} " in line for line in lines)


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads the lock table in /proc/locks (Linux)")
def test_a_run_commits_its_records_and_report_while_no_other_run_commits_the_same_files(tmp_path: Path) -> None:
    """Two runs with one -o and one --report: each moves its two files onto their names under a lock on their
    folder, so the pair is always one run's (before, one run's records could end up beside the other's counts)."""
    import contextlib
    import fcntl
    import os
    import subprocess
    import sys

    folder = tmp_path / "shared"
    folder.mkdir()
    out, report = folder / "out.jsonl", folder / "report.json"
    src = write_jsonl(tmp_path / "a.jsonl", [rec("a", BASE), rec("b", BASE), rec("c", APART[0])])
    other = os.open(folder, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_EX)  # another run is moving its files onto these names
    try:
        cmd = [sys.executable, "-m", "cheems", "dedup", str(src), "-o", str(out), "--report", str(report)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(6000):  # at most 5 minutes: the run reaches its commit in a second or two
            if _waiting_for_lock(os.stat(folder).st_ino):
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
            assert proc.returncode is None, "the run committed its files without waiting for the other run"
        else:
            proc.kill()
            raise AssertionError("the run never reached its commit")
        assert not out.exists() and not report.exists()  # written aside, not yet under their names
    finally:
        os.close(other)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    counts = json.loads(report.read_text(encoding="utf-8"))
    assert counts["kept"] == len(out.read_text(encoding="utf-8").splitlines()) == 2
