"""When a pair is right (cheems.metrics.metric_registry.pair_right): a scorer's as scored, a judge's by the vote
of its verdicts in each order shown."""

from __future__ import annotations

import pytest

from cheems.metrics.metric_registry import pair_right
from cheems.metrics.outcomes import PairOutcome, ShownVerdict


@pytest.mark.parametrize(
    ("labels", "right"),
    [
        (["A", "B"], True),  # chosen shown first, then second: both name it
        (["A", "C"], True),  # right once, tie once: one vote for, none against (JudgeBench)
        (["A", None], True),  # a parse failure counts for neither side
        (["A", "A"], False),  # always the first shown: inconsistent, wrong
        (["C", "C"], False),
        (["B", None], False),
        (["A"], True),  # one order
        (["C"], False),
    ],
)
def test_judge_pair_by_vote(labels, right):
    firsts = ["c", "r"]  # the first verdict shows the chosen one first, the second the rejected one
    verdicts = [ShownVerdict(first, label) for first, label in zip(firsts, labels)]
    pair = PairOutcome("c", "r", False, 1, 1, verdicts=verdicts)
    assert pair_right(pair) is right


def test_scorer_pair_is_as_scored():
    assert pair_right(PairOutcome("c", "r", True, 1, 1, 2.0, 1.0))
    assert not pair_right(PairOutcome("c", "r", False, 1, 1, 1.0, 1.0))
