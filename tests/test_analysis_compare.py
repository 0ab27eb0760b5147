"""Paired comparisons of two runs (cheems.analysis.compare): McNemar against hand-computed numbers, the paired
bootstrap against a loop over subset_metrics on the shared draws."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cheems.analysis.compare import compare_details, mcnemar
from cheems.errors import InputError
from cheems.evaluate.details import Details
from cheems.metrics.cheemsbench import overall, subset_metrics
from cheems.metrics.outcomes import PromptOutcome
from helpers import percentile, prompt, random_bench

# ---------------------------------------------------------------- McNemar


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


# ---------------------------------------------------------------- paired comparison


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


def test_a_difference_zero_in_exact_arithmetic_counts_on_both_sides_of_zero():
    """Means of the same draw summed in another order can differ by ±3e-17: that is no difference, not a win."""
    from cheems.analysis.compare import _difference

    noise = np.array([3e-17, -3e-17, 1.1e-16, 0.0] * 250)
    d = _difference(0.1 + 0.2, 0.3, noise, 0.95)  # 0.1 + 0.2 - 0.3 = 5.6e-17
    assert d.delta == 0.0 and d.p_value == 1.0 and d.ci == (0.0, 0.0)
    one_sided = _difference(0.5, 0.25, np.full(1000, 0.25), 0.95)  # a real difference keeps its sign
    assert one_sided.delta == 0.25 and one_sided.p_value == pytest.approx(2 / 1001)
