"""Kendall τb (cheems.metrics.kendall) per prompt on KENDALL (tests/helpers.py), scored by the length baseline
(score = characters), and by hand.

k1 gold a1 b2 c2 d3, lengths 4 3 1 2 -> concordant ab ac ad bd, discordant cd, bc tied in gold
only: (4-1)/√(5·6); k2 two responses of equal length: scores tied, undefined; k3 all gold rank 1: undefined;
k4 gold 1 2 3, lengths 1 2 3: -1. Categories 写作 3/√30, 数学 -1; mean (3/√30 - 1)/2.
"""

from __future__ import annotations

import math

import pytest

from cheems.metrics.kendall import kendall_tau_b
from helpers import KENDALL, bench_file, length_report


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
