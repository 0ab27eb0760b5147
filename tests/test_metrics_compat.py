"""``--compat strict|upstream``: each upstream rule against small cases computed by hand from the upstream code's
definitions (AlignRM/CheemsRM ``get_rank_metrics`` and ``eval_rm.py``, allenai/reward-bench ``rewardbench/utils.py``
``reroll_and_score_dataset`` and ``process_single_model``), strict and upstream differing on tie files, and the
option through the real CLI."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from cheems.analysis.bon import bon
from cheems.data.schema import Record
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.evaluate.bench import add_intervals, evaluate_scores, report_from_outcomes
from cheems.evaluate.benchmark_report import benchmark_report
from cheems.evaluate.evaluation import evaluate as evaluate_by
from cheems.evaluate.evaluation import score
from cheems.metrics.cheemsbench import overall, subset_metrics
from cheems.metrics.compat import SCORING_INPUT, UPSTREAM_RULES, Compat
from cheems.metrics.outcomes import PairOutcome, PromptOutcome
from cheems.metrics.pairwise import pairwise_subset
from cheems.models import ScoreCache
from helpers import assert_user_error, run_main, write_jsonl

# ------------------------------------------------------------------ CheemsBench: a tie.jsonl-style file


def bench_row(pid: str, category: str, rank: dict[str, int], **extra) -> dict:
    return {
        "id": pid,
        "input": f"问题{pid}",
        "category": [category],
        "responses": [{"id": rid, "content": f"{pid}的回答{rid}"} for rid in rank],
        "rank": rank,
        **extra,
    }


# p1: a>b>c scored 1, 1, 0 (a tie in a ranked pair); p2 reversed; p3 has no ranked pair (a and b both rank 1);
# p4 a tie; p5 right.
TIE_ROWS = [
    bench_row("p1", "A", {"a": 1, "b": 2, "c": 3}),
    bench_row("p2", "A", {"a": 1, "b": 2}),
    bench_row("p3", "A", {"a": 1, "b": 1}),
    bench_row("p4", "B", {"a": 1, "b": 2}),
    bench_row("p5", "B", {"a": 1, "b": 2}),
]
TIE_SCORES = {
    ("p1", "a"): 1.0,
    ("p1", "b"): 1.0,
    ("p1", "c"): 0.0,
    ("p2", "a"): 0.0,
    ("p2", "b"): 1.0,
    ("p3", "a"): 0.0,
    ("p3", "b"): 0.0,
    ("p4", "a"): 2.0,
    ("p4", "b"): 2.0,
    ("p5", "a"): 3.0,
    ("p5", "b"): 1.0,
}
# By hand. Accuracy (score(chosen) > score(rejected), a tie wrong, under both: upstream's ``gt``): A has 4 pairs,
# 2 right (p1's a>c, b>c); B 2 pairs, 1 right: 0.5 and 0.5.
# strict exact match: A over p1, p2 (p3 has no pair): 0/2; B: p4 tie 0, p5 1: 1/2.
# upstream (exact_match = 0 only when rewards[l] < rewards[r] for a ranked pair; every prompt appended):
# A: p1 1 (its tie does not break it), p2 0, p3 1: 2/3; B: p4 1, p5 1: 1.
STRICT = {"accuracy": 0.5, "exact_match": 0.25, "n_prompts": 4, "overall": (0.5 + 0.25) / 2}
UPSTREAM = {"accuracy": 0.5, "exact_match": (2 / 3 + 1) / 2, "n_prompts": 5, "overall": (0.5 + 5 / 6) / 2}
UPSTREAM_CATEGORIES = {"A": (0.5, 2 / 3, 3), "B": (0.5, 1.0, 2)}


def tie_bench() -> dict[str, list[Record]]:
    return {"tie": [Record.model_validate(r) for r in TIE_ROWS]}


@pytest.mark.parametrize("compat, want", [("strict", STRICT), ("upstream", UPSTREAM)])
def test_cheemsbench_exact_match_on_a_tie_file_by_hand(compat: Compat, want: dict) -> None:
    report = evaluate_by(tie_bench(), TIE_SCORES, resamples=0, compat=compat)
    subset = report.subsets["tie"]
    assert subset.accuracy == pytest.approx(want["accuracy"])
    assert subset.exact_match == pytest.approx(want["exact_match"])
    assert subset.n_prompts == want["n_prompts"] and subset.n_pairs == 6
    assert report.overall == pytest.approx(want["overall"])
    if compat == "upstream":
        for name, (accuracy, exact, n) in UPSTREAM_CATEGORIES.items():
            got = subset.categories[name]
            assert (got.accuracy, got.exact_match, got.n_prompts) == pytest.approx((accuracy, exact, n))


def test_the_json_records_upstream_rules_and_strict_json_is_unchanged():
    strict = evaluate_by(tie_bench(), TIE_SCORES, resamples=0).to_dict()
    assert "compat" not in strict and "rules" not in strict  # today's JSON, byte for byte
    upstream = evaluate_by(tie_bench(), TIE_SCORES, resamples=0, compat="upstream").to_dict()
    assert upstream["compat"] == "upstream"
    assert upstream["rules"] == {**UPSTREAM_RULES["cheems"], "scoring_input": SCORING_INPUT}
    assert {k: v for k, v in upstream.items() if k not in ("compat", "rules")}.keys() == strict.keys()


def test_upstream_exact_match_of_a_judge_is_the_strict_one():
    """CheemsRM's generative_evaluate counts a prompt exact iff every judgement is right, over prompts with pairs."""
    tie = PromptOutcome("p", "c", [PairOutcome("a", "b", False, 1, 1)])  # a judge's wrong (or tied) verdict
    none = PromptOutcome("q", "c", [])
    for compat in ("strict", "upstream"):
        metrics = subset_metrics([tie, none], compat)
        assert (metrics.exact_match, metrics.n_prompts) == (0.0, 1)


def scored_bench(seed: int) -> list[PromptOutcome]:
    """Prompts of a scorer with many ties (scores 0-2), 0-3 pairs each, in three categories."""
    rng = random.Random(seed)
    prompts = []
    for i in range(30):
        pairs = []
        for j in range(0 if i % 7 == 3 else rng.randint(1, 3)):
            chosen, rejected = float(rng.randint(0, 2)), float(rng.randint(0, 2))
            pairs.append(PairOutcome(f"c{j}", f"r{j}", chosen > rejected, 1, 1, chosen, rejected))
        prompts.append(PromptOutcome(f"p{i}", f"cat{i % 3}", pairs))
    return prompts


def test_upstream_intervals_equal_subset_metrics_on_each_documented_draw():
    """The bootstrap under upstream resamples every prompt (those without pairs count) and recomputes the metrics
    as subset_metrics(..., "upstream") does."""
    bench = {"s": scored_bench(3)}
    resamples, seed, level = 200, 5, 0.9
    cis = add_intervals(report_from_outcomes(bench, compat="upstream"), resamples, seed, level).intervals
    assert cis is not None
    prompts = bench["s"]
    picks = np.random.default_rng(seed).integers(0, len(prompts), size=(resamples, len(prompts)))
    draws = [subset_metrics([prompts[i] for i in row], "upstream") for row in picks]
    for metric in ("accuracy", "exact_match"):
        values = [getattr(m, metric) for m in draws]
        assert getattr(cis.subsets["s"], metric) == pytest.approx(
            tuple(np.percentile(values, [50 * (1 - level), 50 * (1 + level)]))
        )
    totals = [overall({"s": m}) for m in draws]
    assert cis.overall == pytest.approx(tuple(np.percentile(totals, [5, 95])))
    strict = add_intervals(report_from_outcomes(bench), resamples, seed, level).intervals
    assert strict is not None
    assert strict.subsets["s"].exact_match != cis.subsets["s"].exact_match  # the ties make them differ


# ------------------------------------------------------------------ the scoring input


class SeenScorer:
    """A real scorer: scores by the number of turns of the prompt it is given, and keeps what it was given."""

    name = "turns"

    def __init__(self) -> None:
        self.seen: list = []

    def fingerprint(self) -> str:
        return "turns-v1"

    def score(self, items: Sequence) -> list[float]:
        self.seen.extend(items)
        return [float(1 if isinstance(prompt, str) else len(prompt)) + len(text) / 100 for prompt, text in items]


def test_upstream_scores_without_the_sys_prompt_and_never_shares_the_cache(tmp_path):
    bench = {"sys": [Record.model_validate(bench_row("p1", "A", {"a": 1, "b": 2}, sys_prompt="你是助手。"))]}
    cache = ScoreCache(tmp_path / "scores.sqlite")
    strict_scorer, upstream_scorer = SeenScorer(), SeenScorer()
    strict = score(bench, strict_scorer, cache=cache)
    upstream = score(bench, upstream_scorer, cache=cache, compat="upstream")
    # strict: the system turn, then the user turn; upstream: the user turn alone (CheemsRM's rm_evaluate)
    assert [type(p) for p, _ in strict_scorer.seen] == [list, list]
    assert [m.role for m in strict_scorer.seen[0][0]] == ["system", "user"]
    assert [p for p, _ in upstream_scorer.seen] == ["问题p1", "问题p1"]  # scored afresh: not the strict cache entry
    assert strict[("p1", "a")] == 2.0 + len("p1的回答a") / 100 and upstream[("p1", "a")] == 1.0 + len("p1的回答a") / 100
    again = SeenScorer()
    assert score(bench, again, cache=cache, compat="upstream") == upstream and not again.seen  # cached


@pytest.fixture
def turns_scorer():
    """``turns`` as a registered scorer (``--model turns``), removed after the test: the sys_prompt turns a
    response's length from a plus into a minus, so strict and upstream scores rank the other way round."""
    from cheems.models.registry import SCORERS, register_scorer

    class Turns(SeenScorer):
        def score(self, items: Sequence) -> list[float]:
            return [
                (-1.0 if isinstance(prompt, list) and len(prompt) > 1 else 1.0) * len(text) for prompt, text in items
            ]

    register_scorer("turns", form="turns", help="a test's scorer that reads the sys_prompt")(
        lambda spec, options: Turns()
    )
    yield
    SCORERS.remove("turns")


def test_score_compat_upstream_gives_eval_scores_compat_upstream_the_upstream_numbers(
    turns_scorer, tmp_path, monkeypatch, capsys
):
    rows = [bench_row(f"p{i}", "A", {"a": 1, "b": 2}, sys_prompt="你是助手。") for i in range(3)]
    for i, row in enumerate(rows):  # the better answer is longer in p0, shorter in p1 and p2
        row["responses"][0]["content"] += "好" * (5 if i == 0 else 0)
        row["responses"][1]["content"] += "坏" * (0 if i == 0 else 5)
    bench = write_jsonl(tmp_path / "sys.jsonl", rows)
    got = {}
    for compat in ("strict", "upstream"):
        scores, out = tmp_path / f"{compat}.scores.jsonl", tmp_path / f"{compat}.json"
        args = ["score", "--model", "turns", "--bench", bench, "-o", scores, "--no-cache", "--compat", compat]
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        args = ["eval", "--bench", bench, "--scores", scores, "--compat", "upstream", "--resamples", "0"]
        proc = run_main(*args, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        got[compat] = json.loads(out.read_text(encoding="utf-8"))["overall"]
    out = tmp_path / "model.json"
    args = ["eval", "--bench", bench, "--model", "turns", "--no-cache", "--compat", "upstream", "--resamples", "0"]
    proc = run_main(*args, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    upstream = json.loads(out.read_text(encoding="utf-8"))["overall"]
    assert got["upstream"] == upstream  # scored as eval --model --compat upstream scores: the same numbers
    assert got["strict"] != upstream  # a strict scores file read the sys_prompt


def test_bon_upstream_scores_without_the_sys_prompt_and_says_so():
    pool = [Record.model_validate(bench_row("p1", "A", {"a": 1, "b": 2}, sys_prompt="你是助手。"))]
    scorer = SeenScorer()
    result = bon(pool, scorer, compat="upstream")
    assert [p for p, _ in scorer.seen] == ["问题p1", "问题p1"]
    assert result.to_dict()["compat"] == "upstream"
    assert result.to_dict()["rules"] == {"scoring_input": SCORING_INPUT}
    assert "compat" not in bon(pool, SeenScorer()).to_dict()


# ------------------------------------------------------------------ RewardBench 2


def rb2_row(pid: str, subset: str, chosen: list[float], rejected: list[float]) -> tuple[dict, dict]:
    """A RewardBench 2 prompt as the importer writes it (chosen-i rank 1, rejected-i rank 2) and its scores."""
    ids = [f"chosen-{i}" for i in range(1, len(chosen) + 1)] + [f"rejected-{i}" for i in range(1, len(rejected) + 1)]
    rank = {rid: 1 if rid.startswith("chosen") else 2 for rid in ids}
    scores = {(pid, rid): s for rid, s in zip(ids, chosen + rejected)}
    return bench_row(pid, subset, rank), scores


RB2 = [
    rb2_row("1", "Factuality", [2.0], [2.0, 2.0, 0.0]),  # a 3-way tie at the top: upstream 1/3, strict 0
    rb2_row("2", "Factuality", [3.0], [1.0, 1.0, 1.0]),  # right: 1
    rb2_row("3", "Factuality", [1.0], [2.0]),  # wrong: 0
    rb2_row("ref:1", "Ties", [5.0], [3.0, 1.0]),  # margin correct-incorrect 2, accurate
    rb2_row("tied:1", "Ties", [5.0, 4.5], [3.0]),  # spread 0.5, margin 1.5, accurate
    rb2_row("ref:2", "Ties", [2.0], [2.0]),  # margin 0: not accurate
    rb2_row("tied:2", "Ties", [6.0, 2.0], [1.0]),  # spread 4, margin 1, accurate
]
# Ties by hand (process_single_model): tied accuracy 1, ref accuracy 1/2; over N = 1, 2: spread [0.5, 4],
# margin(tied) [1.5, 1], margin(ref) [2, 0], their minimum [1.5, 0]; preferred mean([1.5 > 0.5, 1 > 4]) = 1/2,
# preferred hard mean([1.5 > 0.5, 0 > 4]) = 1/2; margin score mean(tanh(1.5/0.5 - 1), tanh(0/4 - 1)).
TIES_UPSTREAM = 0.3 * 1 + 0.3 * 0.5 + 0.2 * 0.5 + 0.2 * 0.5 + 0.01 * (math.tanh(2) + math.tanh(-1)) / 2
FACTUALITY_UPSTREAM = (1 / 3 + 1 + 0) / 3


def rb2_report(compat: Compat) -> dict:
    bench = {"rb2": [Record.model_validate(row) for row, _ in RB2]}
    scores = {k: v for _, s in RB2 for k, v in s.items()}
    return benchmark_report("bon", bench, evaluate_scores(bench, scores), compat).to_dict()


def test_rewardbench2_strict_counts_a_top_tie_and_the_ties_rows_as_wrong_or_right():
    subset = rb2_report("strict")["subsets"]["rb2"]
    assert subset["categories"]["Factuality"]["accuracy"] == pytest.approx(1 / 3)
    assert subset["categories"]["Ties"]["accuracy"] == pytest.approx(3 / 4)
    assert subset["accuracy"] == pytest.approx((1 / 3 + 3 / 4) / 2)


def test_rewardbench2_upstream_top_tie_credit_and_weighted_ties_score_by_hand():
    out = rb2_report("upstream")
    subset = out["subsets"]["rb2"]
    assert subset["categories"]["Factuality"]["accuracy"] == pytest.approx(FACTUALITY_UPSTREAM)
    assert subset["categories"]["Ties"]["accuracy"] == pytest.approx(TIES_UPSTREAM)
    assert TIES_UPSTREAM == pytest.approx(0.651012167120600)
    assert subset["accuracy"] == pytest.approx((FACTUALITY_UPSTREAM + TIES_UPSTREAM) / 2)
    assert subset["exact_match"] == subset["accuracy"]
    assert subset["pooled_accuracy"] == pytest.approx((1 / 3 + 1 + 0 + 1 + 1 + 0 + 1) / 7)
    assert out["compat"] == "upstream" and set(out["rules"]) == {"top_tie", "ties_subset", "scoring_input"}


def test_rewardbench2_ties_intervals_draw_ref_and_tied_together_and_count_repeats():
    """Under upstream the bootstrap's units are Factuality's prompts and Ties' N (ref:N with tied:N), in order of
    first appearance; a unit drawn k times counts k times (it was counted once: each draw a ~63% subsample)."""
    bench = {"rb2": [Record.model_validate(row) for row, _ in RB2]}
    report = evaluate_scores(bench, {k: v for _, s in RB2 for k, v in s.items()})
    resamples, seed = 400, 7
    got = benchmark_report("bon", bench, report, "upstream", resamples=resamples, seed=seed).intervals
    factuality = [1 / 3, 1.0, 0.0]  # units 0-2; units 3, 4 are Ties N = 1, 2 (by hand above)
    draws = []
    for row in np.random.default_rng(seed).integers(0, 5, (resamples, 5)):
        means = []
        if picked := [factuality[u] for u in row if u < 3]:
            means.append(sum(picked) / len(picked))
        c1, c2 = int(np.sum(row == 3)), int(np.sum(row == 4))
        if c1 + c2:
            w1 = c1 / (c1 + c2)  # ref:1 accurate and both its pairs preferred; N = 2 neither; tied always accurate
            means.append(0.3 + 0.7 * w1 + 0.01 * (w1 * math.tanh(2) + (1 - w1) * math.tanh(-1)))
        draws.append(sum(means) / len(means))
    want = np.percentile(draws, [2.5, 97.5])
    assert got.subsets["rb2"] == pytest.approx(tuple(want))
    assert got.undrawn == {}


def test_a_ties_subset_upstream_cannot_score_is_refused_with_one_line():
    rows = [rb2_row("odd", "Ties", [2.0, 1.0], [0.0]), rb2_row("ref:1", "Ties", [2.0], [0.0])]
    bench = {"rb2": [Record.model_validate(row) for row, _ in rows]}
    result = evaluate_scores(bench, {k: v for _, s in rows for k, v in s.items()})
    with pytest.raises(InputError, match=r"prompt 'odd' of the Ties subset .* is not named ref:N or tied:N"):
        benchmark_report("bon", bench, result, "upstream")
    rows = [rb2_row("ref:1", "Ties", [2.0], [0.0]), rb2_row("tied:2", "Ties", [2.0, 1.0], [0.0])]
    bench = {"rb2": [Record.model_validate(row) for row, _ in rows]}
    result = evaluate_scores(bench, {k: v for _, s in rows for k, v in s.items()})
    with pytest.raises(InputError, match="needs prompts ref:N and tied:N of the same N"):
        benchmark_report("bon", bench, result, "upstream")


def test_a_rewardbench2_record_without_chosen_1_is_refused_at_its_line_under_upstream(tmp_path, monkeypatch, capsys):
    row, scores = rb2_row("4", "Factuality", [2.0, 1.0], [0.0])
    row["responses"] = [r | {"id": r["id"].replace("chosen-1", "chosen-3")} for r in row["responses"]]
    row["rank"] = {k.replace("chosen-1", "chosen-3"): v for k, v in row["rank"].items()}
    rows = [RB2[0][0], row]
    bench, out = write_jsonl(tmp_path / "rb2.jsonl", rows), tmp_path / "out.json"
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "bon", "--output-json", out]
    proc = run_main(*args, "--compat", "upstream", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{bench}:2: field 'responses': prompt '4' has RewardBench 2's response ids", "chosen-1")
    assert not out.exists()
    proc = run_main(*args, "--compat", "strict", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr  # strict reads no chosen-1
    records = {"rb2": [Record.model_validate(r) for r in rows]}
    given = {(r["id"], x["id"]): float(len(x["content"])) for r in rows for x in r["responses"]}
    with pytest.raises(InputError, match="bench file 'rb2'.*no 'chosen-1'"):
        benchmark_report("bon", records, evaluate_scores(records, given), "upstream")


def test_rewardbench_file_missing_a_section_scores_it_0_under_upstream_as_calculate_scores_per_section():
    rows = [bench_row("c1", "alpacaeval-easy", {"a": 1, "b": 2}), bench_row("s1", "donotanswer", {"a": 1, "b": 2})]
    bench = {"rb": [Record.model_validate(r) for r in rows]}
    result = evaluate_scores(bench, {("c1", "a"): 1.0, ("c1", "b"): 0.0, ("s1", "a"): 0.0, ("s1", "b"): 1.0})
    strict = benchmark_report("rewardbench", bench, result, "strict").to_dict()
    upstream = benchmark_report("rewardbench", bench, result, "upstream").to_dict()
    assert strict["subsets"]["rb"]["accuracy"] == 0.5  # Chat 1, Safety 0: the mean of the two present
    sections = upstream["subsets"]["rb"]["sections"]
    assert list(sections) == ["Chat", "Chat Hard", "Safety", "Reasoning"]
    assert sections["Chat Hard"] == {"accuracy": 0.0, "n_prompts": 0, "n_pairs": 0}
    assert upstream["subsets"]["rb"]["accuracy"] == 0.25  # (1 + 0 + 0 + 0) / 4, as upstream
    assert "missing_section" in upstream["rules"]


def test_judgebench_headline_is_its_pooled_overall_in_eval_and_suite(tmp_path, monkeypatch, capsys):
    # mmlu-pro: 3 pairs, 3 right; livecodebench: 1 pair, wrong. Overall 3/4; the mean of the groups 1/2
    groups = ["mmlu-pro", "mmlu-pro", "mmlu-pro", "livecodebench"]
    rows = [bench_row(f"j{i}", g, {"A": 1, "B": 2}) for i, g in enumerate(groups)]
    for row, longer in zip(rows, ["A", "A", "A", "B"]):  # the length scorer picks the longer response
        next(r for r in row["responses"] if r["id"] == longer)["content"] += "长" * 10
    bench = write_jsonl(tmp_path / "judgebench.jsonl", rows)
    outs = {}
    for metric in ("judgebench", "pairwise"):
        outs[metric] = tmp_path / f"{metric}.json"
        args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", metric, "--resamples", "0"]
        proc = run_main(*args, "--output-json", outs[metric], monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
    got = json.loads(outs["judgebench"].read_text(encoding="utf-8"))
    sub = got["subsets"]["judgebench"]
    assert sub["accuracy"] == sub["pooled_accuracy"] == 0.75 and sub["category_mean"] == 0.5
    assert got["overall"] == 0.75
    assert json.loads(outs["pairwise"].read_text(encoding="utf-8"))["overall"] == 0.5
    config = tmp_path / "suite.yaml"
    config.write_text(
        "benches:\n  - name: jb\n    bench: judgebench.jsonl\n    metric: judgebench\n    resamples: 0\n",
        encoding="utf-8",
    )
    out = tmp_path / "suite.json"
    args = ["suite", config, "--model", "length", "--no-cache", "--output-json", out]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    suite = json.loads(out.read_text(encoding="utf-8"))
    assert suite["benches"]["jb"]["score"] == 0.75


def test_readme_differences_table_names_every_upstream_rule_and_the_audits_findings():
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("### Strict or upstream rules") : readme.index("### An evaluation that checks itself")]
    for phrase in (
        "calculate_scores_per_section",  # RewardBench 1 file missing a section
        "a category with no ranked pair",  # CheemsBench: upstream NaN
        "CheemsRM computes no ECE on the bench",
        "JudgeBench's headline",
        "`score`",
    ):
        assert phrase in table, phrase


def test_rmb_best_of_n_keeps_its_rule_under_upstream():
    """RMB's best-of-N ids (best, loser-i) are not RewardBench 2's: a tie at the top stays wrong."""
    bench = {"rmb": [Record.model_validate(bench_row("bon-1", "Chat", {"best": 1, "loser-1": 2, "loser-2": 2}))]}
    result = evaluate_scores(bench, {("bon-1", "best"): 1.0, ("bon-1", "loser-1"): 1.0, ("bon-1", "loser-2"): 0.0})
    assert benchmark_report("bon", bench, result, "upstream").subsets["rmb"]["accuracy"] == 0.0


def test_judgebench_score_tie_is_not_right_under_both_rules():
    """JudgeBench's RM judges say B>A on a tie; its default run asks both orders, flips the second: counter 0."""
    tie = PromptOutcome("u1", "mmlu-pro", [PairOutcome("A", "B", False, 1, 1, 0.5, 0.5)])
    right = PromptOutcome("u2", "mmlu-pro", [PairOutcome("B", "A", True, 1, 1, 0.7, 0.1)])
    assert pairwise_subset([tie, right], [], "judgebench")["accuracy"] == 0.5
    records = [Record.model_validate(bench_row(o.prompt_id, o.category, {"A": 1, "B": 2})) for o in (tie, right)]
    bench = {"jb": records}
    scores = {("u1", "A"): 0.5, ("u1", "B"): 0.5, ("u2", "A"): 0.7, ("u2", "B"): 0.1}
    result = evaluate_scores(bench, scores)
    for compat in ("strict", "upstream"):
        assert benchmark_report("pairwise", bench, result, compat).subsets["jb"]["accuracy"] == 0.5


# ------------------------------------------------------------------ the CLI


@pytest.fixture
def tie_files(tmp_path: Path) -> tuple[Path, Path]:
    bench = write_jsonl(tmp_path / "tie.jsonl", TIE_ROWS)
    scores = write_jsonl(
        tmp_path / "scores.jsonl", [{"prompt_id": p, "response_id": r, "score": s} for (p, r), s in TIE_SCORES.items()]
    )
    return bench, scores


@pytest.mark.parametrize("compat, want", [(None, STRICT), ("strict", STRICT), ("upstream", UPSTREAM)])
def test_eval_compat_through_the_cli(tie_files, tmp_path, monkeypatch, capsys, compat, want):
    bench, scores = tie_files
    out = tmp_path / "out.json"
    given = ["--compat", compat] if compat else []
    proc = run_main(
        "eval", "--bench", bench, "--scores", scores, "--output-json", out, "--resamples", "50", *given,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text(encoding="utf-8"))
    subset = got["subsets"]["tie"]
    assert (subset["accuracy"], subset["exact_match"], subset["n_prompts"]) == pytest.approx(
        (want["accuracy"], want["exact_match"], want["n_prompts"])
    )
    assert got["overall"] == pytest.approx(want["overall"])
    assert got.get("compat") == ("upstream" if compat == "upstream" else None)
    assert ("compat upstream: exact_match, scoring_input follow the upstream code" in proc.stdout) is (
        compat == "upstream"
    )
    low, high = subset["exact_match_ci"]
    assert 0 <= low <= high <= 1


def test_compare_of_two_upstream_details_files_reports_the_evals_numbers(tie_files, tmp_path, monkeypatch, capsys):
    bench, scores = tie_files
    other = write_jsonl(  # a second scorer: every pair right but p1's b > c tied and p5 reversed
        tmp_path / "other.jsonl",
        [{"prompt_id": p, "response_id": r, "score": 0.0 if r == "b" else (1.0 if r == "a" else 0.0)}
         for (p, r) in TIE_SCORES],
    )  # fmt: skip
    evals, details = {}, {}
    for name, given, compat in (("a", scores, "upstream"), ("b", other, "upstream"), ("s", scores, "strict")):
        details[name], out = tmp_path / f"{name}.details.jsonl", tmp_path / f"{name}.json"
        proc = run_main(
            "eval", "--bench", bench, "--scores", given, "--compat", compat, "--details", details[name],
            "--output-json", out, "--resamples", "0", monkeypatch=monkeypatch, capsys=capsys,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        evals[name] = json.loads(out.read_text(encoding="utf-8"))
    out = tmp_path / "cmp.json"
    proc = run_main("compare", details["a"], details["b"], "--resamples", "50", "--output-json", out,
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["compat"] == "upstream"
    assert "compat upstream: exact match as the details files' evaluations computed it" in proc.stdout
    for metric in ("accuracy", "exact_match"):
        d = got["subsets"]["tie"][metric]
        assert (d["a"], d["b"]) == pytest.approx(
            (evals["a"]["subsets"]["tie"][metric], evals["b"]["subsets"]["tie"][metric])
        )
    assert (got["overall"]["a"], got["overall"]["b"]) == pytest.approx((evals["a"]["overall"], evals["b"]["overall"]))
    assert got["subsets"]["tie"]["exact_match"]["a"] == pytest.approx(UPSTREAM["exact_match"])
    # strict against upstream: refused, nothing written
    mixed = tmp_path / "mixed.json"
    proc = run_main(
        "compare", details["s"], details["a"], "--output-json", mixed, monkeypatch=monkeypatch, capsys=capsys
    )
    assert_user_error(proc, "follow different rules", "--compat")
    assert not mixed.exists()


def test_eval_metric_bon_compat_through_the_cli(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "rb2.jsonl", [row for row, _ in RB2])
    rows = [{"prompt_id": p, "response_id": r, "score": v} for _, s in RB2 for (p, r), v in s.items()]
    scores = write_jsonl(tmp_path / "s.jsonl", rows)
    out = tmp_path / "out.json"
    args = ["eval", "--bench", bench, "--scores", scores, "--metric", "bon", "--output-json", out, "--compat"]
    proc = run_main(*args, "upstream", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["subsets"]["rb2"]["categories"]["Ties"]["accuracy"] == pytest.approx(TIES_UPSTREAM)
    assert got["compat"] == "upstream" and "ties_subset" in got["rules"]


def test_bon_compat_through_the_cli(tie_files, tmp_path, monkeypatch, capsys):
    pool, scores = tie_files
    picks, out = tmp_path / "picks.jsonl", tmp_path / "bon.json"
    args = ["bon", pool, "--scores", scores, "-o", picks, "--output-json", out, "--compat", "upstream"]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["compat"] == "upstream" and got["rules"] == {"scoring_input": SCORING_INPUT}
    assert len(picks.read_text(encoding="utf-8").splitlines()) == len(TIE_ROWS)


@pytest.mark.parametrize("command", ["eval", "bon"])
def test_a_bad_compat_value_is_one_line(tie_files, tmp_path, command, cheems_cli):
    bench, scores = tie_files
    out = tmp_path / "out.json"
    where = ["--bench", bench] if command == "eval" else [bench, "-o", tmp_path / "picks.jsonl"]
    proc = cheems_cli(command, *where, "--scores", scores, "--output-json", out, "--compat", "exact")
    assert_user_error(proc, "--compat", "'exact' is not one of 'strict', 'upstream'")
    assert not out.exists() and not (tmp_path / "picks.jsonl").exists()


# ------------------------------------------------------------------ official [id1, id2, p] annotations


def official_row(*annotations: list) -> dict:
    responses = [{"id": rid, "content": f"回答{rid}"} for rid in "xyz"]
    return {"id": "cb-1", "input": "问", "responses": responses, "annotations": list(annotations)}


def test_an_official_triple_with_p_1_names_the_better_first(tmp_path):
    path = write_jsonl(tmp_path / "off.jsonl", [official_row(["x", "y", "1"], ["z", "y", 1])])
    [record] = read_records(path).records
    assert [(c.a, c.b, c.label) for c in record.comparisons] == [("x", "y", "a"), ("z", "y", "a")]


@pytest.mark.parametrize("p", ["2", 2, "tie", "0", True])
def test_an_official_triple_with_another_p_is_refused_with_its_line(tmp_path, monkeypatch, capsys, p):
    """CheemsRM's loader (cheems/train/dataset.py) makes a pair of a triple only when p == "1" and drops the rest."""
    rows = [official_row(["x", "y", "1"]), official_row(["x", "y", "1"], ["y", "z", p])]
    path = write_jsonl(tmp_path / "off.jsonl", rows)
    out = tmp_path / "out.jsonl"
    proc = run_main("import", "official", path, "-o", out, monkeypatch=monkeypatch, capsys=capsys)
    line = assert_user_error(proc, f"{path}:2", "annotations[1]", 'p must be "1"', "CheemsRM drops")
    assert "write the better id first" in line
    assert not out.exists()


def test_leaderboard_reads_upstream_jsons_and_refuses_to_mix_rules(tmp_path, monkeypatch, capsys):
    files = {}
    for name, compat in (("strict-a", "strict"), ("upstream-a", "upstream"), ("upstream-b", "upstream")):
        files[name] = tmp_path / f"{name}.json"
        report = evaluate_by(tie_bench(), TIE_SCORES, source=name, resamples=0, compat=compat)  # type: ignore[arg-type]
        files[name].write_text(json.dumps(report.to_dict()), encoding="utf-8")
    proc = run_main("leaderboard", files["upstream-a"], files["upstream-b"], monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert f"{UPSTREAM['overall']:.3f}" in proc.stdout
    proc = run_main("leaderboard", files["strict-a"], files["upstream-a"], monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{files['upstream-a']}: field 'compat': compat upstream differs from compat strict")


@pytest.mark.parametrize("compat", ["strict", "upstream"])
def test_a_judge_is_asked_without_the_sys_prompt_under_upstream(tmp_path, monkeypatch, capsys, compat):
    """CheemsRM's generative_evaluate asks its judge item['input'] alone; strict asks the prompt training sees."""
    from fault_server import FakeJudgeServer

    system = "你是一位严谨的老师。"
    bench = write_jsonl(tmp_path / "sys.jsonl", [bench_row("p1", "A", {"a": 1, "b": 2}, sys_prompt=system)])
    out = tmp_path / "out.json"
    with FakeJudgeServer() as server:
        proc = run_main(
            "eval", "--bench", bench, "--judge-model", "fake-judge", "--base-url", server.url,
            "--cache", tmp_path / "c.sqlite", "--no-progress", "--output-json", out, "--compat", compat,
            monkeypatch=monkeypatch, capsys=capsys, env={"OPENAI_API_KEY": "test-key"},
        )  # fmt: skip
        asked = json.dumps(server.bodies, ensure_ascii=False)
    assert proc.returncode == 0, proc.stderr
    assert "问题p1" in asked and (system in asked) is (compat == "strict")
    assert json.loads(out.read_text(encoding="utf-8")).get("compat") == ("upstream" if compat == "upstream" else None)
