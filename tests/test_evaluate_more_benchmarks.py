"""RewardBench (v1), PPE and Kendall τb: importers in the public layouts, metrics against hand-computed numbers.

Each fixture is written here by hand in its benchmark's upstream columns. The scorer is the length baseline
(score = characters), so every number below follows from the lengths (``T(n)`` is a text of n characters):

RewardBench (chosen vs rejected): alpacaeval-easy 20>10 right, 5<15 wrong (1/2); mt-bench-med 12=12 tie wrong
(0); llmbar-natural 30>8 (1); donotanswer 9<18 (0); math-prm 25>11 (1); hep-python 6<14 (0); a prior-sets row
anthropic_helpful 10>4 (1, in no section). Sections by upstream's EXAMPLE_COUNTS: Chat (1/2·100 + 0·40)/140 =
5/14; Chat Hard 1; Safety 0; Reasoning (1·984 + 0·164)/1148 = 6/7 (math-prm weighs as the six code subsets);
score = (5/14 + 1 + 0 + 6/7)/4 = 31/56; pooled 4/8.

PPE correctness (lengths; scores = correct; sampled conflict pairs 0-based): q1 [10 30 20 5] [T F T F],
sampled (0,1) 10<30 wrong, (3,2) 20>5 right; all four pairs: 2 right; top 30 wrong; r = -2.5/√368.75. q2
[40 8 8] [T F F], sampled (1,0) right; all pairs 2/2; top right; r = 1. q3 [7 9] all correct; q4 [3 6] all
wrong. q5 [12 12 4] [T F F], sampled (0,1) the 12=12 tie: wrong; all pairs 1/2; top tied with a wrong one: 0;
r = 1/2. q6 [5 5] [T F]: (0,1) wrong; top 0; r undefined. Accuracy over the sampled pairs 2/5 (law 2/3, math
0/2), over all pairs 5/9; best-of-K 2/6; random (1/2 + 1/3 + 1 + 0 + 1/3 + 1/2)/6 = 4/9; oracle 5/6;
Pearson (1 + 1/2 - 2.5/√368.75)/3.

PPE preference: p1 model_a 20>10 right; p2 model_b 15>7 wrong; p3 tie (no pair); p4 model_b 3<9 right ->
2/3; English 1/2, Chinese 1.

Kendall τb: k1 gold a1 b2 c2 d3, lengths 4 3 1 2 -> concordant ab ac ad bd, discordant cd, bc tied in gold
only: (4-1)/√(5·6); k2 two responses of equal length: scores tied, undefined; k3 all gold rank 1: undefined;
k4 gold 1 2 3, lengths 1 2 3: -1. Categories 写作 3/√30, 数学 -1; mean (3/√30 - 1)/2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cheems.analysis.leaderboard import read_eval_json
from cheems.data.importers import import_file
from cheems.errors import InputError
from cheems.evaluate import evaluate_scores, load_bench, score
from cheems.evaluate.benchmark_report import benchmark_report
from cheems.metrics.kendall import kendall_tau_b
from cheems.metrics.ppe import pearson
from cheems.metrics.rewardbench import EXAMPLE_COUNTS
from cheems.models import load_scorer
from helpers import assert_user_error, run_main, write_jsonl


def T(n: int, c: str = "a") -> str:
    """A text of n characters."""
    return c * n


def rb_row(i: int, subset: str, chosen: int, rejected: int) -> dict:
    return {
        "prompt": f"question {i}",
        "chosen": T(chosen, "c"),
        "chosen_model": "GPT-4",
        "rejected": T(rejected, "r"),
        "rejected_model": "Llama-2-7b-chat",
        "subset": subset,
        "id": i,
    }


REWARDBENCH = [
    rb_row(1, "alpacaeval-easy", 20, 10),
    rb_row(2, "alpacaeval-easy", 5, 15),
    rb_row(3, "mt-bench-med", 12, 12),
    rb_row(4, "llmbar-natural", 30, 8),
    rb_row(5, "donotanswer", 9, 18),
    rb_row(6, "math-prm", 25, 11),
    rb_row(7, "hep-python", 6, 14),
    rb_row(8, "anthropic_helpful", 10, 4),
]


def bok_row(qid: str, lengths: list[int], correct: list[bool], category: str, sampled: list[list[int]]) -> dict:
    row = {"question_id": qid, "category": category, "model_name": "gpt-4o-mini-2024-07-18", "prompt": f"Q {qid}"}
    row |= {f"response_{i}": T(n, "abcdefgh"[i]) for i, n in enumerate(lengths, start=1)}
    return row | {"scores": correct, "mean_score": sum(correct) / len(correct), "sampled_conflict_pairs": sampled}


PPE_CORRECTNESS = [
    bok_row("q1", [10, 30, 20, 5], [True, False, True, False], "law", [[0, 1], [3, 2]]),
    bok_row("q2", [40, 8, 8], [True, False, False], "law", [[1, 0]]),
    bok_row("q3", [7, 9], [True, True], "math", []),
    bok_row("q4", [3, 6], [False, False], "math", []),
    bok_row("q5", [12, 12, 4], [True, False, False], "math", [[0, 1]]),
    bok_row("q6", [5, 5], [True, False], "math", [[0, 1]]),
]


def hp_row(qid: str, first: int, second: int, winner: str, language: str) -> dict:
    return {
        "question_id": qid,
        "model_a": "gpt-4o-2024-05-13",
        "model_b": "llama-3-70b-instruct",
        "winner": winner,
        "language": language,
        "prompt": f"prompt {qid}",
        "response_1": T(first, "x"),
        "response_2": T(second, "y"),
    }


PPE_PREFERENCE = [
    hp_row("p1", 20, 10, "model_a", "English"),
    hp_row("p2", 15, 7, "model_b", "English"),
    hp_row("p3", 6, 6, "tie", "Chinese"),
    hp_row("p4", 3, 9, "model_b", "Chinese"),
]


def ranked(pid: str, category: str, lengths: dict[str, int], rank: dict[str, int]) -> dict:
    responses = [{"id": rid, "content": T(n, rid)} for rid, n in lengths.items()]
    return {"id": pid, "input": f"问题 {pid}", "category": [category], "responses": responses, "rank": rank}


KENDALL = [
    ranked("k1", "写作", {"a": 4, "b": 3, "c": 1, "d": 2}, {"a": 1, "b": 2, "c": 2, "d": 3}),
    ranked("k2", "写作", {"x": 2, "y": 2}, {"x": 1, "y": 2}),
    ranked("k3", "数学", {"a": 1, "b": 2}, {"a": 1, "b": 1}),
    ranked("k4", "数学", {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}),
]


def bench_file(tmp_path: Path, name: str, rows: list[dict], fmt: str | None) -> Path:
    """``rows`` in the upstream layout imported with ``fmt`` (None: already canonical) as the bench file NAME.jsonl."""
    records = import_file(write_jsonl(tmp_path / f"{name}-upstream.jsonl", rows), fmt).records if fmt else None
    out = tmp_path / f"{name}.jsonl"
    return write_jsonl(out, [r.to_json() for r in records] if records else rows)


def length_report(metric: str, path: Path) -> dict:
    bench = load_bench([path])
    result = evaluate_scores(bench, score(bench, load_scorer("length")), "length")
    return benchmark_report(metric, bench, result).to_dict()


# ---------------------------------------------------------------- importers


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
def test_bad_rows_name_file_line_and_field(tmp_path, fmt, rows, change, expected):
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


# ---------------------------------------------------------------- metrics


def test_rewardbench_sections_weighted_as_upstream(tmp_path):
    got = length_report("rewardbench", bench_file(tmp_path, "rb", REWARDBENCH, "rewardbench"))
    sub = got["subsets"]["rb"]
    assert {k: v["accuracy"] for k, v in sub["categories"].items()} == {
        "alpacaeval-easy": 0.5,
        "anthropic_helpful": 1.0,
        "donotanswer": 0.0,
        "hep-python": 0.0,
        "llmbar-natural": 1.0,
        "math-prm": 1.0,
        "mt-bench-med": 0.0,  # a score tie is wrong, as upstream's chosen > rejected
    }
    assert sub["categories"]["anthropic_helpful"]["section"] is None
    sections = {k: v["accuracy"] for k, v in sub["sections"].items()}
    assert sections == pytest.approx({"Chat": 5 / 14, "Chat Hard": 1.0, "Safety": 0.0, "Reasoning": 6 / 7})
    assert EXAMPLE_COUNTS["math-prm"] == 6 * EXAMPLE_COUNTS["hep-python"]
    assert sub["accuracy"] == pytest.approx(31 / 56) and got["overall"] == pytest.approx(31 / 56)
    assert sub["pooled_accuracy"] == 0.5 and (sub["n_prompts"], sub["n_pairs"]) == (8, 8)
    assert sub["sections"]["Chat"] == {"accuracy": pytest.approx(5 / 14), "n_prompts": 3, "n_pairs": 3}


def test_ppe_correctness_metrics(tmp_path):
    sub = length_report("ppe-correctness", bench_file(tmp_path, "bok", PPE_CORRECTNESS, "ppe-correctness"))
    sub = sub["subsets"]["bok"]
    assert sub["accuracy"] == pytest.approx(2 / 5) and sub["pooled_accuracy"] == sub["accuracy"]
    assert {k: v["accuracy"] for k, v in sub["categories"].items()} == {"law": pytest.approx(2 / 3), "math": 0}
    assert (sub["n_prompts"], sub["n_conflict_pairs"], sub["n_pairs"], sub["n_rows"]) == (4, 5, 9, 6)
    assert sub["best_of_k"] == pytest.approx(1 / 3)
    assert sub["random_best_of_k"] == pytest.approx(4 / 9) and sub["oracle_best_of_k"] == pytest.approx(5 / 6)
    assert sub["pearson"] == pytest.approx((1 + 0.5 - 2.5 / math.sqrt(368.75)) / 3)
    assert sub["pearson_undefined"] == 1


def test_ppe_correctness_without_sampled_pairs_counts_every_conflict(tmp_path):
    rows = [{k: v for k, v in row.items() if k != "sampled_conflict_pairs"} for row in PPE_CORRECTNESS]
    sub = length_report("ppe-correctness", bench_file(tmp_path, "bok", rows, "ppe-correctness"))["subsets"]["bok"]
    assert sub["accuracy"] == pytest.approx(5 / 9) and (sub["n_prompts"], sub["n_conflict_pairs"]) == (4, 9)
    assert {k: v["accuracy"] for k, v in sub["categories"].items()} == pytest.approx({"law": 4 / 6, "math": 1 / 3})
    assert sub["best_of_k"] == pytest.approx(1 / 3)  # the same rows, the same picks


def test_ppe_preference_accuracy_leaves_tied_votes_out(tmp_path):
    sub = length_report("ppe-preference", bench_file(tmp_path, "hp", PPE_PREFERENCE, "ppe-preference"))["subsets"]
    sub = sub["hp"]
    assert sub["accuracy"] == pytest.approx(2 / 3) and sub["n_label_ties"] == 1
    assert sub["categories"] == {
        "Chinese": {"accuracy": 1.0, "n_prompts": 1, "n_pairs": 1},
        "English": {"accuracy": 0.5, "n_prompts": 2, "n_pairs": 2},
    }


def test_kendall_tau_b_per_prompt(tmp_path):
    sub = length_report("kendall", bench_file(tmp_path, "ranks", KENDALL, None))["subsets"]["ranks"]
    tau = 3 / math.sqrt(30)
    assert sub["categories"] == {
        "写作": {"accuracy": pytest.approx(tau), "n_prompts": 1, "n_pairs": 5},
        "数学": {"accuracy": pytest.approx(-1.0), "n_prompts": 1, "n_pairs": 3},
    }
    assert sub["accuracy"] == pytest.approx((tau - 1) / 2) and sub["kendall_tau"] == sub["accuracy"]
    assert sub["n_undefined"] == 2 and sub["undefined"] == {"gold_tied": 1, "scores_tied": 1}


@pytest.mark.parametrize(
    ("gold", "scores", "tau"),
    [
        ([1, 2, 2, 3], [4, 3, 1, 2], 3 / math.sqrt(30)),
        ([1, 2, 3], [3, 2, 1], 1.0),
        ([1, 1], [1, 2], None),  # gold all tied
        ([1, 2], [5, 5], None),  # scores all tied
    ],
)
def test_kendall_tau_b_by_hand(gold, scores, tau):
    got = kendall_tau_b(gold, scores)
    assert got == (None if tau is None else pytest.approx(tau))


def test_pearson_of_a_constant_is_undefined():
    assert pearson([1, 1, 1], [1, 0, 0]) is None and pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1)


# ---------------------------------------------------------------- the command


def test_cli_import_then_eval_rewardbench(tmp_path, monkeypatch, capsys):
    upstream = write_jsonl(tmp_path / "filtered.jsonl", REWARDBENCH)
    bench, out = tmp_path / "rb.jsonl", tmp_path / "rb.json"
    proc = run_main("import", "rewardbench", upstream, "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "wrote 8 records" in proc.stdout
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "rewardbench"]
    proc = run_main(*args, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["overall"] == pytest.approx(31 / 56)
    # cheems leaderboard and correlate read it; exact match (every pair right) averages the main categories,
    # the sections and the prior set: (1/3 + 1 + 0 + 1/2 + 1)/5
    read = read_eval_json(out)["subsets"]["rb"]
    low, high = read.pop("accuracy_ci")  # every metric has intervals
    assert read == {
        "accuracy": pytest.approx(31 / 56),
        "exact_match": pytest.approx(17 / 30),
        "n_prompts": 8,
        "n_pairs": 8,
    }
    assert low <= 31 / 56 <= high
    assert "RewardBench metrics: length" in proc.stdout and "section Reasoning" in proc.stdout
    assert "0.857" in proc.stdout and "0.554" in proc.stdout


@pytest.mark.parametrize(
    ("metric", "rows", "fmt", "expected"),
    [
        ("rewardbench", KENDALL, None, ("--metric rewardbench", "bench file 'b' holds no RewardBench subset")),
        ("ppe-correctness", REWARDBENCH, "rewardbench", ("--metric ppe-correctness", "does not mark each response")),
        ("kendall", [KENDALL[1], KENDALL[2]], None, ("--metric kendall", "no prompt of bench file 'b' has a Kendall")),
    ],
)
def test_cli_metric_on_the_wrong_bench_is_one_line(tmp_path, monkeypatch, capsys, metric, rows, fmt, expected):
    bench = bench_file(tmp_path, "b", rows, fmt)
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", metric]
    out = tmp_path / "out.json"
    assert_user_error(run_main(*args, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys), *expected)
    assert not out.exists()


def test_cli_kendall_refuses_a_judge_before_judging(tmp_path, monkeypatch, capsys):
    """A judge gives verdicts on pairs, not a score per response: refused before any request (no server here)."""
    bench = bench_file(tmp_path, "b", KENDALL, None)
    args = ["eval", "--bench", bench, "--judge-model", "some-judge", "--base-url", "http://127.0.0.1:9/v1"]
    out = tmp_path / "out.json"
    proc = run_main(*args, "--metric", "kendall", "--output-json", out, monkeypatch=monkeypatch, capsys=capsys,
                    env={"OPENAI_API_KEY": "test-key"})  # fmt: skip
    assert_user_error(proc, "--metric: kendall needs every response's score, and a judge gives verdicts", "--model")
    assert not out.exists()


@pytest.mark.parametrize(
    ("fmt", "rows", "metric", "overall", "shown"),
    [
        ("ppe-correctness", PPE_CORRECTNESS, "ppe-correctness", 2 / 5, "PPE correctness metrics: length"),
        ("ppe-preference", PPE_PREFERENCE, "ppe-preference", 2 / 3, "PPE human preference metrics: length"),
        (None, KENDALL, "kendall", (3 / math.sqrt(30) - 1) / 2, "Kendall τb metrics: length"),
    ],
)
def test_cli_import_then_eval_ppe_and_kendall(tmp_path, monkeypatch, capsys, fmt, rows, metric, overall, shown):
    upstream, bench, out = tmp_path / "upstream.jsonl", tmp_path / "b.jsonl", tmp_path / "b.json"
    if fmt:
        write_jsonl(upstream, rows)
        proc = run_main("import", fmt, upstream, "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0 and f"wrote {len(rows)} records" in proc.stdout
    else:
        write_jsonl(bench, rows)
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", metric, "--output-json", out]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["overall"] == pytest.approx(overall)
    assert shown in proc.stdout and f"{overall:.3f}" in proc.stdout
    if metric == "kendall":
        assert "note: b: 2 prompts left out, undefined (1 gold_tied, 1 scores_tied)" in proc.stdout
