"""Importers of other benchmarks' public layouts (cheems.data.bench_importers): rows of RM-Bench, RMB, RewardBench 2,
JudgeBench, RewardBench (v1) and PPE; a bad row named at file:line and field; rows of one text kept, as upstream
scores them.

The RM-Bench, RMB, RewardBench 2 and JudgeBench fixtures are small files under tests/data written by hand in each
benchmark's public layout, the RewardBench and PPE rows are built in tests/helpers.py; ``test_fixture_lengths``
pins the lengths tests/test_metrics_*.py work their numbers out from.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cheems.data.importers import FORMATS, import_file
from cheems.errors import InputError
from helpers import (
    JUDGEBENCH,
    PPE_CORRECTNESS,
    PPE_PREFERENCE,
    RB2,
    REWARDBENCH,
    RMB,
    RMBENCH,
    records_by_id,
    run_main,
    write_jsonl,
)


def lengths(record, ids=None) -> list[int]:
    return [len(r.content) for r in record.responses if ids is None or r.id in ids]


# ---------------------------------------------------------------- RM-Bench, RMB, RewardBench 2, JudgeBench


def test_fixture_lengths():
    """The lengths the hand computations of tests/test_metrics_*.py start from."""
    rm = records_by_id(RMBENCH, "rmbench")
    assert [lengths(rm[k]) for k in ("chat-8", "chat-9", "safety-refuse-8")] == [
        [4, 10, 16, 3, 9, 15],
        [5, 11, 17, 5, 12, 18],
        [6, 12, 20, 2, 13, 19],
    ]
    rmb = records_by_id(RMB, "rmb")
    assert {k: lengths(r) for k, r in rmb.items()} == {
        "bon-101": [25, 10, 30, 5],
        "bon-102": [40, 39, 1],
        "pair-201": [30, 8],
        "pair-101": [20, 10],
        "pair-102": [10, 10],
    }
    rb2 = records_by_id(RB2, "rewardbench2")
    assert {k: lengths(r) for k, r in rb2.items()} == {
        "1": [30, 10, 20, 29],
        "2": [20, 20, 5, 1],
        "3": [15, 3, 4, 5],
        "tied:4": [12, 14, 11, 2],
    }
    jb = records_by_id(JUDGEBENCH, "judgebench")
    assert {k: lengths(r) for k, r in jb.items()} == {"u1": [20, 10], "u2": [15, 7], "u3": [5, 9], "u4": [12, 11]}


def test_rmbench_import_a_folder_of_domain_files():
    rm = records_by_id(RMBENCH, "rmbench")
    assert list(rm) == ["chat-8", "chat-9", "safety-refuse-8"]  # the same upstream id in two domains stays apart
    record = rm["safety-refuse-8"]
    assert record.input == "How do I pick a lock?" and record.category == ["safety", "safety-refuse"]
    assert rm["chat-8"].category == ["chat"]
    assert [(r.id, r.style) for r in record.responses] == [
        ("chosen-concise", "concise"),
        ("chosen-detailed_plain", "detailed_plain"),
        ("chosen-detailed_markdown", "detailed_markdown"),
        ("rejected-concise", "concise"),
        ("rejected-detailed_plain", "detailed_plain"),
        ("rejected-detailed_markdown", "detailed_markdown"),
    ]
    assert record.rank == {r.id: 1 if r.id.startswith("chosen") else 2 for r in record.responses}
    assert len(record.ranked_pairs()) == 9


def test_rmbench_folder_holding_total_dataset_reads_it_alone(tmp_path):
    """Upstream's data/ holds total_dataset.json beside the per-domain files it joins: every prompt twice."""
    rows = []
    for name in ("chat_filtered.json", "safety-refuse_filtered.json"):
        (tmp_path / name).write_bytes((RMBENCH / name).read_bytes())
        domain = name.removesuffix("_filtered.json")
        rows += [row | {"domain": domain} for row in json.loads((RMBENCH / name).read_text(encoding="utf-8"))]
    (tmp_path / "total_dataset.json").write_text(json.dumps(rows), encoding="utf-8")
    assert [r.id for r in import_file(tmp_path, "rmbench").records] == ["chat-8", "chat-9", "safety-refuse-8"]


def test_rmbench_total_dataset_row_names_its_domain(tmp_path):
    path = tmp_path / "total_dataset.json"
    row = json.loads((RMBENCH / "chat_filtered.json").read_text(encoding="utf-8"))[0] | {"domain": "math"}
    path.write_text(json.dumps([row]), encoding="utf-8")
    (record,) = import_file(path, "rmbench").records
    assert record.id == "math-8" and record.category == ["math"]


def test_rmbench_file_named_after_no_domain_is_refused(tmp_path):
    """A file's name is a domain only when it is one of RM-Bench's: my_data.json does not make a domain."""
    path = tmp_path / "my_data.json"
    path.write_text((RMBENCH / "chat_filtered.json").read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        import_file(path, "rmbench")
    assert str(caught.value).startswith(
        f"{path}:2: field 'domain': 'my_data' (from the file name my_data.json) is not an RM-Bench domain — use chat, "
        "math, code, safety or one of them with a suffix (safety-refuse)"
    )


def test_rmb_pairwise_and_best_of_n_rows():
    rmb = records_by_id(RMB, "rmb")
    pair = rmb["pair-201"]
    assert [m.role for m in pair.input] == ["user", "assistant", "user"]  # a multi-turn conversation_input
    assert pair.category == ["Harmlessness", "S1"]
    assert [(r.id, r.model) for r in pair.responses] == [
        ("chosen", "Llama-2-7b-chat-hf"),
        ("rejected", "vicuna-7b-v1.5"),
    ]
    assert pair.rank == {"chosen": 1, "rejected": 2}
    assert rmb["pair-101"].input == "What is your opinion on GPT-3.5?"  # one user turn is plain text
    bon = rmb["bon-101"]
    assert bon.category == ["Helpfulness", "Chat", "Discussion"]
    assert bon.rank == {"best": 1, "loser-1": 2, "loser-2": 2, "loser-3": 2}
    assert [r.model for r in bon.responses] == ["gemini-1.5-pro", "Llama-2-70b", "qwen2-7b", "mistral-7b"]


def test_rewardbench2_and_judgebench_rows():
    rb2 = records_by_id(RB2, "rewardbench2")
    assert rb2["1"].rank == {"chosen-1": 1, "rejected-1": 2, "rejected-2": 2, "rejected-3": 2}
    assert rb2["1"].category == ["Factuality"] and rb2["1"].responses[3].model == "model-3"
    assert rb2["tied:4"].rank == {"chosen-1": 1, "chosen-2": 1, "rejected-1": 2, "rejected-2": 2}
    jb = records_by_id(JUDGEBENCH, "judgebench")
    assert jb["u2"].rank == {"A": 2, "B": 1} and jb["u1"].rank == {"A": 1, "B": 2}
    assert jb["u1"].category == ["mmlu-pro", "mmlu-pro-law"] and jb["u2"].category == ["livebench-math"]
    assert jb["u1"].responses[0].model == "gpt-4o-2024-05-13"


@pytest.mark.parametrize(
    ("fmt", "name", "change", "expected"),
    [
        ("rmbench", "chat.json", {"chosen": ["a", "b"]}, "field 'chosen': must be a list of 3 strings"),
        ("rmbench", "chat.json", {"prompt": None}, "field 'prompt': is missing"),
        ("rmbench", "chat.json", {"domain": "chit-chat"}, "field 'domain': 'chit-chat' is not an RM-Bench domain"),
        ("rmb", "x.json", {"loser_list": []}, "field 'loser_list': must be a non-empty list"),
        ("rmb", "x.json", {"bon_best": "text"}, "field 'bon_best': must be an {llm_name, answer} object"),
        ("rmb", "x.json", {"conversation_input": []}, "field 'conversation_input': is empty"),
        (
            "rmb",
            "x.json",
            {"conversation_input": [{"role": "system", "content": ""}]},
            "field 'conversation_input': is empty",
        ),
        (
            "rmb",
            "x.json",
            {"conversation_input": [{"role": "tool", "content": "42"}]},
            "field 'conversation_input[0].role': unknown role 'tool' — use one of human, user, gpt, assistant, system",
        ),
        ("judgebench", "x.jsonl", {"label": "A=B"}, "field 'label': must be 'A>B' or 'B>A', got 'A=B'"),
        ("rewardbench2", "x.jsonl", {"id": "1"}, "field 'id': duplicate prompt id '1'"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path, fmt, name, change, expected):
    """Each bad row is one located error, or with skip_invalid one skipped and counted row (a pair of one text is
    no bad row of a benchmark: see test_benchmark_rows_of_one_text_are_kept_with_one_warning)."""
    source = {
        "rmbench": RMBENCH / "chat_filtered.json",
        "rmb": RMB / "BoN_set/Helpfulness/Chat/Discussion.json",
        "judgebench": JUDGEBENCH,
        "rewardbench2": RB2,
    }[fmt]
    rows = [json.loads(x) for x in source.read_text(encoding="utf-8").splitlines()] if name.endswith("l") else None
    rows = rows or json.loads(source.read_text(encoding="utf-8"))
    rows[1] = rows[1] | (change(rows[1]) if callable(change) else change)
    path = tmp_path / name
    text = "".join(json.dumps(r) + "\n" for r in rows) if name.endswith("l") else json.dumps(rows, indent=1)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        import_file(path, fmt)
    line = 2 if name.endswith("l") else text.splitlines().index(" {", 2) + 1  # where the second item opens
    assert str(caught.value).startswith(f"{path}:{line}: {expected}")
    skipped = import_file(path, fmt, skip_invalid=True)
    assert len(skipped.records) == len(rows) - 1 and len(skipped.skipped) == 1


# ---------------------------------------------------------------- RewardBench, PPE


def test_rewardbench_rows(tmp_path):
    records = {r.id: r for r in import_file(write_jsonl(tmp_path / "f.jsonl", REWARDBENCH), "rewardbench").records}
    assert records["1"].category == ["Chat", "alpacaeval-easy"] and records["7"].category == ["Reasoning", "hep-python"]
    assert records["8"].category == ["anthropic_helpful"]  # no section: kept as its subset
    assert records["1"].rank == {"chosen": 1, "rejected": 2}
    assert [(r.id, r.model, len(r.content)) for r in records["1"].responses] == [
        ("chosen", "GPT-4", 20),
        ("rejected", "Llama-2-7b-chat", 10),
    ]


def test_ppe_rows(tmp_path):
    bok = {r.id: r for r in import_file(write_jsonl(tmp_path / "b.jsonl", PPE_CORRECTNESS), "ppe-correctness").records}
    assert list(bok)[0] == "q1@gpt-4o-mini-2024-07-18"  # a question is asked of several models: one row each
    bok = {k.partition("@")[0]: r for k, r in bok.items()}
    assert bok["q1"].conflict_pairs == [["1", "2"], ["3", "4"]] and bok["q2"].conflict_pairs == [["1", "2"]]
    assert [(r.id, r.correct, r.model) for r in bok["q2"].responses] == [
        ("1", True, "gpt-4o-mini-2024-07-18"),
        ("2", False, "gpt-4o-mini-2024-07-18"),
        ("3", False, "gpt-4o-mini-2024-07-18"),
    ]
    assert bok["q2"].rank == {"1": 1, "2": 2, "3": 2} and bok["q1"].category == ["law"]
    assert bok["q3"].ranked_pairs() == [] and bok["q4"].ranked_pairs() == []
    hp = {r.id: r for r in import_file(write_jsonl(tmp_path / "h.jsonl", PPE_PREFERENCE), "ppe-preference").records}
    assert hp["p1"].rank == {"1": 1, "2": 2} and hp["p2"].rank == {"1": 2, "2": 1} and hp["p3"].rank == {"1": 1, "2": 1}
    assert [r.model for r in hp["p1"].responses] == ["gpt-4o-2024-05-13", "llama-3-70b-instruct"]
    assert hp["p4"].category == ["Chinese"]


@pytest.mark.parametrize(
    ("fmt", "rows", "change", "expected"),
    [
        ("rewardbench", REWARDBENCH, {"subset": None}, "field 'subset': is missing"),
        ("rewardbench", REWARDBENCH, {"chosen": ["a"]}, "field 'chosen': must be a string, got list"),
        ("rewardbench", REWARDBENCH, {"id": None}, "field 'id': is missing"),
        ("ppe-correctness", PPE_CORRECTNESS, {"scores": [True]}, "field 'scores': must be a list of 3 booleans"),
        ("ppe-correctness", PPE_CORRECTNESS, {"scores": "TFF"}, "field 'scores': must be a list of 3 booleans"),
        ("ppe-correctness", PPE_CORRECTNESS, {"response_2": 7}, "field 'response_2': must be a string, got int"),
        ("ppe-correctness", PPE_CORRECTNESS, {"model_name": None}, "field 'model_name': is missing"),
        (
            "ppe-correctness",
            PPE_CORRECTNESS,
            {"sampled_conflict_pairs": [[1, 2]]},
            "field 'sampled_conflict_pairs[0]': pairs responses 2 and 3, both wrong",
        ),
        (
            "ppe-correctness",
            PPE_CORRECTNESS,
            {"sampled_conflict_pairs": [[0, 3]]},
            "field 'sampled_conflict_pairs[0]': must be a pair [i, j] of response indices 0 … 2",
        ),
        ("ppe-preference", PPE_PREFERENCE, {"winner": "A"}, "field 'winner': must be one of 'model_a', 'model_b'"),
        ("ppe-preference", PPE_PREFERENCE, {"response_1": None}, "field 'response_1': is missing"),
    ],
)
def test_bad_rewardbench_and_ppe_rows_name_file_line_and_field(tmp_path, fmt, rows, change, expected):
    path = write_jsonl(tmp_path / "x.jsonl", [rows[0], rows[1] | change, *rows[2:]])
    with pytest.raises(InputError) as caught:
        import_file(path, fmt)
    assert str(caught.value).startswith(f"{path}:2: {expected}")
    assert "\n" not in str(caught.value)
    assert len(import_file(path, fmt, skip_invalid=True).records) == len(rows) - 1


def test_ppe_correctness_row_without_responses(tmp_path):
    row = {k: v for k, v in PPE_CORRECTNESS[0].items() if not k.startswith("response_")}
    with pytest.raises(InputError, match=r":1: field 'response_1': is missing"):
        import_file(write_jsonl(tmp_path / "x.jsonl", [row]), "ppe-correctness")


# ---------------------------------------------------------------- rows of one text: kept, as upstream scores them

SAME = "I'm sorry, but I can't help with that."


# One row of every benchmark whose better and worse responses are one text (two models gave one refusal).
ONE_TEXT_ROWS = {
    "rmbench": {"domain": "chat", "prompt": "p", "chosen": [SAME, "b", "c"], "rejected": [SAME, "y", "z"]},
    "rmb": {
        "conversation_input": [{"role": "user", "content": "p", "language": "English"}],
        "chosen": {"llm_name": "m1", "answer": SAME},
        "reject": {"llm_name": "m2", "answer": SAME},
        "category_path": "Pairwise_set/Harmlessness/S2",
    },
    "rewardbench2": {"prompt": "p", "chosen": [SAME], "rejected": [SAME, "b", "c"], "subset": "Safety"},
    "judgebench": {"question": "q", "response_model": "m", "response_A": SAME, "response_B": SAME, "label": "A>B"},
    "rewardbench": {"prompt": "p", "chosen": SAME, "rejected": SAME, "subset": "refusals-dangerous"},
    "ppe-preference": {"prompt": "p", "response_1": SAME, "response_2": SAME, "winner": "model_b"},
    "ppe-correctness": {
        "model_name": "m",
        "prompt": "p",
        "response_1": SAME,
        "response_2": SAME,
        "response_3": "c",
        "scores": [True, False, False],
    },
}


_ID_KEY = {"rmb": "pair_uid", "judgebench": "pair_id", "ppe-preference": "question_id"}


_ID_KEY["ppe-correctness"] = "question_id"


def test_every_benchmark_importer_is_covered():
    assert set(ONE_TEXT_ROWS) == set(FORMATS) - {"pairwise", "ranked", "ratings", "official"}


@pytest.mark.parametrize("fmt", sorted(ONE_TEXT_ROWS))
def test_benchmark_rows_of_one_text_are_kept_with_one_warning(tmp_path, fmt):
    """Upstream scores a row whose two texts are one (RMB: chosen > reject is false, the row stays in the
    denominator): every benchmark importer keeps it, no flag needed, and one warning gives the count."""
    row = ONE_TEXT_ROWS[fmt]
    worse = {"rmb": "reject", "judgebench": "response_B", "ppe-preference": "response_1"}.get(fmt, "rejected")
    worse = "response_2" if fmt == "ppe-correctness" else worse
    value = row[worse]
    other = ["x", *value[1:]] if isinstance(value, list) else "x"
    other = {**value, "answer": "x"} if isinstance(value, dict) else other
    distinct = row | {worse: other}
    key = _ID_KEY.get(fmt, "id")
    rows = [{key: str(i), **r} for i, r in enumerate([row, distinct, row], start=1)]
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = import_file(path, fmt)
    assert len(result.records) == 3 and not result.skipped
    assert [str(w) for w in result.warnings] == [
        f"{path}: 2 row(s) judge two identical texts: kept, as upstream scores them (a tie is not a win); "
        "the eval's 'degenerate' check counts them"
    ]


def write_rmb_release(root: Path) -> Path:
    """RMB_dataset/Pairwise_set as the release lays it out (a JSON array per scenario, indented), with the
    real release's case: Harmlessness/S2.json has a pair where two models gave the identical refusal."""
    pairs = root / "RMB_dataset" / "Pairwise_set"
    (pairs / "Helpfulness" / "Chat").mkdir(parents=True)
    shutil.copy(RMB / "Pairwise_set/Helpfulness/Chat/Discussion.json", pairs / "Helpfulness/Chat/Discussion.json")
    (pairs / "Harmlessness").mkdir()
    shutil.copy(RMB / "Pairwise_set/Harmlessness/S1.json", pairs / "Harmlessness/S1.json")
    refusal = {"pair_uid": "s2-1", **ONE_TEXT_ROWS["rmb"]}
    other = refusal | {"pair_uid": "s2-2", "reject": {"llm_name": "m2", "answer": "Sure."}}
    (pairs / "Harmlessness/S2.json").write_text(json.dumps([other, refusal], indent=4), encoding="utf-8")
    return pairs


def test_rmb_release_with_an_identical_refusal_imports_and_scores_as_upstream(tmp_path, monkeypatch, capsys):
    """``cheems import rmb RMB_dataset/Pairwise_set`` no longer stops at S2.json; the pair of one refusal is
    scored as RMB scores it (``chosen > reject``: a tie is wrong and counted), in strict and upstream rules alike,
    and the degenerate check counts it."""
    bench = tmp_path / "rmb.jsonl"
    proc = run_main("import", "rmb", write_rmb_release(tmp_path), "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning") == 1 and "1 row(s) judge two identical texts: kept" in proc.stderr
    got = {}
    for compat in ("strict", "upstream"):
        out = tmp_path / f"{compat}.json"
        args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "pairwise"]
        proc = run_main(*args, "--compat", compat, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        got[compat] = json.loads(out.read_text(encoding="utf-8"))
    for report in got.values():
        sub = report["subsets"]["rmb"]
        # 2 Helpfulness pairs (1 right), S1's pair (right), S2: "Sure." loses on length (right), the tie is wrong
        assert sub["n_pairs"] == 5 and sub["pooled_accuracy"] == pytest.approx(3 / 5)
        degenerate = next(c for c in report["checks"] if c["name"] == "degenerate")
        assert degenerate["value"]["identical_pairs"] == 1 and degenerate["level"] == "warning"
    assert got["strict"]["subsets"]["rmb"]["n_pairs"] == got["upstream"]["subsets"]["rmb"]["n_pairs"]


def test_rmb_best_of_n_row_with_the_best_answer_among_its_losers_counts_as_wrong(tmp_path, monkeypatch, capsys):
    """A best-of-N row whose best answer a loser repeats: kept, and wrong under ``bon`` (the best must outscore
    every loser; a tie is no win), as RMB scores it."""
    folder = tmp_path / "BoN_set" / "Helpfulness" / "Chat"
    folder.mkdir(parents=True)
    rows = json.loads((RMB / "BoN_set/Helpfulness/Chat/Discussion.json").read_text(encoding="utf-8"))
    rows[1]["loser_list"].append({"llm_name": "twin", "answer": rows[1]["bon_best"]["answer"]})
    (folder / "Discussion.json").write_text(json.dumps(rows, indent=4), encoding="utf-8")
    bench, out = tmp_path / "bon.jsonl", tmp_path / "bon.json"
    proc = run_main("import", "rmb", tmp_path / "BoN_set", "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "1 row(s) judge two identical texts: kept" in proc.stderr, proc.stderr
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "bon", "--output-json", out]
    assert run_main(*args, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    sub = json.loads(out.read_text(encoding="utf-8"))["subsets"]["bon"]
    # before: one of the two rows right (test_pairwise_and_bon_on_rmb); row 102 was that one, now tied with its twin
    assert sub["n_prompts"] == 2 and sub["pooled_accuracy"] == 0.0


def test_judgebench_pair_with_a_equal_to_b_imports_and_counts_as_wrong(tmp_path, monkeypatch, capsys):
    """JudgeBench's both-orders RM judge gives a tie 0 (not right): the A == B pair stays in the denominator."""
    rows = [json.loads(x) for x in JUDGEBENCH.read_text(encoding="utf-8").splitlines()]
    rows.append(rows[0] | {"pair_id": "same", "response_B": rows[0]["response_A"]})
    source = tmp_path / "claude.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bench, out = tmp_path / "jb.jsonl", tmp_path / "jb.json"
    proc = run_main("import", "judgebench", source, "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and proc.stderr.count("warning") == 1, proc.stderr
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "pairwise", "--output-json", out]
    assert run_main(*args, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    sub = json.loads(out.read_text(encoding="utf-8"))["subsets"]["jb"]
    assert sub["n_pairs"] == 5 and sub["pooled_accuracy"] == pytest.approx(3 / 5)  # 3 of the 4 before, then the tie
