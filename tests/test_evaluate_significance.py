"""Bootstrap intervals and paired comparisons (cheems.analysis.compare) against hand-checked cases, a loop over
subset_metrics on the same draws, scipy.stats.bootstrap and hand-computed McNemar numbers."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import bootstrap

from cheems.analysis.compare import compare_details, mcnemar
from cheems.errors import InputError
from cheems.evaluate import evaluate_scores
from cheems.evaluate.bench import add_intervals, report_from_outcomes
from cheems.evaluate.details import Details
from cheems.evaluate.report import report_markdown
from cheems.metrics.cheemsbench import overall, subset_metrics
from cheems.metrics.outcomes import PairOutcome, PromptOutcome
from helpers import record


def prompt(pid: str, category: str, *correct: bool) -> PromptOutcome:
    return PromptOutcome(pid, category, [PairOutcome(f"a{i}", f"b{i}", c, 1, 1) for i, c in enumerate(correct)])


def random_bench(seed: int, flip: float = 0.0) -> dict[str, list[PromptOutcome]]:
    """Two subsets, several categories, 1-4 pairs a prompt, some prompts without pairs; ``flip`` changes answers."""
    rng = random.Random(seed)
    bench = {}
    for name, n in (("open", 23), ("human", 17)):
        prompts = []
        for i in range(n):
            pairs = 0 if i % 9 == 4 else rng.randint(1, 4)
            correct = [random.Random(f"{name}{i}{j}").random() < 0.6 for j in range(pairs)]
            correct = [c != (rng.random() < flip) for c in correct]
            prompts.append(prompt(f"{name}{i}", f"cat{i % 3 if name == 'open' else i % 2}", *correct))
        bench[name] = prompts
    return bench


def percentile(values: list[float], level: float) -> tuple[float, float]:
    low, high = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)


# ------------------------------------------------------------------ intervals


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


# ------------------------------------------------------------------ McNemar


def test_mcnemar_by_hand():
    m = mcnemar(10, 3, pairs=40)
    # exact: 2 * P(X <= 3), X ~ Bin(13, 1/2) = 2 * (1 + 13 + 78 + 286) / 2^13
    assert m.exact_p == pytest.approx(2 * 378 / 8192)
    # chi-square with continuity correction (|10 - 3| - 1)^2 / 13, one degree of freedom: p = erfc(sqrt(x / 2))
    assert m.chi2 == pytest.approx(36 / 13)
    assert m.chi2_p == pytest.approx(math.erfc(math.sqrt(36 / 13 / 2)))
    assert (m.pairs, m.b, m.c) == (40, 10, 3)
    assert (mcnemar(4, 4, 9).exact_p, mcnemar(4, 4, 9).chi2, mcnemar(4, 4, 9).chi2_p) == (1.0, 0.0, 1.0)
    assert (mcnemar(0, 0, 9).exact_p, mcnemar(0, 0, 9).chi2_p) == (1.0, 1.0)


# ------------------------------------------------------------------ paired comparison


def details(bench: dict[str, list[PromptOutcome]], scorer: str, fingerprint: str = "bench1") -> Details:
    return Details(f"{scorer}.jsonl", scorer, fingerprint, bench)


def bootstrap_p(draws: list[float]) -> float:
    """The docstring's rule, written out."""
    r = len(draws)
    below, above = sum(d <= 0 for d in draws), sum(d >= 0 for d in draws)
    return min(1.0, 2 * min((below + 1) / (r + 1), (above + 1) / (r + 1)))


def test_paired_bootstrap_equals_subset_metrics_on_shared_draws():
    a, b = random_bench(3), random_bench(3, flip=0.3)
    resamples, seed, level = 400, 5, 0.9
    result = compare_details(details(a, "A"), details(b, "B"), resamples, seed, level)
    rng = np.random.default_rng(seed)  # subsets by name, prompts (with pairs) by id; one draw for both
    deltas: dict[str, list[list[float]]] = {}
    for name in sorted(a):
        sa, sb = ([o for o in sorted(x[name], key=lambda o: o.prompt_id) if o.pairs] for x in (a, b))
        picks = rng.integers(0, len(sa), size=(resamples, len(sa)))
        deltas[name] = [[subset_metrics([s[i] for i in row]) for s in (sa, sb)] for row in picks]
    for name, draws in deltas.items():
        for metric in ("accuracy", "exact_match"):
            d = result.subsets[name][metric]
            values = [getattr(ma, metric) - getattr(mb, metric) for ma, mb in draws]
            full = [getattr(subset_metrics(x[name]), metric) for x in (a, b)]
            assert (d.a, d.b, d.delta) == pytest.approx((*full, full[0] - full[1]))
            assert d.ci == pytest.approx(percentile(values, level))
            assert d.p_value == pytest.approx(bootstrap_p(values))
    totals = [
        overall({n: deltas[n][r][0] for n in deltas}) - overall({n: deltas[n][r][1] for n in deltas})
        for r in range(resamples)
    ]
    assert result.overall.ci == pytest.approx(percentile(totals, level))
    assert result.overall.p_value == pytest.approx(bootstrap_p(totals))
    swapped = compare_details(details(b, "B"), details(a, "A"), resamples, seed, level)
    assert swapped.overall.delta == pytest.approx(-result.overall.delta)
    assert swapped.overall.ci == pytest.approx((-result.overall.ci[1], -result.overall.ci[0]))
    assert swapped.overall.p_value == pytest.approx(result.overall.p_value)
    assert (swapped.mcnemar.b, swapped.mcnemar.c) == (result.mcnemar.c, result.mcnemar.b)


def test_a_scorer_right_everywhere_against_one_wrong_everywhere():
    right = {"s": [prompt("p1", "X", True, True), prompt("p2", "Y", True), prompt("p3", "X", True)]}
    wrong = {"s": [prompt("p1", "X", False, False), prompt("p2", "Y", False), prompt("p3", "X", False)]}
    result = compare_details(details(right, "A"), details(wrong, "B"), resamples=99, seed=0)
    for d in (result.overall, result.subsets["s"]["accuracy"], result.subsets["s"]["exact_match"]):
        assert (d.a, d.b, d.delta, d.ci) == (1.0, 0.0, 1.0, (1.0, 1.0))
        assert d.p_value == pytest.approx(2 / 100)  # no resample is <= 0: (0 + 1) / (99 + 1), two-sided
    assert (result.mcnemar.pairs, result.mcnemar.b, result.mcnemar.c) == (4, 4, 0)
    assert result.mcnemar.exact_p == pytest.approx(2 / 16)
    same = compare_details(details(right, "A"), details(right, "A2"), resamples=99, seed=0)
    assert (same.overall.delta, same.overall.ci, same.overall.p_value) == (0.0, (0.0, 0.0), 1.0)


def test_details_of_different_benches_are_refused_naming_both_files():
    bench = random_bench(4)
    with pytest.raises(InputError) as e:
        compare_details(details(bench, "A"), details(bench, "B", fingerprint="other"))
    assert e.value.path == "A.jsonl, B.jsonl" and "different benches" in e.value.message
    fewer = {name: prompts[1:] for name, prompts in bench.items()}
    with pytest.raises(InputError) as e:
        compare_details(details(bench, "A"), details(fewer, "B"))
    assert e.value.path == "A.jsonl, B.jsonl"
    assert "not the same pairs" in e.value.message and "prompt 'human0'" in e.value.message
    assert "only in A.jsonl" in e.value.message


def test_intervals_do_not_depend_on_how_many_draws_are_counted_at_a_time(monkeypatch):
    import cheems.metrics.bootstrap as stats  # where every bootstrap draws its rows (draw_rows)

    bench = random_bench(4)
    whole = add_intervals(report_from_outcomes(bench), 300, seed=5).intervals
    monkeypatch.setattr(stats, "DRAWS", 7)  # fewer draws than one resample holds: a row at a time
    assert add_intervals(report_from_outcomes(bench), 300, seed=5).intervals == whole
    monkeypatch.setattr(stats, "DRAWS", 100)  # a few resamples at a time, the last chunk short
    assert add_intervals(report_from_outcomes(bench), 300, seed=5).intervals == whole


def test_a_difference_zero_in_exact_arithmetic_counts_on_both_sides_of_zero():
    """Means of the same draw summed in another order can differ by ±3e-17: that is no difference, not a win."""
    from cheems.analysis.compare import _difference

    noise = np.array([3e-17, -3e-17, 1.1e-16, 0.0] * 250)
    d = _difference(0.1 + 0.2, 0.3, noise, 0.95)  # 0.1 + 0.2 - 0.3 = 5.6e-17
    assert d.delta == 0.0 and d.p_value == 1.0 and d.ci == (0.0, 0.0)
    one_sided = _difference(0.5, 0.25, np.full(1000, 0.25), 0.95)  # a real difference keeps its sign
    assert one_sided.delta == 0.25 and one_sided.p_value == pytest.approx(2 / 1001)
