"""The evaluation's own checks (cheems.evaluate.checks): each must warn where it should and stay quiet elsewhere;
label_swap fails the run on a wrong metric; eval and doctor show them (JSON, HTML, terminal)."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

import cheems
from cheems.data.schema import Record
from cheems.evaluate.checks import (
    BASELINE_WARN,
    CHECKS,
    Check,
    CheckContext,
    CheckFailure,
    CheckKind,
    label_swap,
    random_exact_match,
    rescored,
    run_checks,
)
from cheems.metrics.cheemsbench import GroupMetrics, subset_metrics
from cheems.metrics.outcomes import PairOutcome, PromptOutcome
from cheems.workflows.demo import demo_files
from fault_server import FakeJudgeServer
from helpers import assert_user_error, bench_row, run_main, write_jsonl

KEY_ENV = {"OPENAI_API_KEY": "test-key"}


def row(pid: str, contents: list[str], rank: list[int], category: str = "数学", **more) -> dict:
    return bench_row(pid, category, contents, rank, **more)


def bench_of(rows: list[dict]) -> dict[str, list[Record]]:
    return {"open": [Record.model_validate(r) for r in rows]}


# the better-ranked answer is sometimes longer, sometimes shorter: no length baseline reaches 0.9
MIXED = [
    row("p1", ["好的回答", "差"], [1, 2]),
    row("p2", ["短", "很长很长的错误回答"], [1, 2]),
    row("p3", ["中等的回答", "一", "很长很长很长的回答"], [1, 2, 3], category="代码"),
    row("p4", ["甲", "乙乙乙"], [1, 2], category="代码"),
]


def evaluated(rows: list[dict], scores: dict[tuple[str, str], float] | None = None) -> CheckContext:
    """The context of an evaluation of ``rows`` by ``scores`` (default: the length scorer's)."""
    bench = bench_of(rows)
    by = scores if scores is not None else cheems.load_scorer("length")
    return CheckContext(cheems.evaluate(bench, by, resamples=0), records=bench)


def by_subset(checks: list[Check], name: str) -> dict[str | None, Check]:
    return {c.subset: c for c in checks if c.name == name}


# ---------------------------------------------------------------- label_swap


def test_label_swap_holds_on_real_evaluations_with_ties():
    scores = {("p1", "r1"): 1.0, ("p1", "r2"): 1.0, ("p2", "r1"): 0.3, ("p2", "r2"): 0.7}
    scores |= {("p3", "r1"): 2.0, ("p3", "r2"): 2.0, ("p3", "r3"): 0.5, ("p4", "r1"): 0.1, ("p4", "r2"): 0.2}
    for context in (evaluated(MIXED), evaluated(MIXED, scores)):
        found = by_subset(run_checks(context, ["label_swap"]), "label_swap")
        assert found["open"].level == "ok" and found["open"].value <= 1e-12


def test_label_swap_fails_on_a_metric_that_counts_a_tie_right():
    def tie_is_right(prompts):  # the bug of a harness that compares with >=
        pairs = [p for prompt in prompts for p in prompt.pairs]
        right = sum(p.chosen_score >= p.rejected_score for p in pairs)
        return GroupMetrics(right / len(pairs), 0.0, len(prompts), len(pairs))

    scores = {(r["id"], rid): 1.0 for r in MIXED for rid in r["rank"]}  # every pair tied
    context = replace(evaluated(MIXED, scores), metric=tie_is_right)
    with pytest.raises(CheckFailure) as caught:
        run_checks(context, ["label_swap"])
    line = str(caught.value)
    assert "\n" not in line and "label_swap: subset 'open'" in line and "the metric is wrong" in line


def test_label_swap_fails_the_eval_run_with_one_line(tmp_path, monkeypatch, capsys):
    """A wrong metric fed through the registry (a plugin's replacement): eval exits non-zero, writes nothing."""
    bench = write_jsonl(tmp_path / "open.jsonl", MIXED)
    out = tmp_path / "m.json"
    entries = CHECKS.entries()

    def wrong(context):
        return label_swap(replace(context, metric=lambda prompts: GroupMetrics(1.0, 1.0, len(prompts), 1)))

    def registered(replacement):  # every check again, in its order, label_swap replaced
        for e in entries:
            CHECKS.remove(e.name)
        for e in entries:
            CHECKS.add(e.name, replacement if e.name == "label_swap" else e.value, e.help)

    registered(CheckKind(wrong))
    try:
        args = ("eval", "--bench", bench, "--model", "length", "--no-cache", "--output-json", out)
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    finally:
        registered(entries[0].value)
    assert_user_error(proc, "label_swap", "the metric is wrong")
    assert not out.exists()
    assert CHECKS.entries() == entries  # the registry is as it was


# ---------------------------------------------------------------- score_ties


def test_score_ties_warns_and_shows_a_second_rule_beside_the_strict_one():
    scores = {(r["id"], rid): 0.0 for r in MIXED for rid in r["rank"]}
    scores[("p2", "r2")] = -1.0  # one right pair, the rest tied
    context = evaluated(MIXED, scores)

    def tie_keeps_exact_match(prompts):  # a subset's rule: only a reversed pair breaks exact match, pooled
        strict = subset_metrics(rescored(prompts))
        kept = [all(p.chosen_score >= p.rejected_score for p in prompt.pairs) for prompt in prompts]
        return replace(strict, exact_match=sum(kept) / len(kept))

    found = by_subset(run_checks(replace(context, upstream=tie_keeps_exact_match), ["score_ties"]), "score_ties")
    found = found["open"]
    assert found.level == "warning"
    assert found.value["tied_pairs"] == 5 and found.value["pairs"] == 6
    # category means, as the subset's numbers: 数学 (p1 tied, p2 right), 代码 (p3 and p4 all tied)
    assert found.value["strict"] == {"accuracy": 0.25, "exact_match": 0.25}
    assert found.value["upstream"] == {"accuracy": 0.25, "exact_match": 1.0}
    subset = context.report.subsets["open"]
    assert found.value["strict"] == {"accuracy": subset.accuracy, "exact_match": subset.exact_match}
    assert found.message.endswith("a tie counts as wrong; exact match strict 0.2500, upstream 1.0000")


def test_score_ties_quiet_without_ties():
    found = by_subset(run_checks(evaluated(MIXED), ["score_ties"]), "score_ties")["open"]
    assert found.level == "ok" and found.value == {"share": 0.0, "tied_pairs": 0, "pairs": 6}


# ---------------------------------------------------------------- degenerate


def test_degenerate_warns_on_constant_scores_identical_pairs_and_a_copied_reference():
    rows = [
        row("p1", ["同一个回答", "同一个回答 "], [1, 2]),
        row("p2", ["参考答案", "别的"], [1, 2], reference="参考答案"),
    ]
    scores = {(r["id"], rid): 0.5 for r in rows for rid in r["rank"]}
    found = by_subset(run_checks(evaluated(rows, scores), ["degenerate"]), "degenerate")["open"]
    assert found.level == "warning"
    assert found.value == {"constant_scores": True, "identical_pairs": 1, "pairs": 2,
                           "responses_equal_reference": 1, "responses": 4}  # fmt: skip
    assert "same score (0.5)" in found.message and "1 of 2 ranked pairs" in found.message


def test_degenerate_quiet_on_a_sound_bench_read_again_from_its_files(tmp_path):
    """With the bench files instead of records (eval --scores streams them), the texts are read again."""
    bench = write_jsonl(tmp_path / "open.jsonl", MIXED)
    context = replace(evaluated(MIXED), records=None, bench=[bench])
    found = by_subset(run_checks(context, ["degenerate"]), "degenerate")["open"]
    assert found.level == "ok" and found.value["identical_pairs"] == 0 and found.value["pairs"] == 6


# ---------------------------------------------------------------- length_baseline


def brute_force_exact_match(ranks: list[int]) -> Fraction:
    """Share of the orders of the responses that put every better-ranked one first (all orders equally likely)."""
    orders = list(itertools.permutations(range(len(ranks))))
    good = sum(all(o.index(i) < o.index(j) for i in range(len(ranks)) for j in range(len(ranks)) if ranks[i] < ranks[j])
               for o in orders)  # fmt: skip
    return Fraction(good, len(orders))


@pytest.mark.parametrize("ranks", [[1, 2], [1, 2, 3], [1, 1, 2], [1, 2, 2, 3], [2, 1, 2, 1, 3], [1, 1, 1, 2]])
def test_random_exact_match_is_exact(ranks):
    record = Record.model_validate(row("p", [f"回答{i}" for i in range(len(ranks))], ranks))
    pairs = [PairOutcome(a, b, False, 1, 1) for a, b in record.ranked_pairs()]
    assert random_exact_match(PromptOutcome("p", "c", pairs)) == brute_force_exact_match(ranks)
    assert random_exact_match(PromptOutcome("p", "c", pairs)) == Fraction(
        math.prod(math.factorial(ranks.count(k)) for k in set(ranks)), math.factorial(len(ranks))
    )


def test_length_baseline_warns_when_longer_wins_everywhere():
    rows = [row(f"p{i}", ["很长很长的好回答" * (i + 1), "短"], [1, 2]) for i in range(4)]
    scores = {(r["id"], rid): float(k) for r in rows for rid, k in r["rank"].items()}  # the worse, the higher: wrong
    found = by_subset(run_checks(evaluated(rows, scores), ["length_baseline"]), "length_baseline")["open"]
    assert found.level == "warning"
    assert found.value["longer_wins"] == {"accuracy": 1.0, "exact_match": 1.0}
    assert found.value["shorter_wins"] == {"accuracy": 0.0, "exact_match": 0.0}
    assert found.value["random"] == {"accuracy": 0.5, "exact_match": 0.5}
    assert BASELINE_WARN == 0.9
    assert found.message.startswith(
        "longer wins 1.000 reaches 0.9 and beats the scorer's 0.000; random 0.500 beats the scorer's 0.000 — accuracy:"
    )


def test_length_baseline_quiet_when_the_scorer_beats_every_baseline():
    scores = {(r["id"], rid): -float(k) for r in MIXED for rid, k in r["rank"].items()}  # a perfect scorer
    found = by_subset(run_checks(evaluated(MIXED, scores), ["length_baseline"]), "length_baseline")["open"]
    assert found.level == "ok"
    # category means: 数学 (p1 longer right, p2 shorter right) and 代码 (p3: 1 of 3 pairs longer-right, p4 shorter)
    assert found.value["longer_wins"]["accuracy"] == pytest.approx((1 / 2 + 1 / 4) / 2)
    assert found.value["random"]["exact_match"] == pytest.approx((1 / 2 + (1 / 6 + 1 / 2) / 2) / 2)


# ---------------------------------------------------------------- truncation and batch_invariance (a real model)


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory) -> Path:
    from tiny_models import build_tiny_bert

    return build_tiny_bert(tmp_path_factory.mktemp("rm") / "tiny-rm")


def model_context(rows: list[dict], model: Path, max_length: int, batch_size: int = 4) -> CheckContext:
    bench = bench_of(rows)

    def at(n: int):
        return cheems.load_scorer(str(model), batch_size=n, max_length=max_length, device="cpu")

    scorer = at(batch_size)
    report = cheems.evaluate(bench, scorer, resamples=0)
    return CheckContext(report, records=bench, scorer=scorer, scorer_at=at, batch_size=batch_size)


def test_truncation_warns_when_responses_are_cut_and_is_quiet_when_they_fit(tiny_rm):
    long_rows = [row("p1", ["很长" * 40, "短"], [1, 2]), row("p2", ["好", "也很长" * 30], [1, 2])]
    found = by_subset(run_checks(model_context(long_rows, tiny_rm, 32), ["truncation"]), "truncation")["open"]
    assert found.level == "warning"
    assert found.value == {"share": 0.5, "truncated": 2, "responses": 4, "max_length": 32}
    assert "their start is cut" in found.message  # a text pair keeps the end too, where the reward is read
    found = by_subset(run_checks(model_context(long_rows, tiny_rm, 512), ["truncation"]), "truncation")["open"]
    assert found.level == "ok" and found.value["truncated"] == 0


def test_truncation_is_skipped_for_a_scores_file():
    (found,) = run_checks(evaluated(MIXED, {(r["id"], rid): 0.0 for r in MIXED for rid in r["rank"]}), ["truncation"])
    assert found.level == "ok" and found.value is None and "scores read from a file" in found.message


def test_batch_invariance_quiet_for_a_real_model(tiny_rm):
    (found,) = run_checks(model_context(MIXED, tiny_rm, 128), ["batch_invariance"])
    assert found.level == "ok" and found.value["responses"] == 9 and found.value["batch_sizes"] == [1, 4]


class BatchDependent:
    """A scorer whose score depends on how many responses share its call (the bug batch_invariance catches)."""

    name = "batch-dependent"

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def fingerprint(self) -> str:
        return f"batch-dependent-{self.batch_size}"

    def score(self, items):
        return [len(response) + 0.1 * min(self.batch_size, len(items)) for _, response in items]


def test_batch_invariance_warns_for_scores_that_move_with_the_batch():
    context = replace(evaluated(MIXED), scorer_at=BatchDependent, batch_size=8, sample=5)
    (found,) = run_checks(context, ["batch_invariance"])
    assert found.level == "warning" and found.value["responses"] == 5
    assert found.value["max_abs_difference"] == pytest.approx(0.4)  # 5 responses together, or each alone
    longest = max(len(c) for r in MIXED for c in [x["content"] for x in r["responses"]])
    assert found.value["tolerance"] <= 0.01 * (longest + 0.1)  # 1e-2 × the largest score at batch size 1


# ---------------------------------------------------------------- contamination


def trained_folder(tmp_path: Path, data: list[Path]) -> Path:
    folder = tmp_path / "rm"
    folder.mkdir()
    (folder / "train_config.yaml").write_text(yaml.safe_dump({"data": [str(d) for d in data], "model": "m3e-small"}))
    return folder


def test_contamination_warns_when_training_prompts_are_bench_prompts(tmp_path):
    bench = write_jsonl(tmp_path / "open.jsonl", MIXED)
    train_rows = [
        row("t1", ["甲", "乙"], [1, 2]) | {"input": "p2的问题"},
        row("t2", ["甲"], [1]) | {"input": "别的问题"},
    ]
    train = write_jsonl(tmp_path / "train.jsonl", train_rows)
    context = replace(evaluated(MIXED), bench=[bench], model=str(trained_folder(tmp_path, [train, tmp_path / "gone"])))
    (found,) = run_checks(context, ["contamination"])
    assert found.level == "warning"
    assert found.value["training_records"] == 1 and found.value["bench_prompts"] == 1
    assert found.value["by_overlap"] == {"exact": 1}
    assert "not checked (not here)" in found.message and "gone" in found.message


def test_contamination_quiet_on_clean_training_data_and_skipped_without_a_config(tmp_path):
    bench = write_jsonl(tmp_path / "open.jsonl", MIXED)
    train = write_jsonl(tmp_path / "train.jsonl", [row("t1", ["甲", "乙"], [1, 2]) | {"input": "完全不同的训练问题"}])
    context = replace(evaluated(MIXED), bench=[bench], model=str(trained_folder(tmp_path, [train])))
    (found,) = run_checks(context, ["contamination"])
    assert found.level == "ok" and found.value["training_records"] == 0
    (found,) = run_checks(replace(context, model="length"), ["contamination"])
    assert found.level == "ok" and found.value is None and "train_config.yaml" in found.message
    train.write_text("{not json\n", encoding="utf-8")  # the model's own data went bad: said, the eval goes on
    (found,) = run_checks(context, ["contamination"])
    assert found.level == "ok" and found.message.startswith("skipped: cannot read the training data:")
    assert f"{train}:1" in found.message


# ---------------------------------------------------------------- judge_null_responses (doctor, a real server)


def doctor_judge(bench: Path, server: FakeJudgeServer, cache: Path, out: Path, monkeypatch, capsys):
    args = ["doctor", "--bench", bench, "--judge-model", "fake-judge", "--base-url", server.url, "--cache", cache,
            "--max-retries", "1", "--no-progress", "--output-json", out]  # fmt: skip
    return run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env=KEY_ENV)


def test_judge_null_responses_warns_when_the_judge_prefers_a_non_answer(tmp_path, monkeypatch, capsys):
    """The fake judge prefers the longer answer: "让我们一步步思考。" beats a one-character answer."""
    bench = write_jsonl(tmp_path / "open.jsonl", [row("p1", ["对", "错错"], [1, 2])])
    with FakeJudgeServer() as server:
        proc = doctor_judge(bench, server, tmp_path / "c.sqlite", tmp_path / "d.json", monkeypatch, capsys)
    assert proc.returncode == 0, proc.stderr
    (found,) = [
        c for c in json.loads((tmp_path / "d.json").read_text())["checks"] if c["name"] == "judge_null_responses"
    ]
    assert found["level"] == "warning" and found["value"]["pairs"] == 4
    # "对" (1 character) loses to "解答：" (3), "让我们一步步思考。" (9) and "p1的问题" (5), beats "：" (1, a tie: C)
    assert found["value"]["by_response"] == {"解答：": 1, "：": 0, "让我们一步步思考。": 1, "the question": 1}
    assert "judge_null_responses" in proc.stdout


def test_judge_null_responses_quiet_when_the_judge_picks_the_real_answer(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "open.jsonl", [row("p1", ["★对", "错错"], [1, 2])])  # the fake judge picks ★
    with FakeJudgeServer() as server:
        proc = doctor_judge(bench, server, tmp_path / "c.sqlite", tmp_path / "d.json", monkeypatch, capsys)
    assert proc.returncode == 0, proc.stderr
    checks = json.loads((tmp_path / "d.json").read_text())["checks"]
    (found,) = [c for c in checks if c["name"] == "judge_null_responses"]
    assert found["level"] == "ok" and found["value"]["null_preferred"] == 0
    assert {c["name"] for c in checks} == set(CHECKS)  # doctor runs every check


def test_a_judge_alone_is_not_asked_about_non_answers_by_eval(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "open.jsonl", [row("p1", ["对", "错错"], [1, 2])])
    with FakeJudgeServer() as server:
        args = ["eval", "--bench", bench, "--judge-model", "fake-judge", "--base-url", server.url, "--cache",
                tmp_path / "c.sqlite", "--no-progress", "--output-json", tmp_path / "m.json"]  # fmt: skip
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env=KEY_ENV)
        assert server.total == 1  # the bench's one pair, no non-answer
    assert proc.returncode == 0, proc.stderr
    names = [c["name"] for c in json.loads((tmp_path / "m.json").read_text())["checks"]]
    assert "judge_null_responses" not in names and "label_swap" in names


# ---------------------------------------------------------------- eval and doctor show them


def test_eval_on_the_demo_bench_shows_the_checks_block(tmp_path, monkeypatch, capsys):
    out, report = tmp_path / "m.json", tmp_path / "report"
    proc = run_main("eval", *(x for f in demo_files() for x in ("--bench", f)), "--model", "length", "--no-cache",
                    "--resamples", "0", "--output-json", out, "--report", report,
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    checks = json.loads(out.read_text())["checks"]
    cheap = [n for n in CHECKS if not CHECKS.get(n).expensive]
    assert [c["name"] for c in checks if c["subset"] in (None, "open")] == cheap
    for c in checks:
        assert set(c) == {"name", "subset", "level", "value", "message"} and c["level"] in ("ok", "warning")
    warned = [c for c in checks if c["level"] == "warning"]
    # the demo's open subset has a response that is its reference: one terminal line per warning
    assert [(c["name"], c["subset"]) for c in warned] == [("degenerate", "open")]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("check warning")]
    assert lines == ["check warning degenerate (open): 1 of 117 responses are the reference itself"]
    page = (report / "report.html").read_text(encoding="utf-8")
    assert "<h2>Checks</h2>" in page and "1 of 117 responses are the reference itself" in page
    assert json.loads((report / "report.json").read_text())["checks"] == checks
    markdown = (report / "report.md").read_text(encoding="utf-8")
    assert "## Checks\n\n- warning: degenerate (open): 1 of 117 responses are the reference itself\n" in markdown


def test_eval_checks_none_and_doctor_with_a_model(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "open.jsonl", MIXED)
    proc = run_main("eval", "--bench", bench, "--model", "length", "--no-cache", "--checks", "none", "--output-json",
                    tmp_path / "m.json", monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "checks" not in json.loads((tmp_path / "m.json").read_text())
    proc = run_main("doctor", "--bench", bench, "--model", "length", "--no-cache", "--output-json",
                    tmp_path / "d.json", monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    found = {c["name"]: c for c in json.loads((tmp_path / "d.json").read_text())["checks"] if c["subset"] is None}
    assert found["batch_invariance"]["level"] == "ok" and found["batch_invariance"]["value"]["responses"] == 9
    assert "findings warn" in proc.stdout


def test_doctor_refuses_a_bad_sample_with_one_line(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "open.jsonl", MIXED)
    proc = run_main("doctor", "--bench", bench, "--model", "length", "--sample", "0",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert_user_error(proc, "--sample", "must be at least 1")


def test_eval_of_a_real_model_with_every_check(tiny_rm, tmp_path, monkeypatch, capsys):
    rows = [row("p1", ["很长" * 40, "短"], [1, 2]), row("p2", ["好", "也很长" * 30], [1, 2])]
    bench, out = write_jsonl(tmp_path / "open.jsonl", rows), tmp_path / "m.json"
    args = ("eval", "--bench", bench, "--model", tiny_rm, "--max-length", "32", "--batch-size", "4", "--device", "cpu")
    proc = run_main(
        *args, "--no-cache", "--checks", "all", "--output-json", out, monkeypatch=monkeypatch, capsys=capsys
    )
    assert proc.returncode == 0, proc.stderr
    found = {c["name"]: c for c in json.loads(out.read_text())["checks"]}
    assert list(found) == list(CHECKS)
    assert found["truncation"]["level"] == "warning" and found["truncation"]["value"]["truncated"] == 2
    assert found["batch_invariance"]["level"] == "ok" and found["batch_invariance"]["value"]["batch_sizes"] == [1, 4]
    assert "check warning truncation (open): 2 of 4 responses (50.0%) do not fit in 32 tokens" in proc.stderr


def test_eval_refuses_an_unknown_checks_value_with_one_line(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "open.jsonl", MIXED)
    proc = run_main("eval", "--bench", bench, "--model", "length", "--checks", "some", monkeypatch=monkeypatch,
                    capsys=capsys)  # fmt: skip
    assert_user_error(proc, "--checks")


def test_score_ties_upstream_numbers_are_eval_compat_upstreams_with_prompts_without_a_ranked_pair():
    # p5 and p6 have no ranked pair (one response; two tied in gold): upstream counts them as exact matches
    rows = [*MIXED, row("p5", ["只有一个"], [1]), row("p6", ["甲", "乙"], [1, 1], category="代码")]
    scores = {(r["id"], rid): 0.0 for r in rows for rid in r["rank"]}
    scores[("p2", "r2")], scores[("p1", "r2")] = -1.0, 1.0  # p2 right, p1 reversed, the rest tied
    bench = bench_of(rows)
    upstream = cheems.evaluate(bench, scores, resamples=0, compat="upstream").subsets["open"]
    found = by_subset(run_checks(CheckContext(cheems.evaluate(bench, scores, resamples=0), records=bench),
                                 ["score_ties"]), "score_ties")["open"]  # fmt: skip
    assert found.value["upstream"] == {"accuracy": upstream.accuracy, "exact_match": upstream.exact_match}
    assert found.value["upstream"]["exact_match"] == pytest.approx((2 / 3 + 3 / 3) / 2)


def test_score_ties_shows_cheemsrm_rule_by_default_where_it_differs():
    scores = {(r["id"], rid): 0.0 for r in MIXED for rid in r["rank"]}
    scores[("p2", "r2")] = -1.0  # one right pair, the rest tied: CheemsRM's exact match keeps every prompt
    found = by_subset(run_checks(evaluated(MIXED, scores), ["score_ties"]), "score_ties")["open"]
    assert found.value["strict"] == {"accuracy": 0.25, "exact_match": 0.25}
    assert found.value["upstream"] == {"accuracy": 0.25, "exact_match": 1.0}
