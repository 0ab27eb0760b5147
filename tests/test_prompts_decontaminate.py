"""``cheems decontaminate``: training prompts that overlap a bench prompt (exactly, by a long shared n-gram, as a
near duplicate) are dropped and named with the bench record; look-alikes stay; one-line errors; any workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cheems.data import stream
from cheems.prompts.decontaminate import DecontaminateSettings, decontaminate_files
from helpers import assert_user_error, run_cheems, run_main, write_jsonl

BENCH = {
    "poem": "写一首关于秋天的七言绝句，要求押韵，并描写落叶与思乡之情。",
    "hi": "你好",
    "math": "请计算 12 乘以 34 等于多少，并写出详细的竖式计算步骤和每一步的理由。",
}
# (training id, prompt, the bench id it overlaps, the kind)
OVERLAP = [
    ("exact", "写一首关于秋天的七言绝句,要求押韵 并描写落叶与思乡之情!", "poem", "exact"),
    ("traditional", "寫一首關於秋天的七言絕句，要求押韻，並描寫落葉與思鄉之情。", "poem", "exact"),
    (
        "embedded",
        "请先阅读下面的要求：写一首关于秋天的七言绝句，要求押韵，并描写落叶与思乡之情。再逐句解释。",
        "poem",
        "ngram",
    ),
    ("changed", "请计算 12 乘以 34 等于多少，再写出详细的竖式计算步骤和每一步的理由。", "math", "near"),
    ("short-exact", "你好！", "hi", "exact"),
]
# alike, yet not the bench's questions
CLEAN = [
    ("other-numbers", "请计算 12 乘以 35 等于多少，并写出详细的竖式计算步骤和每一步的理由。"),
    *(
        (f"long-{i}", f"你好，请帮我写一封{job}的求职信，突出我的项目经验。")
        for i, job in enumerate(["教师", "护士", "律师"])
    ),
    ("other-poem", "写一首关于春天的五言绝句，描写桃花与细雨。"),
]


def rec(rid: str, text: str) -> dict:
    return {"id": rid, "input": text, "responses": [{"id": "r1", "content": "回答"}]}


def run(tmp_path: Path, rows: list[dict], workers: int = 1, **kw) -> tuple[dict, list[str]]:
    bench = write_jsonl(tmp_path / "bench.jsonl", [rec(k, v) for k, v in BENCH.items()])
    source = write_jsonl(tmp_path / "train.jsonl", rows)
    out, report = tmp_path / f"out{workers}.jsonl", tmp_path / f"report{workers}.json"
    decontaminate_files(source, [bench], out, report, workers=workers)
    kept = [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]
    return json.loads(report.read_text(encoding="utf-8")), kept


def test_each_overlap_is_dropped_and_named(tmp_path: Path) -> None:
    rows = [rec(rid, text) for rid, text, _, _ in OVERLAP] + [rec(rid, text) for rid, text in CLEAN]
    report, kept = run(tmp_path, rows)
    assert kept == [rid for rid, _ in CLEAN]
    found = {d["id"]: (d["bench_id"], d["overlap"]) for d in report["dropped_records"]}
    assert found == {rid: (bench, kind) for rid, _, bench, kind in OVERLAP}
    assert report["records"] == len(rows) == report["kept"] + report["dropped"]
    assert report["by_overlap"] == {"exact": 3, "ngram": 1, "near": 1, "response": 0}
    embedded = next(d for d in report["dropped_records"] if d["id"] == "embedded")
    assert (
        len(embedded["shared"]) == 20 and embedded["shared"] in "写一首关于秋天的七言绝句要求押韵并描写落叶与思乡之情"
    )


ANSWER = "秋风萧瑟叶纷飞，游子登高望故乡。雁字回时书未至，一庭落叶满斜阳。"


def test_responses_that_copy_a_bench_response_are_dropped_with_responses(tmp_path: Path) -> None:
    bench = write_jsonl(
        tmp_path / "bench.jsonl",
        [{"id": "poem", "input": BENCH["poem"], "responses": [{"id": "gold", "content": ANSWER}]}],
    )
    rows = [
        # other prompts; the first answer is the bench's with other punctuation, the second quotes it at length
        {"id": "copy", "input": "写一首诗", "responses": [{"id": "a", "content": ANSWER.replace("，", ", ")}]},
        {"id": "quote", "input": "随便写点", "responses": [{"id": "a", "content": "开头。" + ANSWER[:24] + "。结尾"}]},
        # a short stock phrase in common is no copy
        {"id": "own", "input": "写一首诗", "responses": [{"id": "a", "content": "秋风萧瑟。" + "春" * 30}]},
    ]
    source = write_jsonl(tmp_path / "train.jsonl", rows)
    for responses, expected in ((False, ["copy", "quote", "own"]), (True, ["own"])):
        out, report = tmp_path / f"out-{responses}.jsonl", tmp_path / f"report-{responses}.json"
        settings_ = DecontaminateSettings(responses=responses)
        decontaminate_files(source, [bench], out, report, settings_)
        assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == expected
    dropped = json.loads(report.read_text(encoding="utf-8"))["dropped_records"]
    assert dropped[0] == {
        "id": "copy",
        "bench_id": "poem",
        "overlap": "response",
        "response_id": "a",
        "bench_response_id": "gold",
    }
    assert dropped[1]["overlap"] == "response" and len(dropped[1]["shared"]) == 20


@settings(max_examples=25, deadline=None)
@given(
    st.text(alphabet="的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年", max_size=40),
    st.text(alphabet="的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年", max_size=40),
)
def test_a_bench_prompt_inside_any_text_is_caught(
    tmp_path_factory: pytest.TempPathFactory, before: str, after: str
) -> None:
    tmp_path = tmp_path_factory.mktemp("embed")
    report, kept = run(tmp_path, [rec("t", before + BENCH["poem"] + after)])
    assert kept == [] and report["dropped_records"][0]["bench_id"] == "poem"


def test_workers_do_not_change_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 300)
    rows = [rec(f"{rid}-{i}", text) for i in range(3) for rid, text in [*((r, t) for r, t, _, _ in OVERLAP), *CLEAN]]
    run(tmp_path, rows, workers=1)
    run(tmp_path, rows, workers=2)
    for name in ("out{}.jsonl", "report{}.json"):
        assert (tmp_path / name.format(1)).read_bytes() == (tmp_path / name.format(2)).read_bytes()


def test_cli_decontaminates_against_two_bench_files(tmp_path: Path) -> None:
    b1 = write_jsonl(tmp_path / "b1.jsonl", [rec("poem", BENCH["poem"])])
    b2 = write_jsonl(tmp_path / "b2.jsonl", [rec("hi", BENCH["hi"])])
    source = write_jsonl(tmp_path / "train.jsonl", [rec("a", "你好"), rec("b", OVERLAP[2][1]), rec("c", CLEAN[1][1])])
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    proc = run_cheems("decontaminate", source, "--bench", b1, "--bench", b2, "-o", out, "--report", report)
    assert proc.returncode == 0, proc.stderr
    assert "3 records: kept 1, dropped 2 overlapping 2 bench prompts (1 exact, 1 ngram, 0 near)" in proc.stdout
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == ["c"]
    assert json.loads(report.read_text(encoding="utf-8"))["bench_files"] == [str(b1), str(b2)]


@pytest.mark.parametrize(
    ("args", "contains"),
    [
        (["--bench", "{bench}", "--ngram", "2"], "--ngram"),
        (["--bench", "{bench}", "--threshold", "inf"], "--threshold"),
        (["--bench", "missing.jsonl"], "missing.jsonl"),
        (["--bench", "{bad}"], "bad.jsonl:2"),
        (["--bench", "{bench}", "--report", "{bench}"], "--report"),
        (["--bench", "{train}"], "training file itself"),
        ([], "--bench"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, args: list[str], contains: str
) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", [rec("a", "你好")])
    bench = write_jsonl(tmp_path / "bench.jsonl", [rec("hi", "你好")])
    bad = write_jsonl(tmp_path / "bad.jsonl", [rec("x", "你好"), "{not json"])
    files = {p: p.read_bytes() for p in (train, bench, bad)}
    args = [s.format(bench=bench, bad=bad, train=train) for s in args]
    monkeypatch.chdir(tmp_path)  # "missing.jsonl" is relative
    proc = run_main("decontaminate", train, "-o", tmp_path / "out.jsonl", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, contains)
    assert {p: p.read_bytes() for p in files} == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "bench.jsonl", "train.jsonl"]


def test_lines_skipped_are_skipped_in_both_passes(tmp_path: Path) -> None:
    bench = write_jsonl(tmp_path / "bench.jsonl", [rec("hi", "你好")])
    rows = [rec("a", "你好"), "{not json", rec("b", CLEAN[0][1]), rec("b", "重复的编号"), rec("c", CLEAN[4][1])]
    source = write_jsonl(tmp_path / "train.jsonl", rows)
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    result = decontaminate_files(source, [bench], out, report, skip_invalid=True, workers=1)
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == ["b", "c"]
    assert len(result.issues.skipped) == 2 and result.records == 3 and [d["id"] for d in result.dropped] == ["a"]


def test_train_refuses_data_that_overlaps_its_eval_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    bench = write_jsonl(tmp_path / "bench.jsonl", [rec(k, v) for k, v in BENCH.items()])
    rows = [{**rec(rid, text), "rank": {"r1": 1}} for rid, text, _, _ in OVERLAP[3:4]]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    args = ("train", "--data", train, "--eval-bench", bench, "--output", tmp_path / "rm", "--cpu")
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "--eval-bench", "1 training prompts overlap", "'changed' ~ bench prompt 'math', near")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.jsonl", "train.jsonl"]


# ------------------------------------------------------------------------------ issue 31


@pytest.mark.parametrize("order", [1, -1], ids=["later", "earlier"])
def test_a_training_prompt_holding_any_bench_prompt_whole_is_dropped(tmp_path: Path, order: int) -> None:
    """Every bench prompt that holds a 20-character run is checked, not only the first one read: the first may carry
    numbers the training prompt lacks (and so not overlap) while a later one is quoted whole."""
    rows = [rec("with-numbers", "计算 3+5，然后" + BENCH["poem"]), rec("poem", BENCH["poem"])][::order]
    bench = write_jsonl(tmp_path / "bench.jsonl", rows)
    training = [
        rec("quotes-poem", "请先认真阅读下面这段要求，然后照做并解释理由：" + BENCH["poem"] + "再逐句翻译成英文。")
    ]
    source = write_jsonl(tmp_path / "train.jsonl", training)
    result = decontaminate_files(source, [bench], tmp_path / "out.jsonl", workers=1)
    assert [(d["id"], d["bench_id"], d["overlap"]) for d in result.dropped] == [("quotes-poem", "poem", "ngram")]
    from cheems.data.schema import Record
    from cheems.prompts.decontaminate import bench_overlaps

    # train --eval-bench and the eval's contamination check ask the same index
    found = bench_overlaps([Record.model_validate(training[0])], [bench])
    assert [(f["id"], f["bench_id"]) for f in found] == [("quotes-poem", "poem")]


def test_one_question_under_another_system_prompt_is_another_prompt(tmp_path: Path) -> None:
    bench = write_jsonl(tmp_path / "bench.jsonl", [{**rec("hi", "你好"), "sys_prompt": "你是客服。"}])
    rows = [
        {**rec("same", "你好！"), "sys_prompt": "你是客服。"},
        {**rec("other-system", "你好"), "sys_prompt": "你是一位诗人。"},
        rec("no-system", "你好"),
    ]
    source = write_jsonl(tmp_path / "train.jsonl", rows)
    result = decontaminate_files(source, [bench], tmp_path / "out.jsonl", workers=1)
    assert [(d["id"], d["overlap"]) for d in result.dropped] == [("same", "exact")]


def test_responses_that_say_nothing_or_are_short_copy_nothing(tmp_path: Path) -> None:
    answers = ["？？？", "……", "A", "好的。", ANSWER]
    bench_rows = [
        {"id": "poem", "input": BENCH["poem"], "responses": [{"id": f"g{i}", "content": a}]}
        for i, a in enumerate(answers)
    ]
    bench_rows = [{**row, "id": f"b{i}", "input": f"{BENCH['poem']}（第{i}题）"} for i, row in enumerate(bench_rows)]
    bench = write_jsonl(tmp_path / "bench.jsonl", bench_rows)
    rows = [
        {"id": f"t{i}", "input": f"随便问问{i}", "responses": [{"id": "a", "content": a}]}
        for i, a in enumerate(answers)
    ]
    source = write_jsonl(tmp_path / "train.jsonl", rows)
    result = decontaminate_files(
        source, [bench], tmp_path / "out.jsonl", settings=DecontaminateSettings(responses=True)
    )
    assert [(d["id"], d["overlap"]) for d in result.dropped] == [("t4", "response")]  # the poem only


def test_a_prompt_pool_is_decontaminated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Prompts without responses (a pool before generation, what categorize apply writes) on either side."""
    bench = write_jsonl(tmp_path / "bench.jsonl", [{"id": k, "input": v} for k, v in BENCH.items()])
    rows = [{"id": "a", "input": OVERLAP[0][1]}, {"id": "b", "input": CLEAN[0][1], "responses": []}]
    source = write_jsonl(tmp_path / "pool.jsonl", rows)
    out = tmp_path / "out.jsonl"
    proc = run_main("decontaminate", source, "--bench", bench, "-o", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == ["b"]
