"""RMB's best-of-N metric (cheems.metrics.rmb, ``--metric bon``) and ``--metric pairwise`` on tests/data/rmb, scored
by the length baseline (score = characters), against numbers worked out by hand from the lengths
(tests/test_data_bench_importers.py's ``test_fixture_lengths`` pins them).

RMB pairwise: Helpfulness 20>10 right, 10=10 wrong; Harmlessness 30>8 right -> categories 1/2 and 1,
mean 3/4, pooled 2/3. RMB best-of-N: best 25 vs losers 10 30 5 (wrong, 2 of 3 pairs right), best 40 vs
39 1 (right) -> bon 1/2; pairwise 4/5.
"""

from __future__ import annotations

import pytest

from helpers import length_report


def test_pairwise_and_bon_on_rmb(imported):
    pairs = length_report("pairwise", imported["rmb_pairs"], imported["rmb_bon"])
    sub = pairs["subsets"]["rmb_pairs"]
    assert sub["categories"] == {
        "Harmlessness": {"accuracy": 1.0, "n_prompts": 1, "n_pairs": 1},
        "Helpfulness": {"accuracy": 0.5, "n_prompts": 2, "n_pairs": 2},
    }
    assert sub["accuracy"] == 0.75 and sub["pooled_accuracy"] == pytest.approx(2 / 3)
    assert pairs["subsets"]["rmb_bon"]["accuracy"] == pytest.approx(0.8)
    assert pairs["overall"] == pytest.approx((0.75 + 0.8) / 2)
    bon = length_report("bon", imported["rmb_bon"])["subsets"]["rmb_bon"]
    assert bon["accuracy"] == 0.5 and bon["pooled_accuracy"] == 0.5 and bon["n_pairs"] == 5
