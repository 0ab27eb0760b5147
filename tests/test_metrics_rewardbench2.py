"""RewardBench 2 (cheems.metrics.rewardbench2) on tests/data/rewardbench2.jsonl under ``--metric bon`` and
``--metric pairwise``, scored by the length baseline (score = characters), against numbers worked out by hand from
the lengths (tests/test_data_bench_importers.py's ``test_fixture_lengths`` pins them).

Correct vs incorrect: Factuality 30 vs 10 20 29 right, 20 vs 20 5 1 wrong (tie at the top); Math 15 vs 3 4 5
right; Ties 12 14 vs 11 2 right -> bon: categories 1/2, 1, 1, mean 5/6, pooled 3/4; pairwise: Factuality 5/6,
Math 1, Ties 1 -> mean 17/18, pooled 12/13.
"""

from __future__ import annotations

import pytest

from helpers import length_report


def test_rewardbench2_best_of_4_tie_at_the_top_is_wrong(imported):
    bon = length_report("bon", imported["rb2"])["subsets"]["rb2"]
    assert {k: v["accuracy"] for k, v in bon["categories"].items()} == {"Factuality": 0.5, "Math": 1.0, "Ties": 1.0}
    assert bon["accuracy"] == pytest.approx(5 / 6) and bon["pooled_accuracy"] == 0.75
    pairs = length_report("pairwise", imported["rb2"])["subsets"]["rb2"]
    assert pairs["accuracy"] == pytest.approx(17 / 18) and pairs["pooled_accuracy"] == pytest.approx(12 / 13)
