"""Which (chosen, rejected) pairs a record trains on."""

from __future__ import annotations

from cheems.ranking import training_pairs
from helpers import record


def test_rank_only_trains_on_every_implied_pair():
    rec = record(4, rank={"r1": 2, "r2": 1, "r3": 2, "r4": 3})
    assert training_pairs(rec) == [("r2", "r1"), ("r1", "r4"), ("r2", "r3"), ("r2", "r4"), ("r3", "r4")]


def test_rank_only_equal_ranks_give_no_pair():
    assert training_pairs(record(3, rank={"r1": 1, "r2": 1, "r3": 1})) == []


def test_neither_comparisons_nor_rank_gives_nothing():
    assert training_pairs(record(3)) == []


def test_comparisons_only_are_resolved_first():
    rec = record(3, [("r1", "r2", "a"), ("r3", "r2", "b"), ("r1", "r3", "a")])
    assert training_pairs(rec) == [("r1", "r2"), ("r2", "r3"), ("r1", "r3")]


def test_comparisons_only_cycle_members_give_no_pair():
    # r1>r2>r3>r1 collapses to one rank; only r3>r4 survives.
    rec = record(4, [("r1", "r2", "a"), ("r2", "r3", "a"), ("r3", "r1", "a"), ("r3", "r4", "a")])
    assert training_pairs(rec) == [("r3", "r4")]


def test_ties_and_self_comparisons_give_no_pair():
    rec = record(3, [("r1", "r2", "tie"), ("r2", "r2", "a"), ("r2", "r3", "a")])
    assert training_pairs(rec) == [("r2", "r3")]


def test_with_rank_only_agreeing_comparisons_are_kept():
    rank = {"r1": 1, "r2": 2, "r3": 3}
    rec = record(3, [("r1", "r2", "a"), ("r3", "r2", "a"), ("r3", "r1", "b"), ("r2", "r3", "tie")], rank=rank)
    assert training_pairs(rec) == [("r1", "r2"), ("r1", "r3")]


def test_with_rank_the_curated_comparisons_are_respected_not_every_ranked_pair():
    rec = record(3, [("r1", "r3", "a")], rank={"r1": 1, "r2": 2, "r3": 3})
    assert training_pairs(rec) == [("r1", "r3")]


def test_duplicates_are_dropped_in_order_of_first_appearance():
    rec = record(
        3,
        [("r2", "r3", "a"), ("r1", "r2", "a"), ("r3", "r2", "b"), ("r1", "r2", "a")],
        rank={"r1": 1, "r2": 2, "r3": 3},
    )
    assert training_pairs(rec) == [("r2", "r3"), ("r1", "r2")]


def test_comparison_naming_an_unranked_response_is_dropped():
    rec = record(3, [("r1", "r3", "a"), ("r1", "r2", "a")], rank={"r1": 1, "r2": 2})
    assert training_pairs(rec) == [("r1", "r2")]


def test_empty_rank_counts_as_no_rank():
    rec = record(2, [("r1", "r2", "b")], rank={})
    assert training_pairs(rec) == [("r2", "r1")]
