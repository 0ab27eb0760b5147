"""Metrics against hand-computed cases (the definitions in README.md's metrics section)."""

from __future__ import annotations

import math

import pytest

from cheems.errors import InputError
from cheems.evaluate import evaluate_scores
from cheems.metrics import expected_calibration_error, overall
from cheems.metrics.cheemsbench import GroupMetrics
from helpers import record


def scores_for(pid: str, values: dict[str, float]) -> dict:
    return {(pid, rid): s for rid, s in values.items()}


def test_accuracy_and_exact_match_with_partial_ranks_and_score_ties():
    # p1: ranks r1=1, r2=2, r3=2 -> pairs (r1,r2), (r1,r3); r2~r3 is not a pair.
    p1 = record(3, rank={"r1": 1, "r2": 2, "r3": 2}, pid="p1", category="数学")
    # p2: r1 > r2 > r3 -> 3 pairs; the scores tie on (r2, r3): wrong.
    p2 = record(3, rank={"r1": 1, "r2": 2, "r3": 3}, pid="p2", category="数学")
    # p3: another category, one pair, wrong.
    p3 = record(2, rank={"r1": 1, "r2": 2}, pid="p3", category="代码")
    scores = {
        **scores_for("p1", {"r1": 3, "r2": 1, "r3": 2}),
        **scores_for("p2", {"r1": 5, "r2": 1, "r3": 1}),
        **scores_for("p3", {"r1": 0, "r2": 1}),
    }
    sub = evaluate_scores({"open": [p1, p2, p3]}, scores).subsets["open"]
    math_cat, code_cat = sub.categories["数学"], sub.categories["代码"]
    assert (math_cat.n_pairs, math_cat.n_prompts) == (5, 2)
    assert math_cat.accuracy == pytest.approx(4 / 5)  # pooled over the category's pairs
    assert math_cat.exact_match == pytest.approx(1 / 2)  # p1 all right, p2 has the tie
    assert (code_cat.accuracy, code_cat.exact_match) == (0.0, 0.0)
    # the subset is the unweighted mean over categories, not pooled over pairs
    assert sub.accuracy == pytest.approx((4 / 5 + 0) / 2)
    assert sub.exact_match == pytest.approx((1 / 2 + 0) / 2)
    assert (sub.n_prompts, sub.n_pairs) == (3, 6)


def test_prompts_without_comparisons_are_left_out():
    all_tied = record(2, rank={"r1": 1, "r2": 1}, pid="t")
    ok = record(2, rank={"r1": 1, "r2": 2}, pid="k")
    sub = evaluate_scores(
        {"s": [all_tied, ok]}, {**scores_for("t", {"r1": 0, "r2": 0}), **scores_for("k", {"r1": 1, "r2": 0})}
    ).subsets["s"]
    assert (sub.n_prompts, sub.accuracy, sub.exact_match) == (1, 1.0, 1.0)


def test_overall_is_mean_of_four_numbers_over_two_subsets():
    subsets = {"open": GroupMetrics(0.8, 0.4, 1, 1), "human": GroupMetrics(0.6, 0.2, 1, 1)}
    assert overall(subsets) == pytest.approx((0.8 + 0.4 + 0.6 + 0.2) / 4)


def test_json_shape_matches_design():
    rec = record(2, rank={"r1": 1, "r2": 2}, pid="p", category="知识")
    out = evaluate_scores({"open": [rec]}, scores_for("p", {"r1": 1, "r2": 0})).to_dict()
    assert set(out) == {"metric", "subsets", "overall", "length", "scorer"}
    assert out["metric"] == "cheems"
    sub = out["subsets"]["open"]
    assert {"accuracy", "exact_match", "n_prompts", "n_pairs", "categories", "length"} <= set(sub)
    assert set(sub["categories"]["知识"]) == {"accuracy", "exact_match", "n_prompts", "n_pairs"}
    assert out["overall"] == 1.0


def test_ranks_not_response_order_decide_which_is_chosen():
    rec = record(2, rank={"r1": 2, "r2": 1}, pid="p")
    sub = evaluate_scores({"s": [rec]}, scores_for("p", {"r1": 1, "r2": 0})).subsets["s"]
    assert sub.accuracy == 0.0


def test_missing_score_is_a_clear_error():
    rec = record(2, rank={"r1": 1, "r2": 2}, pid="p")
    with pytest.raises(InputError, match="no score for prompt 'p' response 'r2'"):
        evaluate_scores({"s": [rec]}, scores_for("p", {"r1": 1}), "s.jsonl")


def test_ece_hand_computed():
    # margins 2 (right) and -2 (wrong): one bin [0.. top] -> bins by |m|/top*5 = 5 -> last bin
    sig2 = 1 / (1 + math.exp(-2))
    assert expected_calibration_error([2.0, -2.0]) == pytest.approx(abs(0.5 - sig2))
    # two bins: |0.1| -> bin 0, |1.0| -> bin 4
    e = expected_calibration_error([0.1, 1.0])
    expected = 0.5 * abs(1 - 1 / (1 + math.exp(-0.1))) + 0.5 * abs(1 - 1 / (1 + math.exp(-1.0)))
    assert e == pytest.approx(expected)
    assert expected_calibration_error([0.0]) == pytest.approx(0.5)  # a tie is wrong, confidence 0.5
    assert expected_calibration_error([]) is None


def test_length_split_tells_a_length_follower_from_a_good_scorer():
    # r1 is best; contents are 回答1.. so equal length; give explicit lengths through content
    rec = record(3, rank={"r1": 1, "r2": 2, "r3": 3}, pid="p")
    rec.responses[0].content = "长" * 10  # chosen in both of its pairs, longer
    rec.responses[1].content = "长" * 20  # chosen over r3 (longer), rejected against r1 (shorter chosen)
    rec.responses[2].content = "长" * 5
    length = {("p", "r1"): 10.0, ("p", "r2"): 20.0, ("p", "r3"): 5.0}  # a length follower
    split = evaluate_scores({"s": [rec]}, length).to_dict()["subsets"]["s"]["length"]
    # pairs: (r1,r2) chosen shorter -> wrong; (r1,r3) chosen longer -> right; (r2,r3) longer -> right
    assert split["chosen_longer"] == {"accuracy": 1.0, "n_pairs": 2}
    assert split["chosen_shorter"] == {"accuracy": 0.0, "n_pairs": 1}
    assert split["same_length"] == {"accuracy": None, "n_pairs": 0}


def test_details_round_trip_keeps_every_pair(tmp_path):
    from cheems.evaluate.details import bench_fingerprint, read_details, write_details

    rec = record(3, rank={"r1": 1, "r2": 2, "r3": 2}, pid="p", category="数学")
    bench = {"s": [rec]}
    report = evaluate_scores(bench, scores_for("p", {"r1": 1, "r2": 2, "r3": 0}), "m")
    write_details(tmp_path / "d.jsonl", report.outcomes, "m", bench_fingerprint(bench))
    back = read_details(tmp_path / "d.jsonl")
    assert (back.scorer, back.bench) == ("m", bench_fingerprint(bench))
    assert back.outcomes == report.outcomes
    rec.responses[2].content = "改过的回答"
    assert bench_fingerprint(bench) != back.bench  # a changed text is a different bench
