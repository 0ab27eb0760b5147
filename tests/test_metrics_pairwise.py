"""The pairwise metric (cheems.metrics.pairwise) on tests/data/judgebench.jsonl, scored by the length baseline
(score = characters), against numbers worked out by hand from the lengths (tests/test_data_bench_importers.py's
``test_fixture_lengths`` pins them); RMB's pairwise set is in tests/test_metrics_rmb.py.

JudgeBench (A vs B, label names the better): mmlu-pro-law 20>10 A>B right; livebench-math 15 vs 7 B>A
wrong; livebench-reasoning 5 vs 9 B>A right; mmlu-pro-biology 12 vs 11 A>B right -> categories
livebench-math 0, livebench-reasoning 1, mmlu-pro 1; mean 2/3, pooled 3/4.
"""

from __future__ import annotations

import pytest

from helpers import length_report


def test_judgebench_pairs_for_a_scorer(imported):
    sub = length_report("pairwise", imported["judgebench"])["subsets"]["judgebench"]
    assert {k: v["accuracy"] for k, v in sub["categories"].items()} == {
        "livebench-math": 0.0,
        "livebench-reasoning": 1.0,
        "mmlu-pro": 1.0,
    }
    assert sub["accuracy"] == pytest.approx(2 / 3) and sub["pooled_accuracy"] == 0.75
