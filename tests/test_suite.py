"""``cheems suite`` and the intervals of every ``--metric``: a suite's reports are ``cheems eval``'s, bench by bench.

The benches are real files in their public layouts: the packaged CheemsBench-style demo bench, and RM-Bench and
RewardBench 2 files imported from tests/data by ``cheems import``. The scorer is the length baseline (or the scores
file ``cheems score`` writes with it), so every run takes well under a second.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

from cheems.evaluate import load_bench
from cheems.evaluate.evaluation import ScoredBy, evaluate
from cheems.metrics.bootstrap import metric_intervals
from cheems.models.registry import SCORERS, register_scorer
from cheems.models.scoring import ScoringSettings
from helpers import assert_user_error, record, run_main, write_jsonl

DATA = Path(__file__).parent / "data"
RESAMPLES = 200
CONFIG = f"""\
resamples: {RESAMPLES}  # every bench's, unless it says otherwise
benches:
  - name: cheemsbench
    bench: open.jsonl
  - name: rm-bench
    bench: [rm.jsonl]
    metric: rmbench
  - name: rewardbench2
    bench: rb2/
    metric: bon
    bootstrap_seed: 0
"""
BENCHES = {
    "cheemsbench": ("open.jsonl", "cheems"),
    "rm-bench": ("rm.jsonl", "rmbench"),
    "rewardbench2": ("rb2/rb2.jsonl", "bon"),
}


def cheems(*args, monkeypatch, capsys):
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def suite_dir(tmp_path, monkeypatch, capsys) -> Path:
    """A suite folder: its config and three benches, one in a folder of its own."""
    shutil.copy(files("cheems") / "assets" / "demo" / "open.jsonl", tmp_path / "open.jsonl")
    (tmp_path / "rb2").mkdir()
    cheems("import", "rmbench", DATA / "rmbench", "-o", tmp_path / "rm.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    cheems("import", "rewardbench2", DATA / "rewardbench2.jsonl", "-o", tmp_path / "rb2" / "rb2.jsonl",
           monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    (tmp_path / "suite.yaml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def eval_json(folder: Path, name: str, by: list, monkeypatch, capsys) -> dict:
    """What ``cheems eval`` writes for one bench of the suite, with the suite's settings."""
    bench, metric = BENCHES[name]
    out = folder / f"eval-{name}.json"
    args = ["--bench", folder / bench, "--metric", metric, "--resamples", RESAMPLES, "--output-json", out]
    cheems("eval", *args, *by, monkeypatch=monkeypatch, capsys=capsys)
    return read(out)


def test_suite_reports_are_evals_with_intervals(suite_dir, monkeypatch, capsys):
    out = suite_dir / "suite.json"
    proc = cheems("suite", suite_dir / "suite.yaml", "--model", "length", "--no-cache", "--output-json", out,
                  monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    got = read(out)
    assert got["metric"] == "suite" and got["scorer"] == "length" and list(got["benches"]) == list(BENCHES)
    for name, (_, metric) in BENCHES.items():
        alone = eval_json(suite_dir, name, ["--model", "length", "--no-cache"], monkeypatch, capsys)
        assert got["reports"][name] == alone  # byte for byte what eval writes, intervals included
        bench = got["benches"][name]
        assert bench["metric"] == metric and bench["score"] == alone["overall"]
        assert bench["score_ci"] == alone["overall_ci"] and alone["bootstrap"]["resamples"] == RESAMPLES
        assert bench["n_prompts"] == sum(s["n_prompts"] for s in alone["subsets"].values())
    # the hand-checked numbers of tests/test_metrics_rmbench.py (19/36) and tests/test_metrics_rewardbench2.py (5/6)
    assert got["benches"]["rm-bench"]["score"] == pytest.approx(19 / 36)
    assert got["benches"]["rewardbench2"]["score"] == pytest.approx(5 / 6)
    scores = [b["score"] for b in got["benches"].values()]
    assert got["overall"] == pytest.approx(sum(scores) / 3)
    low, high = got["overall_ci"]
    assert low < got["overall"] < high and got["bootstrap"] == {"resamples": RESAMPLES, "seed": 0, "level": 0.95}
    for name in BENCHES:  # the table: bench | metric | score [low, high] | prompts
        assert name in proc.stdout
    assert f"{got['overall']:.3f}" in proc.stdout and "[.33,.67]" in proc.stdout  # rm-bench's interval


def test_suite_by_scores_files(suite_dir, monkeypatch, capsys):
    """One scores file for every bench, or one per bench: the same reports as the model's."""
    benches = [suite_dir / bench for bench, _ in BENCHES.values()]
    scores = suite_dir / "scores.jsonl"
    cheems("score", "--model", "length", "--no-cache", *(x for b in benches for x in ("--bench", b)), "-o", scores,
           monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    by_model, one, each = suite_dir / "m.json", suite_dir / "one.json", suite_dir / "each.json"
    config = suite_dir / "suite.yaml"
    cheems("suite", config, "--model", "length", "--no-cache", "--output-json", by_model, monkeypatch=monkeypatch,
           capsys=capsys)  # fmt: skip
    proc = cheems("suite", config, "--scores", scores, "--output-json", one, monkeypatch=monkeypatch, capsys=capsys)
    assert "warning" not in proc.stderr  # every score is some bench's: none is unmatched
    per_bench = []
    for name, bench in zip(BENCHES, benches):
        own = suite_dir / f"scores-{name}.jsonl"
        cheems("score", "--model", "length", "--no-cache", "--bench", bench, "-o", own, monkeypatch=monkeypatch,
               capsys=capsys)  # fmt: skip
        per_bench += ["--scores", f"{name}={own}"]
    cheems("suite", config, *per_bench, "--output-json", each, monkeypatch=monkeypatch, capsys=capsys)

    def numbers(path: Path) -> dict:
        data = read(path)
        for report in data["reports"].values():
            del report["scorer"]
            report.pop("unmatched_scores", None)  # one file for all: each bench leaves the others' scores
            # a skipped check says why, and a scores file is skipped for other reasons than the model
            report["checks"] = [c for c in report.get("checks", []) if c["value"] is not None]
        return {k: v for k, v in data.items() if k != "scorer"}

    assert numbers(one) == numbers(by_model) == numbers(each)
    assert read(one)["scorer"] == str(scores)


def test_leaderboard_reads_suite_jsons(suite_dir, monkeypatch, capsys):
    config, board = suite_dir / "suite.yaml", suite_dir / "board.md"
    length, scrambled = suite_dir / "length.json", suite_dir / "scrambled.json"
    cheems("suite", config, "--model", "length", "--no-cache", "--output-json", length, monkeypatch=monkeypatch,
           capsys=capsys)  # fmt: skip
    # a second scorer: the negated length, as a scores file
    scores = suite_dir / "neg.jsonl"
    benches = [suite_dir / bench for bench, _ in BENCHES.values()]
    cheems("score", "--model", "length", "--no-cache", *(x for b in benches for x in ("--bench", b)), "-o", scores,
           monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    rows = [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines()]
    write_jsonl(scores, [{**r, "score": -r["score"]} for r in rows])
    cheems("suite", config, "--scores", scores, "--output-json", scrambled, monkeypatch=monkeypatch, capsys=capsys)
    proc = cheems("leaderboard", scrambled, length, "-o", board, monkeypatch=monkeypatch, capsys=capsys)
    text = board.read_text(encoding="utf-8")
    heading = next(line for line in text.splitlines() if line.startswith("| #"))
    assert heading == "| # | name | kind | cheemsbench score | rm-bench score | rewardbench2 score | overall |"
    best = read(length)
    first = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert "| length |" in first  # the length baseline beats its negation on these benches
    for bench in best["benches"].values():
        low, high = bench["score_ci"]
        assert f"{bench['score']:.3f} [{low:.3f}, {high:.3f}]" in first
    assert "mean over benches" in proc.stdout
    # a suite is not ranked beside one bench's eval
    single = suite_dir / "eval.json"
    cheems("eval", "--bench", suite_dir / "open.jsonl", "--model", "length", "--no-cache", "--output-json", single,
           monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    proc = run_main("leaderboard", length, single, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, str(single), "metric cheems differs from metric suite")


def test_model_loaded_once_and_its_cache_shared(suite_dir, monkeypatch, capsys):
    """A registered scorer counts its loads and the responses it scores: one load for every bench; a second run
    finds every score in the shared cache."""
    loads, scored = [], []

    class Counted:
        name = "counted"

        def fingerprint(self):
            return "counted-1"

        def score(self, items):
            scored.extend(items)
            return [float(len(response)) for _, response in items]

    register_scorer("counted", form="counted", help="length, counted")(
        lambda spec, options: loads.append(1) or Counted()
    )
    try:
        cache, out = suite_dir / "cache.sqlite", suite_dir / "s.json"
        args = ["suite", suite_dir / "suite.yaml", "--model", "counted", "--cache", cache, "--output-json", out]
        cheems(*args, monkeypatch=monkeypatch, capsys=capsys)
        responses = sum(
            len(r.responses)
            for records in load_bench([suite_dir / b for b, _ in BENCHES.values()]).values()
            for r in records
        )
        assert len(loads) == 1 and len(scored) == responses
        first = read(out)
        cheems(*args, monkeypatch=monkeypatch, capsys=capsys)
        assert len(loads) == 2 and len(scored) == responses  # the second run loaded once and scored nothing
        assert read(out)["benches"] == first["benches"]
    finally:
        SCORERS.remove("counted")


def test_scored_by_loads_once():
    by = ScoredBy(scoring=ScoringSettings(model="length", no_cache=True))
    assert by.scores_or_scorer() is by.scores_or_scorer()


def hand_pairwise_interval(outcomes, resamples: int, seed: int) -> tuple[float, float]:
    """The pairwise metric's percentile interval, written out: per resample, each category's share of pairs right
    over the resampled prompts, averaged over the categories present."""
    rng = np.random.default_rng(seed)
    prompts = [o for o in outcomes if o.pairs]
    draws = []
    for row in rng.integers(0, len(prompts), size=(resamples, len(prompts))):
        right, total = defaultdict(int), defaultdict(int)
        for i in row:
            right[prompts[i].category] += sum(p.correct for p in prompts[i].pairs)
            total[prompts[i].category] += len(prompts[i].pairs)
        draws.append(np.mean([right[c] / total[c] for c in total]))
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def test_metric_intervals_are_the_bootstrap_written_out():
    """Any metric's intervals resample prompts within the subset as written by hand: here ``pairwise``."""
    from cheems.evaluate.benchmark_report import benchmark_report

    records = [
        record(3, rank={"r1": 1, "r2": 2, "r3": 3}, pid=f"p{i}", category="写作" if i % 3 else "代码")
        for i in range(12)
    ]
    scores = {(f"p{i}", f"r{j}"): float((i * j) % 5) for i in range(12) for j in range(1, 4)}
    bench = {"s": records}
    report = evaluate(bench, scores, resamples=0)
    got = benchmark_report("pairwise", bench, report, resamples=300, seed=5)
    assert got.intervals is not None
    assert got.intervals.subsets["s"] == pytest.approx(hand_pairwise_interval(report.outcomes["s"], 300, 5))
    assert got.to_dict()["overall_ci"] == list(got.intervals.subsets["s"])  # one subset: overall is its accuracy
    # the generic function with the metric's own accuracy gives the same
    again = metric_intervals(report.outcomes, lambda name, prompts: got_accuracy(prompts), 300, 5)
    assert again.subsets == got.intervals.subsets


def got_accuracy(prompts) -> float:
    from cheems.metrics.pairwise import pairwise_subset

    return pairwise_subset(prompts)["accuracy"]


def test_one_bench_suite_interval_is_the_bench_s(suite_dir, monkeypatch, capsys):
    config, out = suite_dir / "one.yaml", suite_dir / "one.json"
    config.write_text(
        "benches:\n  - name: rm\n    bench: rm.jsonl\n    metric: rmbench\n    resamples: 50\n", encoding="utf-8"
    )
    cheems("suite", config, "--model", "length", "--no-cache", "--output-json", out, monkeypatch=monkeypatch,
           capsys=capsys)  # fmt: skip
    got = read(out)
    assert got["overall_ci"] == got["benches"]["rm"]["score_ci"] == got["reports"]["rm"]["overall_ci"]


def test_no_interval_for_the_mean_when_benches_draw_differently(suite_dir, monkeypatch, capsys):
    config, out = suite_dir / "mixed.yaml", suite_dir / "mixed.json"
    config.write_text(CONFIG.replace("    bootstrap_seed: 0", "    resamples: 0"), encoding="utf-8")
    cheems("suite", config, "--model", "length", "--no-cache", "--output-json", out, monkeypatch=monkeypatch,
           capsys=capsys)  # fmt: skip
    got = read(out)
    assert "overall_ci" not in got and "score_ci" not in got["benches"]["rewardbench2"]
    assert "score_ci" in got["benches"]["rm-bench"]


# ---------------------------------------------------------------- bad input: one line each, nothing written

BAD_CONFIGS = [
    ("benches: []\n", 1, "at least 1 item"),
    ("benches:\n  - name: a\n    bench: nope.jsonl\n", 3, "no such bench file"),
    ("benches:\n  - name: a\n    bench:\n      - open.jsonl\n      - nope.jsonl\n", 5, "no such bench file"),
    ("benches:\n  - name: a\n    bench: empty/\n", 3, "holds no .jsonl file"),
    ("benches:\n  - name: a\n    bench: open.jsonl\n    metric: best\n", 4, "unknown metric 'best'"),
    ("metric: best\nbenches:\n  - name: a\n    bench: open.jsonl\n", 1, "unknown metric 'best'"),
    ("benches:\n  - name: a\n    bench: open.jsonl\n  - name: a\n    bench: rm.jsonl\n", 4, "named twice"),
    ("benches:\n  - name: a\n    bench: open.jsonl\n    colour: red\n", 4, "unknown key 'colour'"),
    ("benches:\n  - name: a\n    bench: open.jsonl\n    resamples: -1\n", 4, "must be 0 or more"),
    ("benches:\n  - bench: open.jsonl\n", 2, "is missing"),
    ("benches:\n  - name: a\n    bench: open.jsonl\nbenchs: 1\n", 4, "unknown key 'benchs'"),
    ("resamples: 10\n", None, "field 'benches': is missing"),
]


@pytest.mark.parametrize(("text", "line", "says"), BAD_CONFIGS)
def test_bad_config_is_one_line(suite_dir, monkeypatch, capsys, text, line, says):
    (suite_dir / "empty").mkdir()
    config, out = suite_dir / "bad.yaml", suite_dir / "out.json"
    config.write_text(text, encoding="utf-8")
    proc = run_main("suite", config, "--model", "length", "--no-cache", "--output-json", out, monkeypatch=monkeypatch,
                    capsys=capsys)  # fmt: skip
    assert_user_error(proc, f"{config}:{line}:" if line else f"{config}:", says)
    assert not out.exists()


def test_bench_without_ranked_pair(suite_dir, monkeypatch, capsys):
    write_jsonl(suite_dir / "flat.jsonl", [record(2, pid="x").model_dump(exclude_none=True)])
    config = suite_dir / "flat.yaml"
    config.write_text("benches:\n  - name: flat\n    bench: flat.jsonl\n", encoding="utf-8")
    proc = run_main("suite", config, "--model", "length", "--no-cache", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "flat.jsonl", "bench 'flat'", "no prompt in any bench file has a ranked pair")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], ("exactly one of --scores, --model or --judge-model",)),
        (["--model", "length", "--scores", "s.jsonl"], ("exactly one of",)),
        (["--scores", "cheemsbench=a.jsonl", "--scores", "b.jsonl"], ("--scores", "NAME=FILE once per bench")),
        (["--scores", "cheemsbench=a.jsonl"], ("--scores", "bench 'rm-bench' has no scores file")),
        (["--scores", "other=a.jsonl", "--scores", "cheemsbench=a.jsonl"], ("--scores", "no bench named 'other'")),
        (["--model", "length", "--output-json", "suite.yaml"], ("--output-json", "is also the input")),
    ],
)
def test_bad_options_are_one_line(suite_dir, monkeypatch, capsys, args, says):
    config = suite_dir / "suite.yaml"
    monkeypatch.chdir(suite_dir)
    proc = run_main("suite", config, "--no-cache", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, *says)
    assert config.read_text(encoding="utf-8") == CONFIG  # never replaced


def test_one_scores_file_for_benches_sharing_prompt_ids(suite_dir, monkeypatch, capsys):
    """Two benches with the same prompt id cannot share one scores file: refused, pointing at one file per bench."""
    shutil.copy(suite_dir / "open.jsonl", suite_dir / "again.jsonl")
    config = suite_dir / "twice.yaml"
    config.write_text(
        "benches:\n  - name: a\n    bench: open.jsonl\n  - name: b\n    bench: again.jsonl\n", encoding="utf-8"
    )
    scores = suite_dir / "s.jsonl"
    cheems("score", "--model", "length", "--no-cache", "--bench", suite_dir / "open.jsonl", "-o", scores,
           monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    proc = run_main("suite", config, "--scores", scores, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "--scores", "is in bench 'a' and bench 'b'", "NAME=FILE")
    cheems(
        "suite", config, "--scores", f"a={scores}", "--scores", f"b={scores}", monkeypatch=monkeypatch, capsys=capsys
    )


def test_suite_by_a_judge(tmp_path, monkeypatch, capsys):
    """An LLM judge (a real HTTP server on loopback that picks the longer answer) through a suite: each bench's
    report is eval's with the same judge, and the leaderboard marks the row a judge."""
    from fault_server import FakeJudgeServer

    for name, fmt, source in (
        ("jb", "judgebench", DATA / "judgebench.jsonl"),
        ("rb2", "rewardbench2", DATA / "rewardbench2.jsonl"),
    ):
        cheems("import", fmt, source, "-o", tmp_path / f"{name}.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    config = tmp_path / "judge.yaml"
    config.write_text("resamples: 100\nbenches:\n  - name: jb\n    bench: jb.jsonl\n    metric: pairwise\n"
                      "  - name: rb2\n    bench: rb2.jsonl\n", encoding="utf-8")  # fmt: skip
    env = {"OPENAI_API_KEY": "test-key"}
    with FakeJudgeServer() as server:
        judge = ["--judge-model", "fake-judge", "--base-url", server.url, "--max-retries", "1", "--no-progress"]
        out = tmp_path / "suite.json"
        args = ["suite", config, *judge, "--cache", tmp_path / "suite.sqlite", "--output-json", out]
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env=env)
        assert proc.returncode == 0, proc.stderr
        alone = tmp_path / "jb.json"  # its own cache: the same requests, so the same run statistics
        args = ["eval", "--bench", tmp_path / "jb.jsonl", "--metric", "pairwise", "--resamples", 100, *judge]
        args += ["--cache", tmp_path / "eval.sqlite", "--output-json", alone]
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env=env)
        assert proc.returncode == 0, proc.stderr
    got = read(out)
    assert got["reports"]["jb"] == read(alone) and got["scorer"] == "fake-judge"
    assert got["reports"]["rb2"]["metric"] == "cheems" and "judge" in got["reports"]["rb2"]
    proc = cheems("leaderboard", out, monkeypatch=monkeypatch, capsys=capsys)
    assert "fake-judge" in proc.stdout and "judge" in proc.stdout


def test_a_metric_a_resample_cannot_score_has_no_interval():
    """A metric that needs some prompts together (as RewardBench 2's Ties score needs ref:N beside tied:N) raises
    on a resample without them: that subset gets no interval, nor does overall; the other subsets keep theirs,
    the same as without it."""
    from cheems.errors import InputError
    from cheems.evaluate.benchmark_report import benchmark_report
    from cheems.metrics.metric_registry import METRICS, register_metric
    from cheems.metrics.pairwise import pairwise_subset

    @register_metric("needs-p0", title="needs p0", help="pairwise, refusing subset a without its prompt p0")
    def needs_p0(outcomes, records, name=""):
        if name == "a" and "p0" not in {o.prompt_id for o in outcomes}:
            raise InputError(f"bench file '{name}' lacks prompt p0")
        return pairwise_subset(outcomes)

    try:
        records = {
            "a": [record(3, rank={"r1": 1, "r2": 2, "r3": 3}, pid=f"p{i}") for i in range(8)],
            "b": [record(2, rank={"r1": 1, "r2": 2}, pid=f"q{i}") for i in range(8)],
        }
        scores = {(r.id, x.id): float(len(r.id) + j % 2) for rs in records.values() for r in rs for j, x in
                  enumerate(r.responses)}  # fmt: skip
        report = evaluate(records, scores, resamples=0)
        got = benchmark_report("needs-p0", records, report, resamples=100, seed=3).to_dict()
        assert "accuracy_ci" not in got["subsets"]["a"] and "overall_ci" not in got
        assert got["intervals_undrawn"] == {"a": "bench file 'a' lacks prompt p0"}
        plain = benchmark_report("pairwise", records, report, resamples=100, seed=3).to_dict()
        assert got["subsets"]["b"]["accuracy_ci"] == plain["subsets"]["b"]["accuracy_ci"]
    finally:
        METRICS.remove("needs-p0")


def test_a_judge_is_never_asked_for_a_suite_with_a_metric_it_cannot_feed(tmp_path, monkeypatch, capsys):
    """A judge gives verdicts on pairs; kendall reads every response's score. eval refuses that before asking,
    and so does a suite, for all its benches before the first is run (it asked 117 questions first)."""
    from fault_server import FakeJudgeServer

    shutil.copy(files("cheems") / "assets" / "demo" / "open.jsonl", tmp_path / "open.jsonl")
    config = tmp_path / "judge.yaml"
    config.write_text("benches:\n  - name: open\n    bench: open.jsonl\n"
                      "  - name: tau\n    bench: open.jsonl\n    metric: kendall\n", encoding="utf-8")  # fmt: skip
    out = tmp_path / "suite.json"
    with FakeJudgeServer() as server:
        judge = ["--judge-model", "fake-judge", "--base-url", server.url, "--max-retries", "1", "--no-progress"]
        args = ["suite", config, *judge, "--cache", tmp_path / "j.sqlite", "--output-json", out]
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env={"OPENAI_API_KEY": "test-key"})
        assert_user_error(
            proc, f"{config}:6:", "benches.1.metric", "bench 'tau'", "kendall needs every response's score"
        )
        assert server.total == 0
    assert not out.exists()


def test_the_library_refuses_a_judge_for_a_scores_only_metric_before_asking():
    from cheems.errors import InputError
    from cheems.evaluate.evaluation import evaluate_files
    from cheems.evaluate.run_settings import EvalSettings
    from cheems.judge.judge_settings import JudgeSettings

    judge = ScoredBy(judge=JudgeSettings(judge_model="m", base_url="http://127.0.0.1:9/v1"))
    bench = files("cheems") / "assets" / "demo" / "open.jsonl"
    with pytest.raises(InputError, match="kendall needs every response's score"):
        evaluate_files([Path(str(bench))], judge, EvalSettings(metric="kendall"))


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("metric: acuracy\nbenches:\n  - name: a\n    bench: open.jsonl\n    metric: cheems\n", 1, "'acuracy'"),
        ("benches:\n  - name: a\n    bench: open.jsonl\n    metric: cheems\n    resample: 3\n", 5, "'resample'"),
        ("metrics: cheems\nbenches:\n  - name: a\n    bench: open.jsonl\n", 1, "unknown key 'metrics'"),
    ],
)
def test_a_misspelled_key_or_metric_anywhere_in_the_config_is_refused_at_its_line(
    suite_dir, monkeypatch, capsys, text, line, says
):
    config = suite_dir / "typo.yaml"
    config.write_text(text, encoding="utf-8")
    proc = run_main("suite", config, "--model", "length", "--no-cache", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{config}:{line}:", says)


def test_scores_name_file_is_split_only_at_a_bench_s_name(suite_dir, monkeypatch, capsys):
    """``--scores run=1.jsonl`` is a file unless a bench is named ``run``; a bench name never holds ``=``."""
    monkeypatch.chdir(suite_dir)
    config = suite_dir / "one.yaml"
    config.write_text("benches:\n  - name: open\n    bench: open.jsonl\n", encoding="utf-8")
    scores = suite_dir / "run=1.jsonl"
    cheems("score", "--model", "length", "--no-cache", "--bench", suite_dir / "open.jsonl", "-o", scores,
           monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    out = suite_dir / "s.json"
    cheems("suite", config, "--scores", "run=1.jsonl", "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
    assert read(out)["scorer"] == "run=1.jsonl"
    named = suite_dir / "n.json"
    cheems("suite", config, "--scores", "open=run=1.jsonl", "--output-json", named, monkeypatch=monkeypatch,
           capsys=capsys)  # fmt: skip
    assert read(named)["benches"] == read(out)["benches"]
    # a misspelled bench name is neither a bench nor a file: the line says both readings
    proc = run_main("suite", config, "--scores", "opn=run=1.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "--scores", "no bench named 'opn'", "no scores file 'opn=run=1.jsonl'", "benches: open")
    # bench 'open' and a file 'open=x.jsonl' both: refused, naming how to give the file
    (suite_dir / "open=x.jsonl").write_text(scores.read_text(encoding="utf-8"), encoding="utf-8")
    proc = run_main("suite", config, "--scores", "open=x.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "--scores", "also a file", "./open=x.jsonl")
    cheems("suite", config, "--scores", "./open=x.jsonl", monkeypatch=monkeypatch, capsys=capsys)


def test_a_bench_name_holding_an_equals_sign_is_refused_at_its_line(suite_dir, monkeypatch, capsys):
    config = suite_dir / "eq.yaml"
    config.write_text("benches:\n  - name: open\n    bench: open.jsonl\n  - name: a=b\n    bench: rm.jsonl\n")
    proc = run_main("suite", config, "--model", "length", "--no-cache", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{config}:4:", "bench name 'a=b' holds '='", "splits at the first '='")
