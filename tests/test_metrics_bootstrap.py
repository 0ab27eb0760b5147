"""Bootstrap intervals (cheems.metrics.bootstrap, added to a report by cheems.evaluate.bench.add_intervals) against
hand-checked cases, a loop over subset_metrics on the same draws and scipy.stats.bootstrap."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import bootstrap

from cheems.evaluate import evaluate_scores
from cheems.evaluate.bench import add_intervals, report_from_outcomes
from cheems.evaluate.report import report_markdown
from cheems.metrics.cheemsbench import overall, subset_metrics
from helpers import percentile, prompt, random_bench, record


def test_hand_checked_two_prompt_bench():
    # p1: two pairs, both right; p2: one pair, wrong. A resample is (p1,p1) 1/4, mixed 1/2, (p2,p2) 1/4:
    # accuracy 1, 2/3, 0; exact match 1, 1/2, 0; overall 1, 7/12, 0.
    report = report_from_outcomes({"s": [prompt("p1", "c", True, True), prompt("p2", "c", False)]})
    middle = add_intervals(report, resamples=4000, seed=3, level=0.4).intervals  # percentiles 30, 70: mixed
    assert middle.subsets["s"].accuracy == pytest.approx((2 / 3, 2 / 3))
    assert middle.subsets["s"].exact_match == pytest.approx((0.5, 0.5))
    assert middle.overall == pytest.approx((7 / 12, 7 / 12))
    wide = add_intervals(report, resamples=4000, seed=3, level=0.8).intervals  # percentiles 10, 90: the ends
    assert (wide.subsets["s"].accuracy, wide.subsets["s"].exact_match, wide.overall) == ((0, 1), (0, 1), (0, 1))


def test_a_resample_averages_the_categories_it_holds():
    # p1 (X): one pair right; p2 (Y): three pairs wrong. A mixed resample has accuracy mean(1, 0) = 1/2,
    # not the pooled 1/4; (p1, p1) holds only X: 1.
    report = report_from_outcomes({"s": [prompt("p1", "X", True), prompt("p2", "Y", False, False, False)]})
    cis = add_intervals(report, resamples=4000, seed=0, level=0.4).intervals
    assert cis.subsets["s"].accuracy == (0.5, 0.5)
    assert add_intervals(report, resamples=4000, seed=0, level=0.8).intervals.subsets["s"].accuracy == (0, 1)


def test_vectorised_bootstrap_equals_subset_metrics_on_each_documented_draw():
    bench = random_bench(1)
    resamples, seed, level = 300, 11, 0.9
    cis = add_intervals(report_from_outcomes(bench), resamples, seed, level).intervals
    rng = np.random.default_rng(seed)  # the documented draws: one integers(0, n, (R, n)) per subset, in order
    metrics = {}
    for name, prompts in bench.items():
        scored = [o for o in prompts if o.pairs]
        picks = rng.integers(0, len(scored), size=(resamples, len(scored)))
        metrics[name] = [subset_metrics([scored[i] for i in row]) for row in picks]
    for name in bench:
        assert cis.subsets[name].accuracy == pytest.approx(percentile([m.accuracy for m in metrics[name]], level))
        assert cis.subsets[name].exact_match == pytest.approx(percentile([m.exact_match for m in metrics[name]], level))
    totals = [overall({name: metrics[name][r] for name in bench}) for r in range(resamples)]
    assert cis.overall == pytest.approx(percentile(totals, level))
    assert (cis.resamples, cis.seed, cis.level) == (resamples, seed, level)


def test_plain_mean_agrees_with_scipy_percentile_bootstrap():
    # one subset, one category, one pair a prompt: accuracy and exact match are the mean of right/wrong
    rng = random.Random(5)
    right = [rng.random() < 0.7 for _ in range(150)]
    report = report_from_outcomes({"s": [prompt(f"p{i}", "c", r) for i, r in enumerate(right)]})
    cis = add_intervals(report, resamples=20000, seed=1).intervals
    reference = bootstrap(
        (np.array(right, dtype=float),), np.mean, n_resamples=20000, method="percentile", rng=np.random.default_rng(2)
    ).confidence_interval
    for ci in (cis.subsets["s"].accuracy, cis.subsets["s"].exact_match, cis.overall):
        assert ci == pytest.approx((reference.low, reference.high), abs=0.006)


def test_same_seed_same_numbers_other_seed_other_numbers():
    bench = random_bench(2)
    first = add_intervals(report_from_outcomes(bench), 500, seed=7).intervals
    again = add_intervals(report_from_outcomes(bench), 500, seed=7).intervals
    other = add_intervals(report_from_outcomes(bench), 500, seed=8).intervals
    assert first == again
    assert first.overall != other.overall and first.subsets != other.subsets


def test_eval_json_with_intervals_keeps_design_keys_and_values():
    records = [record(3, rank={"r1": 1, "r2": 2, "r3": 3}, pid=f"p{i}", category=f"类{i % 2}") for i in range(6)]
    scores = {(f"p{i}", f"r{j}"): float((j * (i + 2)) % 5) for i in range(6) for j in (1, 2, 3)}
    plain = evaluate_scores({"open": records}, scores).to_dict()
    report = add_intervals(evaluate_scores({"open": records}, scores), 200, seed=4)
    out = report.to_dict()
    subset, ci = out["subsets"]["open"], report.intervals
    assert {"subsets", "overall", "overall_ci", "bootstrap"} <= set(out)
    assert {"accuracy", "exact_match", "n_prompts", "n_pairs", "categories"} <= set(subset)
    assert set(next(iter(subset["categories"].values()))) == {"accuracy", "exact_match", "n_prompts", "n_pairs"}
    assert subset["accuracy_ci"] == list(ci.subsets["open"].accuracy)
    assert subset["exact_match_ci"] == list(ci.subsets["open"].exact_match)
    assert (out["overall_ci"], out["bootstrap"]) == (list(ci.overall), {"resamples": 200, "seed": 4, "level": 0.95})
    for key in ("accuracy_ci", "exact_match_ci"):
        del subset[key]
    del out["overall_ci"], out["bootstrap"]
    assert out == plain  # the intervals add keys and change nothing else
    low, high = ci.subsets["open"].accuracy
    assert f"**{report.subsets['open'].accuracy:.3f} [{low:.3f}, {high:.3f}]**" in report_markdown(report)


def test_intervals_do_not_depend_on_how_many_draws_are_counted_at_a_time(monkeypatch):
    import cheems.metrics.bootstrap as stats  # where every bootstrap draws its rows (draw_rows)

    bench = random_bench(4)
    whole = add_intervals(report_from_outcomes(bench), 300, seed=5).intervals
    monkeypatch.setattr(stats, "DRAWS", 7)  # fewer draws than one resample holds: a row at a time
    assert add_intervals(report_from_outcomes(bench), 300, seed=5).intervals == whole
    monkeypatch.setattr(stats, "DRAWS", 100)  # a few resamples at a time, the last chunk short
    assert add_intervals(report_from_outcomes(bench), 300, seed=5).intervals == whole
