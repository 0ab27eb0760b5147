"""Algorithm 1: preference graph, merged cycles, layered ranks, conflict ratio."""

from __future__ import annotations

import itertools

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from cheems.ranking import resolve_file_records, resolve_record
from cheems.ranking.resolve import agrees
from helpers import record


def test_total_order_gives_consecutive_ranks_and_no_conflict():
    res = resolve_record(record(3, [("r1", "r2", "a"), ("r2", "r3", "a")]))
    assert res.rank == {"r1": 1, "r2": 2, "r3": 3}
    assert (res.comparisons, res.conflicts) == (2, 0)


def test_label_b_means_second_wins():
    res = resolve_record(record(2, [("r1", "r2", "b")]))
    assert res.rank == {"r2": 1, "r1": 2}


def test_cycle_is_merged_into_one_rank_and_counts_as_conflict():
    # r1>r2>r3>r1 is a cycle; r4 loses to r3. The cycle collapses to one super-node on top.
    res = resolve_record(record(4, [("r1", "r2", "a"), ("r2", "r3", "a"), ("r3", "r1", "a"), ("r3", "r4", "a")]))
    assert res.rank == {"r1": 1, "r2": 1, "r3": 1, "r4": 2}
    assert res.conflicts == 3  # the three cycle edges now join equal ranks


def test_tie_shares_rank_and_agrees():
    res = resolve_record(record(3, [("r1", "r2", "tie"), ("r2", "r3", "a")]))
    assert res.rank == {"r1": 1, "r2": 1, "r3": 2}
    assert res.conflicts == 0


def test_tie_merges_with_cycle_members_downstream():
    # r1 = r2 tie, r2 > r3, r3 > r1: all one component.
    res = resolve_record(record(3, [("r1", "r2", "tie"), ("r2", "r3", "a"), ("r3", "r1", "a")]))
    assert set(res.rank.values()) == {1}
    assert res.conflicts == 2  # the tie agrees, both strict comparisons disagree


def test_layers_follow_longest_chain_not_shortest():
    # r1>r2, r2>r3, r1>r3: r3 is in layer 3 although r1 beats it directly.
    res = resolve_record(record(3, [("r1", "r3", "a"), ("r1", "r2", "a"), ("r2", "r3", "a")]))
    assert res.rank == {"r1": 1, "r2": 2, "r3": 3}


def test_disconnected_responses_land_in_top_layer_and_are_reported():
    res = resolve_record(record(4, [("r1", "r2", "a")]))
    assert res.rank == {"r1": 1, "r2": 2, "r3": 1, "r4": 1}
    assert res.unmentioned == ["r3", "r4"]


def test_two_components_ranked_independently_by_layer():
    res = resolve_record(record(4, [("r1", "r2", "a"), ("r3", "r4", "b")]))
    assert res.rank == {"r1": 1, "r2": 2, "r4": 1, "r3": 2}


def test_self_comparison_does_not_move_ranks_but_strict_one_conflicts():
    res = resolve_record(record(2, [("r1", "r1", "a"), ("r1", "r2", "a"), ("r2", "r2", "tie")]))
    assert res.rank == {"r1": 1, "r2": 2}
    assert (res.comparisons, res.conflicts) == (3, 1)


def test_no_comparisons_puts_everything_at_rank_one():
    assert resolve_record(record(3)).rank == {"r1": 1, "r2": 1, "r3": 1}


def test_file_stats_pool_over_records_and_keep_existing_rank():
    recs = [
        record(3, [("r1", "r2", "a"), ("r2", "r3", "a"), ("r3", "r1", "a")], pid="a"),
        record(2, [("r1", "r2", "a")], pid="b"),
        record(2, rank={"r1": 2, "r2": 1}, pid="c"),
    ]
    out, stats, warnings = resolve_file_records(recs)
    assert stats.to_dict() == {"records": 3, "comparisons": 4, "conflicts": 3, "conflict_ratio": 0.75}
    assert out[2].rank == {"r1": 2, "r2": 1}
    assert warnings == []


labels = st.sampled_from(["a", "b", "tie"])


@st.composite
def random_records(draw):
    n = draw(st.integers(1, 6))
    ids = [f"r{i}" for i in range(1, n + 1)]
    comps = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids), labels), max_size=15))
    return record(n, comps)


def brute_force_ranks(rec) -> dict[str, int]:
    """The paper's loop literally: merge any cycle into a super-node until acyclic, then peel layers."""
    groups = {r.id: frozenset([r.id]) for r in rec.responses}
    edges = set()
    for c in rec.comparisons:
        if c.a != c.b:
            edges |= {(c.a, c.b), (c.b, c.a)} if c.label == "tie" else {c.winner_loser()}
    while True:
        g = nx.DiGraph()
        g.add_nodes_from(set(groups.values()))
        g.add_edges_from((groups[u], groups[v]) for u, v in edges if groups[u] != groups[v])
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            break
        merged = frozenset().union(*(u for u, _ in cycle))
        groups = {rid: (merged if grp <= merged else grp) for rid, grp in groups.items()}
    rank, layer = {}, 1
    while g.number_of_nodes():
        top = [n for n in g.nodes if g.in_degree(n) == 0]
        for node in top:
            for rid in node:
                rank[rid] = layer
        g.remove_nodes_from(top)
        layer += 1
    return rank


@settings(max_examples=300, deadline=None)
@given(random_records())
def test_matches_literal_cycle_merging(rec):
    res = resolve_record(rec)
    assert res.rank == brute_force_ranks(rec)
    assert sorted(set(res.rank.values())) == list(range(1, max(res.rank.values()) + 1))  # consecutive from 1
    assert res.conflicts == sum(not agrees(c, res.rank) for c in rec.comparisons)


@settings(max_examples=200, deadline=None)
@given(st.permutations(["r1", "r2", "r3", "r4", "r5"]))
def test_consistent_comparisons_never_conflict(order):
    comps = [(order[i], order[j], "a") for i, j in itertools.combinations(range(5), 2)]
    res = resolve_record(record(5, comps))
    assert res.conflicts == 0
    assert [res.rank[r] for r in order] == [1, 2, 3, 4, 5]


def test_resolved_file_is_the_same_bytes_whatever_the_hash_seed(tmp_path):
    """A cycle's members come out of a set; the written ranks must not follow the hash seed's order."""
    import json
    import os
    import subprocess
    import sys

    rows = [
        {
            "id": f"p{k}",
            "input": "问题",
            "responses": [{"id": f"r{i}", "content": f"回答{i}"} for i in range(6)],
            # a 6-cycle plus a tie: all six responses merge into one layer
            "comparisons": [{"a": f"r{i}", "b": f"r{(i + 1) % 6}", "label": "a"} for i in range(6)],
        }
        for k in range(5)
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    outputs = []
    for seed in ("1", "2", "3"):
        out = tmp_path / f"out{seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "cheems", "resolve", str(src), "-o", str(out)],
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    assert list(json.loads(outputs[0].splitlines()[0])["rank"]) == [f"r{i}" for i in range(6)]


def test_resolve_file_writes_the_ranks_and_warns_of_an_unmentioned_response(tmp_path, monkeypatch, capsys):
    """``cheems.resolve_file`` (what ``cheems resolve`` runs) writes the resolved records and the statistics,
    and returns one warning per prompt with a response no comparison mentions, which the command prints."""
    import json

    from cheems.ranking.resolve import resolve_file
    from helpers import run_main, write_jsonl

    source = write_jsonl(tmp_path / "in.jsonl", [record(3, [("r1", "r2", "a")]).model_dump(mode="json")])
    stats, warnings, issues = resolve_file(source, tmp_path / "out.jsonl", tmp_path / "stats.json")
    assert [str(w) for w in warnings] == [
        "prompt 'p': no comparison mentions r3; placed at rank 1 (Algorithm 1)"
    ] and not issues.skipped
    ranks = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))["rank"]
    assert ranks == {"r1": 1, "r2": 2, "r3": 1}
    assert json.loads((tmp_path / "stats.json").read_text(encoding="utf-8")) == stats.to_dict()
    proc = run_main("resolve", source, "-o", tmp_path / "cli.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and proc.stderr.splitlines() == [f"warning {warnings[0]}"], proc.stderr
    assert (tmp_path / "cli.jsonl").read_bytes() == (tmp_path / "out.jsonl").read_bytes()
