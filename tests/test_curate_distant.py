"""Distant supervision: the keep rules by hand, sources, errors, acyclicity, conflict ratios, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cheems.cli.main import app
from cheems.curate.distant import distant_supervision, is_acyclic, keep_comparison
from cheems.data.io import write_records, write_scores
from cheems.data.schema import Comparison, Record
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.ranking.resolve import agrees, resolve_record


def rec(n: int, comparisons, pid: str = "p", rank=None) -> Record:
    """Responses r1..rn; comparisons as (a, b, label) (source judge) or (a, b, label, source)."""
    return Record.model_validate(
        {
            "id": pid,
            "input": "问题",
            "responses": [{"id": f"r{i}", "content": "回答" * i} for i in range(1, n + 1)],
            "comparisons": [
                {"a": c[0], "b": c[1], "label": c[2], "source": c[3] if len(c) > 3 else "judge"} for c in comparisons
            ],
            "rank": rank,
        }
    )


def scores_for(pid: str, values: dict[str, float]) -> dict[tuple[str, str], float]:
    return {(pid, rid): s for rid, s in values.items()}


@pytest.mark.parametrize(
    "label,sa,sb,margin,kept",
    [
        ("a", 2.0, 1.0, 0.0, True),  # the RM agrees
        ("a", 1.0, 1.0, 0.0, False),  # a score tie is disagreement at margin 0
        ("a", 1.0, 2.0, 0.0, False),
        ("b", 1.0, 2.0, 0.0, True),
        ("b", 2.0, 1.0, 0.0, False),
        ("a", 1.0, 1.4, 0.5, True),  # disagrees by 0.4 < 0.5: kept
        ("a", 1.0, 1.5, 0.5, False),  # disagrees by 0.5 >= 0.5: dropped (s(w) - s(l) > -margin fails)
        ("b", 1.6, 1.0, 0.5, False),
        ("tie", 1.0, 1.0, 0.0, True),  # a tie is kept only when the scores are equal ...
        ("tie", 1.0, 1.1, 0.0, False),
        ("tie", 1.0, 1.5, 0.5, True),  # ... or within the margin
        ("tie", 1.6, 1.0, 0.5, False),
    ],
)
def test_keep_rule(label, sa, sb, margin, kept):
    assert keep_comparison(Comparison(a="x", b="y", label=label), sa, sb, margin) is kept


def test_hand_example_counts_ranks_and_conflict_ratios():
    # judge: r1>r2 (RM agrees), r2>r3 (agrees), r3>r1 (disagrees: the cycle's wrong edge), r1=r3 (tie, dropped)
    r = rec(3, [("r1", "r2", "a"), ("r2", "r3", "a"), ("r3", "r1", "a"), ("r1", "r3", "tie")])
    out, report = distant_supervision([r], scores_for("p", {"r1": 3.0, "r2": 2.0, "r3": 1.0}))
    assert [(c.a, c.b, c.label) for c in out[0].comparisons] == [("r1", "r2", "a"), ("r2", "r3", "a")]
    assert out[0].rank == {"r1": 1, "r2": 2, "r3": 3}
    assert report.comparisons_before == 4 and report.comparisons_kept == 2
    assert report.by_source["judge"].dropped == 2
    # before: the cycle and the tie merge r1..r3 into one rank; all 3 strict comparisons conflict, the tie agrees
    assert report.conflicts_before.conflicts == 3 and report.conflicts_before.conflict_ratio == 0.75
    assert report.conflicts_after.conflict_ratio == 0.0
    assert report.records_cyclic == 0 and report.records_emptied == 0


def test_human_comparisons_pass_untouched_unless_all_sources():
    r = rec(2, [("r1", "r2", "a", "human"), ("r1", "r2", "b", "judge")])
    s = scores_for("p", {"r1": 0.0, "r2": 1.0})
    out, report = distant_supervision([r], s)
    assert [(c.label, c.source) for c in out[0].comparisons] == [("a", "human"), ("b", "judge")]
    assert report.by_source["human"].kept == 1 and report.by_source["judge"].kept == 1
    out, report = distant_supervision([r], s, sources=None)
    assert [(c.label, c.source) for c in out[0].comparisons] == [("b", "judge")]
    assert report.to_dict()["sources"] == "all"


def test_untouched_human_comparisons_can_leave_a_cycle_which_is_reported_and_resolved():
    r = rec(3, [("r1", "r2", "a", "human"), ("r2", "r3", "a", "human"), ("r3", "r1", "a", "judge")])
    out, report = distant_supervision([r], scores_for("p", {"r1": 0.0, "r2": 0.5, "r3": 1.0}))
    assert len(out[0].comparisons) == 3 and report.records_cyclic == 1 and report.records_cyclic_examples == ["p"]
    assert out[0].rank == {"r1": 1, "r2": 1, "r3": 1}  # Algorithm 1 merges the cycle


def test_a_margin_can_leave_a_cycle():
    r = rec(3, [("r1", "r2", "a"), ("r2", "r3", "a"), ("r3", "r1", "a")])
    s = scores_for("p", {"r1": 1.0, "r2": 1.1, "r3": 1.2})
    assert distant_supervision([r], s, margin=1.0)[1].records_cyclic == 1
    assert distant_supervision([r], s, margin=0.0)[1].records_cyclic == 0


def test_record_with_no_comparison_left_is_dropped_and_counted():
    r = rec(2, [("r1", "r2", "a")], pid="gone")
    keep = rec(2, [("r1", "r2", "a")], pid="kept")
    rank_only = rec(2, [], pid="rank-only", rank={"r1": 1, "r2": 2})
    scores = scores_for("gone", {"r1": 0.0, "r2": 1.0}) | scores_for("kept", {"r1": 1.0, "r2": 0.0})
    out, report = distant_supervision([r, keep, rank_only], scores)
    assert [x.id for x in out] == ["kept", "rank-only"]
    assert report.records_emptied == 1 and report.records_emptied_examples == ["gone"]
    assert out[1].rank == {"r1": 1, "r2": 2}


def test_unchanged_record_keeps_its_rank():
    r = rec(2, [("r1", "r2", "a", "human")], rank={"r1": 1, "r2": 2})
    out, _ = distant_supervision([r], {})
    assert out[0] is r


def test_missing_score_names_prompt_response_and_file():
    r = rec(2, [("r1", "r2", "a")])
    with pytest.raises(InputError) as e:
        distant_supervision([r], scores_for("p", {"r1": 1.0}), scores_path="rm.jsonl")
    assert str(e.value).startswith("rm.jsonl: no score for prompt 'p' response 'r2'")
    with pytest.raises(InputError, match="NaN"):
        distant_supervision([r], scores_for("p", {"r1": 1.0, "r2": float("nan")}))
    with pytest.raises(InputError, match="margin"):
        distant_supervision([r], scores_for("p", {"r1": 1.0, "r2": 0.0}), margin=-1)


@st.composite
def judged_records(draw):
    records, scores = [], {}
    for p in range(draw(st.integers(1, 4))):
        n = draw(st.integers(2, 5))
        ids = [f"r{i}" for i in range(1, n + 1)]
        comps = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(ids),
                    st.sampled_from(ids),
                    st.sampled_from(["a", "b", "tie"]),
                    st.sampled_from(["judge", "judge", "human"]),
                ),
                max_size=10,
            )
        )
        records.append(rec(n, comps, pid=f"p{p}"))
        for rid in ids:
            scores[(f"p{p}", rid)] = draw(st.sampled_from([0.0, 0.5, 1.0, 2.0]))  # few values: score ties happen
    return records, scores


@settings(max_examples=80, deadline=None)
@given(judged_records())
def test_property_margin_zero(data):
    records, scores = data
    out, report = distant_supervision(records, scores)
    by_id = {r.id: r for r in records}
    for new in out:
        old = by_id[new.id]
        assert [c for c in new.comparisons if c.source == "human"] == [
            c for c in old.comparisons if c.source == "human"
        ]
        for c in new.comparisons:
            if c.source == "judge" and c.label != "tie":
                w, l = c.winner_loser()
                assert scores[(new.id, w)] > scores[(new.id, l)]
        if all(c.source == "judge" for c in new.comparisons):
            assert is_acyclic(new)
        if old.comparisons:  # (a record without comparisons passes as it is)
            assert new.rank == resolve_record(new).rank
    assert report.comparisons_before == sum(len(r.comparisons) for r in records)
    assert report.comparisons_kept == sum(len(r.comparisons) for r in out)  # emptied records kept none
    judge_only = [r for r in out if all(c.source == "judge" for c in r.comparisons)]
    assert all(agrees(c, r.rank) for r in judge_only for c in r.comparisons if c.label != "tie" and c.a != c.b)


# ---------------------------------------------------------------- CLI


def _files(tmp_path: Path) -> tuple[Path, Path]:
    records = [rec(3, [("r1", "r2", "a"), ("r2", "r3", "a"), ("r3", "r1", "a"), ("r1", "r3", "a", "human")], pid="p")]
    write_records(tmp_path / "in.jsonl", records)
    write_scores(tmp_path / "s.jsonl", scores_for("p", {"r1": 3.0, "r2": 2.0, "r3": 1.0}))
    return tmp_path / "in.jsonl", tmp_path / "s.jsonl"


def test_cli_distant(tmp_path):
    src, scores = _files(tmp_path)
    out, rep = tmp_path / "out.jsonl", tmp_path / "rep.json"
    result = CliRunner().invoke(
        app,
        ["curate", "distant", str(src), "--scores", str(scores), "-o", str(out), "--report-json", str(rep)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "conflict ratio" in result.output
    record = read_records(out).records[0]
    assert len(record.comparisons) == 3 and record.rank == {"r1": 1, "r2": 2, "r3": 3}
    report = json.loads(rep.read_text(encoding="utf-8"))
    assert report["by_source"] == {
        "human": {"before": 1, "kept": 1, "dropped": 0},
        "judge": {"before": 3, "kept": 2, "dropped": 1},
    }
    assert report["conflict_ratio_after"] == 0.0 and report["conflict_ratio_before"] > 0


def test_cli_distant_missing_score_is_one_line(tmp_path):
    src, _ = _files(tmp_path)
    partial = tmp_path / "partial.jsonl"
    write_scores(partial, scores_for("p", {"r1": 3.0, "r2": 2.0}))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cheems",
            "curate",
            "distant",
            str(src),
            "--scores",
            str(partial),
            "-o",
            str(tmp_path / "o.jsonl"),
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "COLUMNS": "300"},
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{partial}: no score for prompt 'p' response 'r3'" in lines[0]
