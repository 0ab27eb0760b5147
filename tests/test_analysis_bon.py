"""Best-of-N picks and curves on hand-made pools (every expected number worked out by hand), and ``cheems bon``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cheems.analysis.bon import best_of_n, curve_sizes, quality
from cheems.data.schema import Record
from cheems.errors import InputError
from helpers import assert_user_error, run_main, write_jsonl


def rec(pid: str, ids: list[str], rank: dict | None = None, gold: list[float] | None = None) -> Record:
    """A pool record; ``gold`` puts a per-response ``score`` field on the responses."""
    responses = [{"id": r, "content": f"{pid}-{r}"} for r in ids]
    for response, value in zip(responses, gold or []):
        response["score"] = value
    return Record.model_validate({"id": pid, "input": "问题", "responses": responses, "rank": rank})


# Prompt a: gold ranks r2 = r4 (1) > r3 (2) > r1 (3); scores r1 = r3 = 5 (a tie the pool order breaks
# for r1, the worst), r2 = 2, r4 = 1. Qualities (share of the 3 others beaten, ties half):
# r1 0, r2 2.5/3, r3 1/3, r4 2.5/3; top tier r2, r4.
# Prompt b: y (rank 1) > x (rank 2); scores x = 1, y = 3. Qualities x 0, y 1.
POOL = [
    rec("a", ["r1", "r2", "r3", "r4"], rank={"r1": 3, "r2": 1, "r3": 2, "r4": 1}),
    rec("b", ["x", "y"], rank={"x": 2, "y": 1}),
    rec("c", ["c1", "c2", "c3"]),  # no gold: picked, left out of the curve
    rec("d", ["only"], rank={"only": 1}),  # one candidate: picked, left out of the curve
]
SCORES = {
    ("a", "r1"): 5.0,
    ("a", "r2"): 2.0,
    ("a", "r3"): 5.0,
    ("a", "r4"): 1.0,
    ("b", "x"): 1.0,
    ("b", "y"): 3.0,
    ("c", "c1"): 0.0,
    ("c", "c2"): 9.0,
    ("c", "c3"): 9.0,
    ("d", "only"): 4.0,
}


def test_quality_is_the_share_of_others_beaten_with_ties_half():
    assert quality([-3, -1, -2, -1]) == pytest.approx([0, 2.5 / 3, 1 / 3, 2.5 / 3])
    assert quality([1.0, 1.0]) == [0.5, 0.5]


def test_curve_sizes_are_powers_of_two_then_n():
    assert curve_sizes(1) == [1]
    assert curve_sizes(4) == [1, 2, 4]
    assert curve_sizes(10) == [1, 2, 4, 8, 10]


def test_picks_ties_and_counts():
    result = best_of_n(POOL, SCORES, scorer="s")
    # a: r1 and r3 tie at 5, r1 comes first in the pool; c: c2 and c3 tie at 9, c2 first.
    assert result.picks == {("a", "r1"): 5.0, ("b", "y"): 3.0, ("c", "c2"): 9.0, ("d", "only"): 4.0}
    assert result.n == 4  # the largest pool
    assert result.tied_picks == 2
    out = result.to_dict()
    assert out["gold"] == {"kind": "rank", "prompts": 2, "without_gold": 1, "single_candidate": 1}
    assert (out["prompts"], out["picked"], out["prompts_without_scores"], out["unscored_responses"]) == (4, 4, 0, 0)


def test_curve_by_hand():
    curve = best_of_n(POOL, SCORES).curve
    assert [p["n"] for p in curve] == [1, 2, 4]
    assert [p["prompts"] for p in curve] == [2, 2, 2]
    assert [p["fewer_candidates"] for p in curve] == [0, 0, 1]  # b has 2 < 4: it uses both
    # n = 1: both prompts get their first response (a: r1, quality 0; b: x, quality 0).
    assert curve[0]["quality"] == {"pick": 0.0, "oracle": 0.0, "random": 0.0}
    assert curve[0]["top_tier"] == {"pick": 0.0, "oracle": 0.0, "random": 0.0}
    # n = 2: a picks r1 (5 > 2): 0, oracle r2 5/6, random (0 + 5/6) / 2; b picks y: 1, oracle 1, random 1/2.
    assert curve[1]["quality"] == pytest.approx({"pick": 0.5, "oracle": 11 / 12, "random": 11 / 24})
    assert curve[1]["top_tier"] == pytest.approx({"pick": 0.5, "oracle": 1.0, "random": 0.5})
    # n = 4: a still picks r1 (the tie with r3), random = (0 + 5/6 + 1/3 + 5/6) / 4 = 1/2; b as at n = 2.
    assert curve[2]["quality"] == pytest.approx({"pick": 0.5, "oracle": 11 / 12, "random": 0.5})
    assert curve[2]["top_tier"] == pytest.approx({"pick": 0.5, "oracle": 1.0, "random": 0.5})
    assert "gold_score" not in curve[0]  # rank values are no quality scale


def test_n_larger_than_every_pool_uses_all():
    """N is the most candidates a prompt has: a larger n would only repeat the curve's last row."""
    result = best_of_n(POOL[1:2], SCORES, n=10**12)
    assert (result.n, result.n_asked) == (2, 10**12)
    assert [p["n"] for p in result.curve] == [1, 2]
    assert [p["quality"]["pick"] for p in result.curve] == [0.0, 1.0]
    assert result.picks == {("b", "y"): 3.0}
    assert result.to_dict()["n"] == 2 and result.to_dict()["n_asked"] == 10**12


def test_the_curve_stops_at_the_most_candidates_of_its_prompts():
    pool = [POOL[1], POOL[2]]  # b (2, gold) and c (3, no gold): N = 3, the curve stops at 2
    result = best_of_n(pool, SCORES, n=64)
    assert result.n == 3 and [p["n"] for p in result.curve] == [1, 2]


def test_scores_of_no_pool_response_are_counted():
    extra = {**SCORES, ("zz", "r1"): 1.0, ("a", "r9"): 2.0}
    result = best_of_n(POOL, extra)
    assert result.unmatched_scores == [("zz", "r1"), ("a", "r9")]
    assert result.to_dict()["unmatched_scores"] == 2
    assert best_of_n(POOL, SCORES).to_dict()["unmatched_scores"] == 0


def test_gold_scores_and_a_smaller_n():
    # Gold s1 0.2, s2 0.9, s3 0.5; the scorer prefers s1 (3) > s3 (2) > s2 (1).
    pool = [rec("s", ["s1", "s2", "s3"], gold=[0.2, 0.9, 0.5])]
    scores = {("s", "s1"): 3.0, ("s", "s2"): 1.0, ("s", "s3"): 2.0}
    full = best_of_n(pool, scores)
    assert full.gold_kind == "score"
    expected = [(0.2, 0.2, 0.2), (0.2, 0.9, 0.55), (0.2, 0.9, 1.6 / 3)]
    for point, (pick, oracle, mean) in zip(full.curve, expected):
        assert point["gold_score"] == pytest.approx({"pick": pick, "oracle": oracle, "random": mean})
    assert full.curve[2]["quality"] == pytest.approx({"pick": 0.0, "oracle": 1.0, "random": 0.5})
    # -n 2: only s1 and s2 are candidates, so the qualities are relative to those two.
    two = best_of_n(pool, scores, n=2)
    assert [p["n"] for p in two.curve] == [1, 2]
    assert two.curve[1]["quality"] == {"pick": 0.0, "oracle": 1.0, "random": 0.5}
    assert two.picks == {("s", "s1"): 3.0}


def test_mixed_gold_has_no_raw_score_curve():
    pool = [POOL[1], rec("s", ["s1", "s2"], gold=[1.0, 0.0])]
    scores = {**SCORES, ("s", "s1"): 0.0, ("s", "s2"): 1.0}
    result = best_of_n(pool, scores)
    assert result.gold_kind == "mixed"
    assert result.curve[-1]["quality"]["pick"] == 0.5  # b: y (1), s: s2 (0)
    assert "gold_score" not in result.curve[-1]


def test_partial_gold_is_no_gold():
    pool = [rec("p", ["r1", "r2"], rank={"r1": 1}), rec("q", ["r1", "r2"], gold=[1.0, "good"])]
    scores = {(p, r): 1.0 for p in "pq" for r in ("r1", "r2")}
    result = best_of_n(pool, scores)
    assert (result.without_gold, result.curve, result.gold_kind) == (2, [], None)


def test_missing_scores_are_no_candidates():
    pool = [
        rec("e", ["r1", "r2", "r3"], rank={"r1": 3, "r2": 1, "r3": 2}),
        rec("f", ["r1", "r2"], rank={"r1": 1, "r2": 2}),
    ]
    scores = {("e", "r1"): 1.0, ("e", "r3"): 2.0}  # e's best (r2) and all of f are unscored
    result = best_of_n(pool, scores)
    assert result.picks == {("e", "r3"): 2.0}
    assert (result.unscored_responses, result.without_scores) == (3, ["f"])
    # e's candidates are r1 and r3: r3 beats r1, so the pick is the best of the two.
    assert result.curve[-1]["quality"] == {"pick": 1.0, "oracle": 1.0, "random": 0.5}


def test_seeded_random_sample():
    ids = ["r1", "r2", "r3", "r4", "r5"]
    pool = [rec(f"p{k}", ids, rank={r: i + 1 for i, r in enumerate(ids)}) for k in range(6)]
    scores = {(f"p{k}", r): float(i) for k in range(6) for i, r in enumerate(ids)}  # r5 scores highest
    result = best_of_n(pool, scores, n=3, sample="random", seed=7)
    draws = [random.Random(f"7:p{k}").sample(range(5), 3) for k in range(6)]  # the documented draw
    assert result.picks == {(f"p{k}", ids[max(d)]): float(max(d)) for k, d in enumerate(draws)}
    assert best_of_n(pool, scores, n=3, sample="random", seed=7).to_dict() == result.to_dict()
    assert best_of_n(pool, scores, n=3, sample="random", seed=8).picks != result.picks
    # Top tier = the best-ranked of a prompt's 3 drawn; the scores run against the ranks, so a pick
    # among 2 or more is never top tier, and the best of the first n is top tier when it was drawn early.
    assert [p["top_tier"]["pick"] for p in result.curve] == pytest.approx(
        [sum(d[0] == min(d) for d in draws) / 6, 0, 0]
    )
    assert [p["top_tier"]["oracle"] for p in result.curve] == pytest.approx(
        [sum(min(d) in d[:n] for d in draws) / 6 for n in (1, 2, 3)]
    )


def test_ties_in_a_random_draw_go_to_the_earlier_drawn():
    ids = ["r1", "r2", "r3", "r4"]
    pool = [rec(f"p{k}", ids) for k in range(8)]
    scores = {(f"p{k}", r): 1.0 for k in range(8) for r in ids}  # all tied
    result = best_of_n(pool, scores, sample="random", seed=1)
    draws = [random.Random(f"1:p{k}").sample(range(4), 4) for k in range(8)]
    assert result.picks == {(f"p{k}", ids[d[0]]): 1.0 for k, d in enumerate(draws)}
    assert {d[0] for d in draws} != {0}  # the draw, not the pool order, decided
    assert result.tied_picks == 8


def test_bad_arguments():
    with pytest.raises(InputError, match="at least 1"):
        best_of_n(POOL, SCORES, n=0)
    with pytest.raises(InputError, match="unknown sample"):
        best_of_n(POOL, SCORES, sample="best")  # type: ignore[arg-type]


# ---------------------------------------------------------------- the command


@pytest.fixture
def pool_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "pool.jsonl", [r.to_json() for r in POOL])


def scores_file(tmp_path: Path, scores: dict) -> Path:
    rows = [{"prompt_id": p, "response_id": r, "score": s} for (p, r), s in scores.items()]
    return write_jsonl(tmp_path / "scores.jsonl", rows)


def test_cli_with_scores_file(tmp_path, pool_file, monkeypatch, capsys):
    scores = scores_file(tmp_path, SCORES)
    picks, out, png = tmp_path / "picks.jsonl", tmp_path / "bon.json", tmp_path / "curve.png"
    proc = run_main(
        "bon", pool_file, "--scores", scores, "-o", picks, "--output-json", out, "--plot", png,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in picks.read_text().splitlines()]
    assert rows == [
        {"prompt_id": "a", "response_id": "r1", "score": 5.0},
        {"prompt_id": "b", "response_id": "y", "score": 3.0},
        {"prompt_id": "c", "response_id": "c2", "score": 9.0},
        {"prompt_id": "d", "response_id": "only", "score": 4.0},
    ]
    report = json.loads(out.read_text())
    assert report["curve"] == json.loads(json.dumps(best_of_n(POOL, SCORES).curve))
    assert report["scorer"] == str(scores)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "4 picks" in proc.stdout and "gold (rank) for 2 prompts" in proc.stdout


def test_cli_scores_with_a_model_and_warns_about_missing_scores(tmp_path, pool_file, monkeypatch, capsys):
    picks = tmp_path / "picks.jsonl"
    proc = run_main(
        "bon", pool_file, "-m", "length", "-n", "2", "--cache", tmp_path / "c.sqlite", "-o", picks,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # every content is "{pid}-{id}": among the first 2, a: r1/r2 tie (5 chars) -> r1; b: x/y tie -> x; c: c1/c2 tie
    assert [json.loads(line)["response_id"] for line in picks.read_text().splitlines()] == ["r1", "x", "c1", "only"]
    partial = scores_file(tmp_path, {k: v for k, v in SCORES.items() if k[0] != "d"})
    proc = run_main("bon", pool_file, "--scores", partial, "-o", picks, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert "1 response(s) have no score" in proc.stderr and "first prompt without any: 'd'" in proc.stderr
    assert len(picks.read_text().splitlines()) == 3


def test_cli_warns_about_unknown_scores_and_a_large_n(tmp_path, pool_file, monkeypatch, capsys):
    """As eval does: scores of prompts not in the pool are counted in one warning, not silently ignored."""
    scores = scores_file(tmp_path, {**SCORES, ("zz", "r1"): 1.0, ("zz", "r2"): 2.0})
    picks, out = tmp_path / "picks.jsonl", tmp_path / "bon.json"
    proc = run_main(
        "bon", pool_file, "--scores", scores, "-o", picks, "--output-json", out, "-n", str(10**12),
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning")]
    assert len(warnings) == 2, proc.stderr
    assert f"{scores}: 2 score(s) match no response of the pool (first: prompt 'zz' response 'r1')" in warnings[1]
    assert "-n: 1000000000000 candidates asked for, but no prompt has more than 4 scored responses" in warnings[0]
    report = json.loads(out.read_text())
    assert (report["n"], report["n_asked"], report["unmatched_scores"]) == (4, 10**12, 2)
    assert [p["n"] for p in report["curve"]] == [1, 2, 4]
    assert "best-of-4 (first)" in proc.stdout


def test_cli_user_errors(tmp_path, pool_file, monkeypatch, capsys):
    scores = scores_file(tmp_path, SCORES)

    def bon(*args):
        return run_main("bon", pool_file, *args, monkeypatch=monkeypatch, capsys=capsys)

    assert_user_error(bon("--scores", scores), "needs -o PICKS.jsonl")
    assert_user_error(bon("-m", "length", "--scores", scores, "-o", tmp_path / "p.jsonl"), "exactly one of")
    assert_user_error(bon("--scores", scores, "-o", pool_file), "--output")
    assert_user_error(bon("--scores", scores, "-o", tmp_path / "p.jsonl", "--sample", "best"), "--sample")
    no_gold = write_jsonl(tmp_path / "nogold.jsonl", [POOL[2].to_json()])
    proc = run_main(
        "bon", no_gold, "--scores", scores, "-o", tmp_path / "p.jsonl", "--plot", tmp_path / "c.png",
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert_user_error(proc, "--plot needs gold quality")
    assert not (tmp_path / "p.jsonl").exists()


def test_demo_best_of_five_step(tmp_path, monkeypatch, capsys):
    proc = run_main(
        "demo", "-o", tmp_path / "demo", "--no-train", "-m", "length", monkeypatch=monkeypatch, capsys=capsys
    )
    assert proc.returncode == 0, proc.stderr
    assert "best-of-5 on the held-out human subset (16 prompts)" in proc.stdout
    assert "the hidden quality order is not shipped" in proc.stdout
    runs = json.loads((tmp_path / "demo" / "best-of-5.json").read_text())
    assert list(runs) == ["length"]
    # Independently: the length pick is the longest response (the first of equals); its quality is the share
    # of the other responses it outranks in the resolved ranks, ties half.
    records = [json.loads(line) for line in (tmp_path / "demo" / "bench" / "human.jsonl").read_text().splitlines()]
    qualities, top = [], []
    for r in records:
        pick = max(r["responses"], key=lambda x: len(x["content"]))["id"]
        others = [v for k, v in r["rank"].items() if k != pick]
        mine = r["rank"][pick]
        qualities.append((sum(mine < v for v in others) + 0.5 * sum(mine == v for v in others)) / len(others))
        top.append(mine == min(r["rank"].values()))
    last = runs["length"]["curve"][-1]
    assert (last["n"], last["prompts"]) == (5, 16)
    assert last["quality"]["pick"] == pytest.approx(sum(qualities) / 16)
    assert last["top_tier"]["pick"] == pytest.approx(sum(top) / 16)
