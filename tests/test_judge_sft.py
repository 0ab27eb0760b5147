"""``cheems export judge-sft``: judge SFT rows from ranked records (issue 34, item 1)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from cheems.data import stream
from cheems.data.importers import import_file
from cheems.data.io import write_records
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.judge.prompt import EVAL_TEMPLATE, JUDGE_TEMPLATE, CriteriaMap, build_messages
from cheems.judge.verdict import parse_verdict
from cheems.prompts.judge_sft import JudgeSftSettings, export_judge_sft
from helpers import assert_user_error, run_main, write_jsonl


def ranked(pid: str, text: str, rank: dict[str, int], category: str = "写作", **more: object) -> dict:
    """A ranked record whose response ids are the rank's keys (each answer's text names its id)."""
    responses = [{"id": rid, "content": f"{text}的回答{rid}"} for rid in rank]
    return {"id": pid, "input": text, "category": [category], "responses": responses, "rank": rank, **more}


RECORDS = [
    ranked("poem", "写一首关于春天的诗", {"r1": 1, "r2": 2, "r3": 2}),
    ranked("sum", "一加一等于几？请说明理由", {"a": 2, "b": 1}, category="数学", reference="2"),
    ranked("code", "用Python写一个快速排序函数", {"x": 1, "y": 2, "z": 3, "w": 1}, category="代码"),
]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def export(tmp_path: Path, records: list[dict], name: str = "out.jsonl", **kw) -> tuple[list[dict], object]:
    source = write_jsonl(tmp_path / "ranked.jsonl", records)
    result = export_judge_sft([source], tmp_path / name, **kw)
    return rows(tmp_path / name), result


def test_every_pair_in_both_orders_balanced_and_parsed_back(tmp_path: Path) -> None:
    out, result = export(tmp_path, RECORDS)
    labels = Counter(r["label"] for r in out)
    assert labels["A"] == labels["B"] == 2 + 1 + 5 and "C" not in labels  # poem 2, sum 1, code 5 ranked pairs
    shown = {(r["prompt_id"], r["response_a"], r["response_b"]): r["label"] for r in out}
    for (pid, a, b), label in shown.items():
        assert shown[(pid, b, a)] == {"A": "B", "B": "A"}[label]  # the same pair, the other order, the other verdict
    for r in out:
        verdict = parse_verdict(r["messages"][-1]["content"])
        assert verdict.label == r["label"], r
        assert r["source"] == str(tmp_path / "ranked.jsonl")
    assert shown[("sum", "b", "a")] == "A"  # b is ranked first
    assert result.rows == len(out) and result.records == 3


def test_the_prompt_is_the_one_cheems_judge_sends(tmp_path: Path) -> None:
    out, _ = export(tmp_path, RECORDS)
    record = Record.model_validate(RECORDS[1])
    byid = {r.id: r for r in record.responses}
    row = next(r for r in out if (r["prompt_id"], r["response_a"]) == ("sum", "a"))
    assert row["messages"][:-1] == build_messages(record, byid["a"], byid["b"], CriteriaMap(), JUDGE_TEMPLATE)
    assert "参考答案" in row["messages"][1]["content"] and row["messages"][0]["role"] == "system"


def test_ties_give_c_in_both_orders_only_when_asked(tmp_path: Path) -> None:
    out, result = export(tmp_path, RECORDS, settings=JudgeSftSettings(ties=True))
    ties = sorted((r["prompt_id"], r["response_a"], r["response_b"]) for r in out if r["label"] == "C")
    assert ties == [("code", "w", "x"), ("code", "x", "w"), ("poem", "r2", "r3"), ("poem", "r3", "r2")]
    assert all(parse_verdict(r["messages"][-1]["content"]).label == "C" for r in out if r["label"] == "C")
    assert result.labels == {"A": 8, "B": 8, "C": 4}


@pytest.mark.parametrize(
    ("rank", "why"),
    [({"r1": 1, "r2": 1}, "its ranked responses are all tied"), ({"r1": 1}, "it has one response")],
)
def test_a_record_with_no_pair_is_refused_at_its_line(tmp_path: Path, rank: dict[str, int], why: str) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old\n", encoding="utf-8")
    source = write_jsonl(tmp_path / "ranked.jsonl", [RECORDS[0], ranked("bad", "你好", rank)])
    with pytest.raises(InputError) as e:
        export_judge_sft([source], out)
    assert f"{source}:2" in str(e.value) and why in str(e.value) and "bad" in str(e.value)
    assert out.read_text(encoding="utf-8") == "old\n"  # nothing overwritten


def test_all_tied_gives_c_rows_with_ties(tmp_path: Path) -> None:
    out, _ = export(tmp_path, [ranked("t", "你好", {"r1": 1, "r2": 1})], settings=JudgeSftSettings(ties=True))
    assert [r["label"] for r in out] == ["C", "C"]


def test_workers_do_not_change_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 300)
    records = [ranked(f"{r['id']}-{i}", f"{r['input']}（第{i}题）", r["rank"]) for i in range(6) for r in RECORDS]
    source = write_jsonl(tmp_path / "ranked.jsonl", records)
    bench = write_jsonl(tmp_path / "bench.jsonl", [ranked("b", "写一首关于春天的诗（第3题）", {"q": 1, "s": 2})])
    for workers in (1, 2):
        export_judge_sft([source], tmp_path / f"out{workers}.jsonl", bench=[bench], workers=workers)
    assert (tmp_path / "out1.jsonl").read_bytes() == (tmp_path / "out2.jsonl").read_bytes()


def test_bench_overlaps_are_dropped_and_listed(tmp_path: Path, monkeypatch, capsys) -> None:
    source = write_jsonl(tmp_path / "ranked.jsonl", RECORDS)
    bench = write_jsonl(tmp_path / "bench.jsonl", [ranked("b1", "写一首关于春天的诗", {"q": 1, "s": 2})])
    out = tmp_path / "out.jsonl"
    proc = run_main("export", "judge-sft", source, "-o", out, "--bench", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert "dropped 1 prompts (4 rows) that overlap --bench: poem" in proc.stderr
    assert "2 records" not in proc.stdout and "3 records: 12 rows (6 A, 6 B)" in proc.stdout
    assert {r["prompt_id"] for r in rows(out)} == {"sum", "code"}


def critique(pid: str, a: str, b: str, text: str) -> dict:
    return {"prompt_id": pid, "response_a": a, "response_b": b, "critique": text}


def test_critiques_kept_only_where_they_agree(tmp_path: Path, monkeypatch, capsys) -> None:
    source = write_jsonl(tmp_path / "ranked.jsonl", RECORDS[1:2])  # b beats a
    teacher = write_jsonl(
        tmp_path / "critiques.jsonl",
        [
            critique("sum", "b", "a", "回答A给出了正确答案2，回答B错了。最终判断：[[A]]"),
            critique("sum", "a", "b", "回答A更简洁，更好。[[A]]"),  # disagrees with the ranking
        ],
    )
    out = tmp_path / "out.jsonl"
    args = ("export", "judge-sft", source, "-o", out, "--critiques", teacher)
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert "critiques: 1 of 2 kept, 1 disagree" in proc.stdout
    got = {(r["response_a"], r["response_b"]): r["messages"][-1]["content"] for r in rows(out)}
    assert got[("b", "a")].startswith("回答A给出了正确答案2") and got[("b", "a")].endswith("[[A]]")
    assert got[("a", "b")] == "[[B]]"
    assert all(parse_verdict(c).label == {"b": "A", "a": "B"}[k[0]] for k, c in got.items())


def test_a_critique_that_names_unknown_ids_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    source = write_jsonl(tmp_path / "ranked.jsonl", RECORDS[1:2])
    teacher = write_jsonl(
        tmp_path / "critiques.jsonl", [critique("sum", "b", "a", "[[A]]"), critique("sum", "b", "zz", "[[A]]")]
    )
    out = tmp_path / "out.jsonl"
    proc = run_main(
        "export", "judge-sft", source, "-o", out, "--critiques", teacher, monkeypatch=monkeypatch, capsys=capsys
    )
    assert_user_error(proc, f"{teacher}:2", "no ranked record gives")
    assert not out.exists()


def test_the_output_may_not_replace_an_input(tmp_path: Path, monkeypatch, capsys) -> None:
    source = write_jsonl(tmp_path / "ranked.jsonl", RECORDS)
    before = source.read_bytes()
    proc = run_main("export", "judge-sft", source, "-o", source, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "--output")
    assert source.read_bytes() == before


def test_cli_error_for_a_record_without_pair(tmp_path: Path, monkeypatch, capsys) -> None:
    source = write_jsonl(tmp_path / "ranked.jsonl", [ranked("one", "你好", {"r1": 1})])
    proc = run_main("export", "judge-sft", source, "-o", tmp_path / "o.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{source}:1", "no pair to judge")


def test_real_preferences_balanced(tmp_path: Path, shared_data) -> None:
    """The 289 prompts of a public Chinese DPO set (imported: one comparison each, or several for a repeated
    prompt): a row per order of each pair, A and B as many, every verdict parsed back."""
    records = import_file(shared_data("dpo_zh_demo") / "dpo_zh_demo.json", "pairwise").records
    write_records(tmp_path / "ranked.jsonl", records)
    out = tmp_path / "out.jsonl"
    result = export_judge_sft([tmp_path / "ranked.jsonl"], out, workers=1)
    written = rows(out)
    assert result.records == 289 and result.labels["A"] == result.labels["B"] == len(written) // 2 >= 289
    assert all(parse_verdict(r["messages"][-1]["content"]).label == r["label"] for r in written)


def test_the_docs_examples_are_what_the_export_writes_and_reads(tmp_path: Path) -> None:
    """docs/formats.md, *Judge SFT rows*: the row example has the keys and verdict a real row has, and the critique
    example is a critique the export takes (and keeps: it agrees with the ranking)."""
    text = (Path(__file__).parents[1] / "docs" / "formats.md").read_text(encoding="utf-8")
    section = text.partition("## Judge SFT rows")[2].partition("\n## ")[0]
    row_example, critique_example = (json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.S))
    teacher = write_jsonl(tmp_path / "critiques.jsonl", [critique_example])
    out, result = export(tmp_path, RECORDS[1:2], critiques=teacher)
    row = next(r for r in out if (r["response_a"], r["response_b"]) == ("b", "a"))
    assert set(row) == set(row_example) | {"critique"} and result.critiques_kept == 1
    assert {k: row[k] for k in ("prompt_id", "response_a", "response_b", "label")} == {
        k: row_example[k] for k in ("prompt_id", "response_a", "response_b", "label")
    }
    assert [m["role"] for m in row["messages"]] == [m["role"] for m in row_example["messages"]]
    assert row["messages"][-1]["content"] == critique_example["critique"]


@pytest.mark.parametrize(
    ("row", "what"),
    [
        ({"prompt_id": "sum", "response_a": "b", "response_b": "a"}, "field 'critique': is missing"),
        ([1, 2], "must be a JSON object"),
        ({"prompt_id": "sum", "response_a": "b", "response_b": "a", "critique": "[[A]]"}, "a second critique"),
    ],
)
def test_a_bad_critique_row_is_refused_at_its_line(tmp_path: Path, row: object, what: str) -> None:
    first = {"prompt_id": "sum", "response_a": "b", "response_b": "a", "critique": "[[A]]"}
    teacher = write_jsonl(tmp_path / "critiques.jsonl", [first, row])
    source = write_jsonl(tmp_path / "ranked.jsonl", RECORDS[1:2])
    with pytest.raises(InputError) as e:
        export_judge_sft([source], tmp_path / "out.jsonl", critiques=teacher)
    assert f"{teacher}:2" in str(e.value) and what in str(e.value)
    assert not (tmp_path / "out.jsonl").exists()


def test_eval_prompt_is_the_one_cheems_eval_sends(tmp_path: Path, monkeypatch, capsys) -> None:
    out, _ = export(tmp_path, RECORDS[1:2], settings=JudgeSftSettings(eval_prompt=True))
    record = Record.model_validate(RECORDS[1])
    byid = {r.id: r for r in record.responses}
    row = next(r for r in out if r["response_a"] == "a")
    assert row["messages"][:-1] == build_messages(record, byid["a"], byid["b"], CriteriaMap(), EVAL_TEMPLATE)
    source = tmp_path / "ranked.jsonl"
    proc = run_main(
        "export", "judge-sft", source, "-o", tmp_path / "o.jsonl", "--eval-prompt", "--ties",
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert_user_error(proc, "--ties", "A or B only")
    assert not (tmp_path / "o.jsonl").exists()
