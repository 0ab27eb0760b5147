"""``cheems compare`` and ``cheems eval --details/--resamples/--bootstrap-seed``, through the real entry point in
this process (the ``cheems_cli`` fixture)."""

from __future__ import annotations

import json
import math

import pytest

from cheems.analysis.compare import compare_details
from cheems.evaluate import load_bench
from cheems.evaluate.details import bench_fingerprint, read_details
from helpers import assert_user_error, write_jsonl

# Two subsets; per prompt its category and each pair's outcome for scorer A and scorer B.
PROMPTS = {
    ("open", "p1", "代码"): ([True, True], [True, False]),
    ("open", "p2", "代码"): ([True], [False]),
    ("open", "p3", "数学"): ([False], [False]),
    ("human", "h1", "写作"): ([True], [False]),
    ("human", "h2", "写作"): ([True, False], [True, False]),
}


def details_rows(scorer: str, which: int, bench: str = "f" * 64) -> list[dict]:
    return [
        {
            "bench": bench,
            "scorer": scorer,
            "subset": subset,
            "prompt_id": pid,
            "category": category,
            "pairs": [
                {"chosen": f"r{i}", "rejected": f"r{i + 1}", "correct": c, "chosen_chars": 5, "rejected_chars": 3}
                for i, c in enumerate(outcomes[which])
            ],
        }
        for (subset, pid, category), outcomes in PROMPTS.items()
    ]


def test_compare_two_hand_made_details_files(tmp_path, cheems_cli):
    d1 = write_jsonl(tmp_path / "a.jsonl", details_rows("rm-good", 0))
    d2 = write_jsonl(tmp_path / "b.jsonl", details_rows("rm-bad", 1))
    out = tmp_path / "cmp.json"
    proc = cheems_cli("compare", d1, d2, "--resamples", 500, "--seed", 3, "--output-json", out)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text())
    # by hand: open A: 代码 acc 3/3 exact 2/2, 数学 0/0 -> 1/2, 1/2; B: 代码 acc 1/3 exact 0, 数学 0 -> 1/6, 0
    # human A: acc 2/3, exact 1/2; B: acc 1/3, exact 0. overall A = (1/2 + 7/12) / 2, B = (1/12 + 1/6) / 2
    expected = {
        ("open", "accuracy"): (1 / 2, 1 / 6),
        ("open", "exact_match"): (1 / 2, 0.0),
        ("human", "accuracy"): (2 / 3, 1 / 3),
        ("human", "exact_match"): (1 / 2, 0.0),
    }
    for (subset, metric), (a, b) in expected.items():
        d = got["subsets"][subset][metric]
        assert (d["a"], d["b"], d["delta"]) == pytest.approx((a, b, a - b))
        assert 0 <= d["ci"][0] <= d["delta"] <= d["ci"][1] <= 1  # A is never worse than B on a pair
    assert (got["overall"]["a"], got["overall"]["b"]) == pytest.approx((13 / 24, 1 / 8))
    assert got["overall"]["delta"] == pytest.approx(5 / 12)
    # McNemar: A right and B wrong on p1's second pair, p2 and h1; never the reverse
    m = got["mcnemar"]
    assert (m["pairs"], m["b"], m["c"]) == (7, 3, 0)
    assert m["exact_p"] == pytest.approx(2 / 8) and m["chi2"] == pytest.approx(4 / 3)
    assert m["chi2_p"] == pytest.approx(math.erfc(math.sqrt(2 / 3)))
    assert got["a"] == {"path": str(d1), "scorer": "rm-good"} and got["bench"] == "f" * 64
    assert got["bootstrap"] == {"resamples": 500, "seed": 3, "level": 0.95}
    assert got == json.loads(json.dumps(compare_details(read_details(d1), read_details(d2), 500, 3).to_dict()))
    p = got["overall"]["p_value"]
    assert p < 0.05 and "overall: rm-good is better than rm-bad by 0.417, significant at the 5% level" in proc.stdout
    assert "rm-good better" in proc.stdout and "McNemar on 7 pooled pairs" in proc.stdout


def test_compare_refuses_details_from_different_benches(tmp_path, cheems_cli):
    d1 = write_jsonl(tmp_path / "a.jsonl", details_rows("rm-good", 0))
    d2 = write_jsonl(tmp_path / "b.jsonl", details_rows("rm-bad", 1, bench="e" * 64))
    out = tmp_path / "cmp.json"
    proc = cheems_cli("compare", d1, d2, "--output-json", out)
    assert_user_error(proc, str(d1), str(d2), "different benches")
    assert not out.exists()
    d3 = write_jsonl(tmp_path / "c.jsonl", details_rows("rm-bad", 1)[:-1])
    assert_user_error(cheems_cli("compare", d1, d3), str(d1), str(d3), "not the same pairs", "prompt 'h2'")


BENCH = [
    {
        "id": f"q{i}",
        "input": "问题",
        "category": [["代码", "数学"][i % 2]],
        "responses": [{"id": f"r{j}", "content": "好" * (j * (i % 3 + 1))} for j in (1, 2, 3)],
        "rank": {"r1": 1, "r2": 2, "r3": 3} if i % 4 else {"r3": 1, "r1": 2, "r2": 2},
    }
    for i in range(8)
]


def test_eval_details_resamples_and_seed_then_compare(tmp_path, cheems_cli):
    bench = write_jsonl(tmp_path / "open.jsonl", BENCH)
    scores = write_jsonl(
        tmp_path / "s.jsonl",
        [{"prompt_id": f"q{i}", "response_id": f"r{j}", "score": (i + j) % 3} for i in range(8) for j in (1, 2, 3)],
    )
    d1, d2, j1, j0 = (tmp_path / n for n in ("d1.jsonl", "d2.jsonl", "j1.json", "j0.json"))
    run1 = cheems_cli("eval", "--bench", bench, "--scores", scores, "--details", d1, "--output-json", j1)
    run0 = cheems_cli("eval", "--bench", bench, "--scores", scores, "--resamples", 0, "--output-json", j0)
    run2 = cheems_cli(
        "eval", "--bench", bench, "--model", "length", "--no-cache", "--details", d2, "--bootstrap-seed", 9
    )
    assert run1.returncode == run0.returncode == run2.returncode == 0, run1.stderr + run0.stderr + run2.stderr
    with_ci, without = json.loads(j1.read_text()), json.loads(j0.read_text())
    assert with_ci["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95}
    low, high = with_ci["subsets"]["open"]["accuracy_ci"]
    assert low <= with_ci["subsets"]["open"]["accuracy"] <= high
    low, high = (f"{x:.2f}".removeprefix("0") for x in with_ci["overall_ci"])
    assert f"{with_ci['overall']:.3f} [{low},{high}]" in run1.stdout  # the terminal's compact interval
    assert "1000 resamples, seed 0" in run1.stdout and "seed 9" in run2.stdout and "bootstrap" not in run0.stdout
    for key in ("accuracy_ci", "exact_match_ci"):
        del with_ci["subsets"]["open"][key]
    del with_ci["overall_ci"], with_ci["bootstrap"]
    assert with_ci == without  # --resamples 0: no interval keys, the same numbers
    read = read_details(d1)
    assert (read.scorer, read.bench) == (str(scores), bench_fingerprint(load_bench([bench])))
    rows = {o.prompt_id: o for o in read.outcomes["open"]}
    assert set(rows) == {f"q{i}" for i in range(8)}
    # q1: ranks r1 > r2 > r3, scores (1+1)%3=2, 0, 1: r1>r2 right, r1>r3 right, r2>r3 wrong
    assert [(p.chosen, p.rejected, p.correct) for p in rows["q1"].pairs] == [
        ("r1", "r2", True),
        ("r1", "r3", True),
        ("r2", "r3", False),
    ]
    assert rows["q1"].pairs[0].chosen_score == 2.0 and rows["q1"].category == "数学"
    compared = cheems_cli("compare", d1, d2, "--resamples", 200)
    assert compared.returncode == 0, compared.stderr
    assert "McNemar on 22 pooled pairs" in compared.stdout
