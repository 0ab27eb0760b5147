"""``cheems import`` of each benchmark's public layout, then ``cheems eval --metric``: the hand-checked numbers of
tests/test_metrics_*.py through the command, what leaderboard and correlate read back, a metric on the wrong bench
or an unknown metric or format as one line, and a judge asked in both orders on JudgeBench."""

from __future__ import annotations

import json
import math

import pytest

from cheems.analysis.leaderboard import read_eval_json
from fault_server import ANSWER, FakeJudgeServer
from helpers import (
    JUDGEBENCH,
    KENDALL,
    PPE_CORRECTNESS,
    PPE_PREFERENCE,
    RB2,
    REWARDBENCH,
    RMB,
    RMBENCH,
    assert_user_error,
    bench_file,
    records_by_id,
    run_main,
    write_jsonl,
)


def test_cli_import_then_eval_each_metric(tmp_path, monkeypatch, capsys):
    def cheems(*args):
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        return proc

    rm = tmp_path / "rm.jsonl"
    assert "wrote 3 records" in cheems("import", "rmbench", RMBENCH, "-o", rm).stdout
    out = tmp_path / "rm.json"
    proc = cheems("eval", "--bench", rm, "--model", "length", "--no-cache", "--metric", "rmbench", "--output-json", out)
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["overall"] == pytest.approx(19 / 36) and got["subsets"]["rm"]["normal"] == pytest.approx(7 / 12)
    # leaderboard and correlate read it: no prompt has all 9 style pairs right, 27 pairs; with its interval
    read = read_eval_json(out)
    assert read["subsets"]["rm"] == {
        "accuracy": pytest.approx(19 / 36),
        "exact_match": 0.0,
        "n_prompts": 3,
        "n_pairs": 27,
        "accuracy_ci": got["subsets"]["rm"]["accuracy_ci"],
    }
    low, high = got["subsets"]["rm"]["accuracy_ci"]
    assert low < 19 / 36 < high and read["overall_ci"] == [low, high]  # one subset: overall is its accuracy
    assert got["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95}
    assert "RM-Bench metrics: length" in proc.stdout and "0.528" in proc.stdout and "0.583" in proc.stdout
    assert "detailed_markdown" in proc.stdout  # the style matrix

    jb = tmp_path / "jb.jsonl"
    cheems("import", "judgebench", JUDGEBENCH, "-o", jb)
    proc = cheems(
        "eval", "--bench", jb, "--model", "length", "--no-cache", "--metric", "pairwise", "--output-json", out
    )
    got = json.loads(out.read_text(encoding="utf-8"))["subsets"]["jb"]
    assert got["pooled_accuracy"] == 0.75 and got["exact_match"] == pytest.approx(2 / 3)  # one pair per prompt
    assert "pairwise metrics" in proc.stdout and "0.667" in proc.stdout and "0.750" in proc.stdout

    bon = tmp_path / "bon.jsonl"
    cheems("import", "rmb", RMB / "BoN_set", "-o", bon)
    cheems("eval", "--bench", bon, "--model", "length", "--no-cache", "--metric", "bon", "--output-json", out)
    assert json.loads(out.read_text(encoding="utf-8"))["overall"] == 0.5


def test_cli_cheems_metric_is_the_default_and_unchanged(imported, tmp_path, monkeypatch, capsys):
    outputs = []
    for more in ([], ["--metric", "cheems"]):
        out = tmp_path / f"m{len(outputs)}.json"
        args = ["eval", "--bench", imported["judgebench"], "--model", "length", "--no-cache", "--output-json", out]
        proc = run_main(*args, *more, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        outputs.append((json.loads(out.read_text(encoding="utf-8")), proc.stdout))
    assert outputs[0] == outputs[1]
    got = outputs[0][0]
    assert got["metric"] == "cheems" and "accuracy_ci" in got["subsets"]["judgebench"]
    # CheemsBench's numbers: a category's exact match is the share of its prompts with every pair right
    assert got["subsets"]["judgebench"]["accuracy"] == pytest.approx(2 / 3)
    assert "CheemsBench metrics: length" in outputs[0][1]


@pytest.mark.parametrize(
    ("more", "expected"),
    [
        (["--metric", "best"], ("--metric", "unknown metric 'best'", "cheems, rmbench, bon, pairwise")),
        (["--metric", "bon", "--report", "REPORT"], ("--report", "--metric bon has none")),
        (
            ["--metric", "rmbench"],
            ("--metric rmbench", "prompt 'u2' of bench file 'judgebench'", "cheems import rmbench"),
        ),
    ],
)
def test_cli_metric_errors(imported, tmp_path, monkeypatch, capsys, more, expected):
    more = [str(tmp_path / "r") if x == "REPORT" else x for x in more]
    args = ["eval", "--bench", imported["judgebench"], "--model", "length", "--no-cache", *more]
    assert_user_error(run_main(*args, monkeypatch=monkeypatch, capsys=capsys), *expected)
    assert not (tmp_path / "r").exists()


def test_cli_unknown_import_format_lists_the_benchmarks(tmp_path, monkeypatch, capsys):
    proc = run_main("import", "rmbench2", RB2, "-o", tmp_path / "x.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "rmbench, rmb, rewardbench2, judgebench")


def test_judge_both_orders_on_judgebench(imported, tmp_path, monkeypatch, capsys):
    """The fake judge picks the longer answer, so it is right on u1, u3, u4 and wrong on u2 in both orders.

    Its second look at u1 (u1's B shown first) gets an unparseable reply: one right verdict and one
    parse failure is right by JudgeBench's vote (pairwise metric), wrong by CheemsBench's rule. A judge
    that always says A is inconsistent on every pair: all wrong.
    """
    u1_b = records_by_id(JUDGEBENCH, "judgebench")["u1"].response("B").content

    def u1_b_first_unparseable(body: dict, attempt: int) -> str:
        shown = {label: text for label, _, text in ANSWER.findall(body["messages"][-1]["content"])}
        return "bad" if shown.get("A") == u1_b else "ok"

    def run(server, cache, metric):
        out = tmp_path / f"{cache}.json"
        args = ["eval", "--bench", imported["judgebench"], "--judge-model", "fake-judge", "--base-url", server.url]
        args += ["--cache", tmp_path / cache, "--max-retries", "1", "--no-progress", "--both-orders"]
        proc = run_main(*args, "--metric", metric, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys,
                        env={"OPENAI_API_KEY": "test-key"})  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(out.read_text(encoding="utf-8")), proc.stdout

    with FakeJudgeServer(faults=u1_b_first_unparseable) as server:
        pairwise = run(server, "fair.sqlite", "pairwise")[0]["subsets"]["judgebench"]
        cheems = run(server, "fair.sqlite", "cheems")[0]["subsets"]["judgebench"]
    assert pairwise["pooled_accuracy"] == 0.75 and pairwise["categories"]["mmlu-pro"]["accuracy"] == 1.0
    assert cheems["categories"]["mmlu-pro"]["accuracy"] == 0.5  # u1 wrong: not every verdict names A
    with FakeJudgeServer(always="A") as server:
        always_a, shown = run(server, "always-a.sqlite", "pairwise")
    assert always_a["overall"] == 0.0
    assert always_a["judge"]["position_consistency"] == {"pairs": 4, "consistent": 0, "rate": 0.0}
    assert "both orders: 0 of 4 pairs consistent" in shown


def test_cli_import_then_eval_rewardbench(tmp_path, monkeypatch, capsys):
    upstream = write_jsonl(tmp_path / "filtered.jsonl", REWARDBENCH)
    bench, out = tmp_path / "rb.jsonl", tmp_path / "rb.json"
    proc = run_main("import", "rewardbench", upstream, "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "wrote 8 records" in proc.stdout
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "rewardbench"]
    proc = run_main(*args, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["overall"] == pytest.approx(31 / 56)
    # cheems leaderboard and correlate read it; exact match (every pair right) averages the main categories,
    # the sections and the prior set: (1/3 + 1 + 0 + 1/2 + 1)/5
    read = read_eval_json(out)["subsets"]["rb"]
    low, high = read.pop("accuracy_ci")  # every metric has intervals
    assert read == {
        "accuracy": pytest.approx(31 / 56),
        "exact_match": pytest.approx(17 / 30),
        "n_prompts": 8,
        "n_pairs": 8,
    }
    assert low <= 31 / 56 <= high
    assert "RewardBench metrics: length" in proc.stdout and "section Reasoning" in proc.stdout
    assert "0.857" in proc.stdout and "0.554" in proc.stdout


@pytest.mark.parametrize(
    ("metric", "rows", "fmt", "expected"),
    [
        ("rewardbench", KENDALL, None, ("--metric rewardbench", "bench file 'b' holds no RewardBench subset")),
        ("ppe-correctness", REWARDBENCH, "rewardbench", ("--metric ppe-correctness", "does not mark each response")),
        ("kendall", [KENDALL[1], KENDALL[2]], None, ("--metric kendall", "no prompt of bench file 'b' has a Kendall")),
    ],
)
def test_cli_metric_on_the_wrong_bench_is_one_line(tmp_path, monkeypatch, capsys, metric, rows, fmt, expected):
    bench = bench_file(tmp_path, "b", rows, fmt)
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", metric]
    out = tmp_path / "out.json"
    assert_user_error(run_main(*args, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys), *expected)
    assert not out.exists()


def test_cli_kendall_refuses_a_judge_before_judging(tmp_path, monkeypatch, capsys):
    """A judge gives verdicts on pairs, not a score per response: refused before any request (no server here)."""
    bench = bench_file(tmp_path, "b", KENDALL, None)
    args = ["eval", "--bench", bench, "--judge-model", "some-judge", "--base-url", "http://127.0.0.1:9/v1"]
    out = tmp_path / "out.json"
    proc = run_main(*args, "--metric", "kendall", "--output-json", out, monkeypatch=monkeypatch, capsys=capsys,
                    env={"OPENAI_API_KEY": "test-key"})  # fmt: skip
    assert_user_error(proc, "--metric: kendall needs every response's score, and a judge gives verdicts", "--model")
    assert not out.exists()


@pytest.mark.parametrize(
    ("fmt", "rows", "metric", "overall", "shown"),
    [
        ("ppe-correctness", PPE_CORRECTNESS, "ppe-correctness", 2 / 5, "PPE correctness metrics: length"),
        ("ppe-preference", PPE_PREFERENCE, "ppe-preference", 2 / 3, "PPE human preference metrics: length"),
        (None, KENDALL, "kendall", (3 / math.sqrt(30) - 1) / 2, "Kendall τb metrics: length"),
    ],
)
def test_cli_import_then_eval_ppe_and_kendall(tmp_path, monkeypatch, capsys, fmt, rows, metric, overall, shown):
    upstream, bench, out = tmp_path / "upstream.jsonl", tmp_path / "b.jsonl", tmp_path / "b.json"
    if fmt:
        write_jsonl(upstream, rows)
        proc = run_main("import", fmt, upstream, "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0 and f"wrote {len(rows)} records" in proc.stdout
    else:
        write_jsonl(bench, rows)
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", metric, "--output-json", out]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["overall"] == pytest.approx(overall)
    assert shown in proc.stdout and f"{overall:.3f}" in proc.stdout
    if metric == "kendall":
        assert "note: b: 2 prompts left out, undefined (1 gold_tied, 1 scores_tied)" in proc.stdout
