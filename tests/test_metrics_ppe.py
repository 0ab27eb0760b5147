"""PPE-style metrics (issue 31): the best-of-K curve against brute-force enumeration of K-subsets, Pearson on
extreme scores, hand-made conflict_pairs refused at file:line, and the source and tie rule said with the numbers.

PPE_CORRECTNESS and PPE_PREFERENCE (tests/helpers.py, upstream columns) scored by the length baseline (score =
characters), against numbers worked out by hand from the lengths (``T(n)`` is a text of n characters):

PPE correctness (lengths; scores = correct; sampled conflict pairs 0-based): q1 [10 30 20 5] [T F T F],
sampled (0,1) 10<30 wrong, (3,2) 20>5 right; all four pairs: 2 right; top 30 wrong; r = -2.5/√368.75. q2
[40 8 8] [T F F], sampled (1,0) right; all pairs 2/2; top right; r = 1. q3 [7 9] all correct; q4 [3 6] all
wrong. q5 [12 12 4] [T F F], sampled (0,1) the 12=12 tie: wrong; all pairs 1/2; top tied with a wrong one: 0;
r = 1/2. q6 [5 5] [T F]: (0,1) wrong; top 0; r undefined. Accuracy over the sampled pairs 2/5 (law 2/3, math
0/2), over all pairs 5/9; best-of-K 2/6; random (1/2 + 1/3 + 1 + 0 + 1/3 + 1/2)/6 = 4/9; oracle 5/6;
Pearson (1 + 1/2 - 2.5/√368.75)/3.

PPE preference: p1 model_a 20>10 right; p2 model_b 15>7 wrong; p3 tie (no pair); p4 model_b 3<9 right ->
2/3; English 1/2, Chinese 1.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.evaluate import evaluate_scores
from cheems.evaluate.benchmark_report import benchmark_report
from cheems.metrics.ppe import SOURCE, TIE_RULE, best_of_k_curve, best_of_k_expectation, pearson
from helpers import PPE_CORRECTNESS, PPE_PREFERENCE, assert_user_error, bench_file, length_report, run_main, write_jsonl


def brute_force(scores: list[float], flags: list[bool], k: int) -> Fraction:
    """Every k-subset equally likely; a subset counts 1 iff every response tied at its top score is correct."""
    subsets = list(itertools.combinations(range(len(scores)), k))
    hits = 0
    for subset in subsets:
        top = max(scores[i] for i in subset)
        hits += all(flags[i] for i in subset if scores[i] == top)
    return Fraction(hits, len(subsets))


rows = st.integers(1, 7).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 3), min_size=n, max_size=n), st.lists(st.booleans(), min_size=n, max_size=n)
    )
)


@settings(max_examples=300, deadline=None)
@given(rows)
def test_best_of_k_expectation_equals_enumerating_every_k_subset(row):
    scores, flags = [float(s) for s in row[0]], row[1]  # few distinct scores: ties at the top are common
    for k in range(1, len(scores) + 1):
        assert best_of_k_expectation(scores, flags, k) == pytest.approx(float(brute_force(scores, flags, k)), abs=1e-12)
    assert best_of_k_expectation(scores, flags, 1) == pytest.approx(statistics.fmean(map(float, flags)))


def test_best_of_k_curve_means_rows_with_at_least_k_responses():
    curve = best_of_k_curve([([3.0, 2.0, 1.0], [False, True, True]), ([1.0, 1.0], [True, False])])
    # row 1: K=1 2/3, K=2 the top of {1,2},{1,3},{2,3} -> 1/3, K=3 0; row 2 (a tie): K=1 1/2, K=2 0
    assert curve == [
        {"k": 1, "best_of_k": pytest.approx((2 / 3 + 1 / 2) / 2), "n_rows": 2},
        {"k": 2, "best_of_k": pytest.approx(1 / 6), "n_rows": 2},
        {"k": 3, "best_of_k": 0.0, "n_rows": 1},
    ]
    with pytest.raises(ValueError):
        best_of_k_expectation([1.0], [True], 2)


def test_pearson_is_stable_for_extreme_scores():
    assert pearson([1e200, -1e200, 0.0], [1.0, 0.0, 0.5]) == pytest.approx(1.0)
    assert pearson([-1e200, 1e200], [1.0, 0.0]) == pytest.approx(-1.0)
    assert pearson([1e-300, 3e-300, 2e-300], [0.0, 1.0, 0.0]) == pytest.approx(pearson([1.0, 3.0, 2.0], [0, 1, 0]))
    assert pearson([5.0, 5.0], [1.0, 0.0]) is None


def bok(pid: str, scores: list[float], flags: list[bool], **more) -> tuple[dict, dict]:
    """A ppe-correctness bench record (canonical) and its scores."""
    responses = [{"id": str(i), "content": f"{pid}答{i}", "correct": f} for i, f in enumerate(flags, start=1)]
    rank = {str(i): 1 if f else 2 for i, f in enumerate(flags, start=1)}
    row = {"id": pid, "input": f"问{pid}", "category": ["math"], "responses": responses, "rank": rank, **more}
    return row, {(pid, str(i)): s for i, s in enumerate(scores, start=1)}


def test_ppe_correctness_reports_the_curve_source_and_tie_rule_and_a_stable_pearson():
    made = [bok("q1", [1e200, -1e200, 0.0], [True, False, False]), bok("q2", [2.0, 2.0], [True, False])]
    bench = {"b": [Record.model_validate(row) for row, _ in made]}
    scores = {k: v for _, s in made for k, v in s.items()}
    out = benchmark_report("ppe-correctness", bench, evaluate_scores(bench, scores))
    sub = out.to_dict()["subsets"]["b"]
    assert sub["pearson"] == pytest.approx((pearson([1.0, -1.0, 0.0], [1.0, 0.0, 0.0]) + 0) / 1)  # q2 undefined
    assert sub["pearson"] > 0.8 and sub["pearson_undefined"] == 1
    assert [p["k"] for p in sub["best_of_k_curve"]] == [1, 2, 3]
    assert sub["best_of_k_curve"][-1] == {"k": 3, "best_of_k": 1.0, "n_rows": 1}
    assert sub["best_of_k_curve"][1]["best_of_k"] == pytest.approx((2 / 3 + 0) / 2)  # q2's tie at the top: 0
    assert sub["best_of_k"] == pytest.approx(0.5)
    assert (sub["source"], sub["ties"]) == (SOURCE, TIE_RULE)
    assert "PPE-style, from the paper's definitions" in SOURCE and "could not be read" in SOURCE


BAD_PAIRS = [
    ([["1", "9"]], "field 'conflict_pairs[0]': names no response of prompt 'q2': '9'"),
    ([["2", "1"]], "field 'conflict_pairs[0]': must be [correct id, incorrect id]: '2' is incorrect, '1' is correct"),
    (["12"], "field 'conflict_pairs[0]': must be a pair of two response ids, got '12'"),
    ([[1, 2]], "field 'conflict_pairs[0]': must be a pair of two response ids, got [1, 2]"),
    ("12", "field 'conflict_pairs': must be a list of pairs, got str"),
]


@pytest.mark.parametrize("pairs, expected", BAD_PAIRS)
def test_hand_made_conflict_pairs_are_refused_at_file_and_line(tmp_path, monkeypatch, capsys, pairs, expected):
    rows = [bok("q1", [2.0, 1.0], [True, False])[0], bok("q2", [2.0, 1.0], [True, False], conflict_pairs=pairs)[0]]
    bench, out = write_jsonl(tmp_path / "b.jsonl", rows), tmp_path / "out.json"
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "ppe-correctness"]
    proc = run_main(*args, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{bench}:2: {expected}")
    assert not out.exists()
    # the Python API on records in memory: the same rule, an InputError naming the bench file, never a KeyError
    records = {"b": [Record.model_validate(r) for r in rows]}
    scores = {(r["id"], x["id"]): float(len(x["content"])) for r in rows for x in r["responses"]}
    with pytest.raises(InputError, match="bench file 'b'"):
        benchmark_report("ppe-correctness", records, evaluate_scores(records, scores))


def test_eval_prints_where_ppe_numbers_come_from(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "b.jsonl", [bok("q1", [2.0, 1.0], [True, False])[0]])
    out = tmp_path / "out.json"
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "ppe-correctness"]
    proc = run_main(*args, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert f"note: {SOURCE}; ties: {TIE_RULE}" in " ".join(proc.stdout.split())
    assert json.loads(out.read_text(encoding="utf-8"))["subsets"]["b"]["source"] == SOURCE


# ---------------------------------------------------------------- PPE_CORRECTNESS, PPE_PREFERENCE by hand


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


def test_pearson_of_a_constant_is_undefined():
    assert pearson([1, 1, 1], [1, 0, 0]) is None and pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1)
