"""Bias analysis (Figure 15): numbers on hand-made files worked out by hand, ``cheems analyze bias`` as a
user runs it, and the page in a real headless Chromium.

The judge file ``JUDGED`` holds ten comparisons whose shown order is known. Each comparison, as
(first shown, second shown) lengths and who won:

    c1  10 vs 30   second      c6  10 vs 60   first
    c2  30 vs 10   first       c7 100 vs 60   first
    c3  30 vs 60   first       c8 100 vs 10   second
    c4  60 vs 30   tie         c9  30 vs 100  first
    c5  60 vs 10   first       c10 20 vs 20   second

Decisive: 9, first shown wins 6 (c2 c3 c5 c6 c7 c9); tie: c4. Different lengths: 8, the longer
wins in c1 c2 c5 c7 = 4; c10 is a decisive pair of equal length.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
from scipy.stats import beta, binomtest

from cheems.analysis.bias import (
    bias_page,
    bias_report,
    binomial_share,
    length_png,
    load_judgements,
    position_png,
    quantile_bins,
)
from cheems.errors import InputError
from cheems.evaluate.details import write_details
from cheems.metrics.outcomes import PairOutcome, PromptOutcome, ShownVerdict
from fault_server import FakeJudgeServer
from helpers import assert_user_error, run_cheems, run_main, write_jsonl

LENGTHS = {"r1": 10, "r2": 30, "r3": 60, "r4": 100}
# (a, b, label, shown, annotator)
COMPARISONS = [
    ("r1", "r2", "b", "ab", "张三"),
    ("r1", "r2", "b", "ba", "张三"),
    ("r2", "r3", "a", "ab", "张三"),
    ("r2", "r3", "tie", "ba", "张三"),
    ("r1", "r3", "b", "ba", "张三"),
    ("r1", "r3", "a", "ab", "李四"),
    ("r3", "r4", "b", "ba", "李四"),
    ("r1", "r4", "a", "ba", "李四"),
    ("r2", "r4", "a", "ab", "李四"),
]


def judged_rows() -> list[dict]:
    """The judge file: p1 with c1..c9, p2 (two responses of 20 characters) with c10."""
    return [
        {
            "id": "p1",
            "input": "问题一",
            "responses": [{"id": rid, "content": "字" * n} for rid, n in LENGTHS.items()],
            "comparisons": [
                {"a": a, "b": b, "label": label, "shown": shown, "annotator": who, "source": "judge"}
                for a, b, label, shown, who in COMPARISONS
            ],
        },
        {
            "id": "p2",
            "input": "问题二",
            "responses": [{"id": "r1", "content": "甲" * 20}, {"id": "r2", "content": "乙" * 20}],
            "comparisons": [
                {"a": "r1", "b": "r2", "label": "a", "shown": "ba", "annotator": "李四", "source": "judge"}
            ],
        },
    ]


def ranked_rows() -> list[dict]:
    """Rank only (as oasst1): 40 > 10 > 100 characters, and a tie between two answers."""
    return [
        {
            "id": "q1",
            "input": "排序",
            "responses": [
                {"id": "x", "content": "长" * 40},
                {"id": "y", "content": "短" * 10},
                {"id": "z", "content": "多" * 100},
            ],
            "rank": {"x": 1, "y": 2, "z": 3},
        },
        {
            "id": "q2",
            "input": "平局",
            "responses": [{"id": "x", "content": "一"}, {"id": "y", "content": "二二"}],
            "rank": {"x": 1, "y": 1},
        },
    ]


@pytest.fixture
def files(tmp_path) -> tuple[Path, Path]:
    return write_jsonl(tmp_path / "judged.jsonl", judged_rows()), write_jsonl(tmp_path / "ranked.jsonl", ranked_rows())


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact interval from the beta quantiles (its textbook definition, not binomtest)."""
    alpha = 1 - level
    low = 0.0 if k == 0 else beta.ppf(alpha / 2, k, n - k + 1)
    high = 1.0 if k == n else beta.ppf(1 - alpha / 2, k + 1, n - k)
    return low, high


def two_sided_p(k: int, n: int) -> float:
    """Two-sided binomial p-value against 1/2 by hand (the null is symmetric: twice the smaller tail)."""
    tail = sum(math.comb(n, i) for i in range(max(k, n - k), n + 1)) / 2**n
    return min(1.0, 2 * tail)


def test_position_and_longer_wins_by_hand(files):
    judged, _ = files
    report = bias_report(load_judgements([judged]), n_bins=3)
    (g,) = report.groups
    assert (g.name, g.comparisons, g.ties, g.with_order, g.position_ties) == (str(judged), 10, 1, 10, 1)
    assert (g.position.wins, g.position.n) == (6, 9)
    assert g.position.share == pytest.approx(6 / 9)
    assert g.position.ci == pytest.approx(clopper_pearson(6, 9), abs=1e-12)
    assert g.position.p_value == pytest.approx(260 / 512) == two_sided_p(6, 9)
    assert (g.longer.wins, g.longer.n, g.same_length) == (4, 8, 1)
    assert g.longer.p_value == pytest.approx(1.0)
    assert g.longer.ci == pytest.approx(clopper_pearson(4, 8), abs=1e-12)
    assert report.notes == []  # every comparison has its shown order


def test_length_bins_by_hand(files):
    """Δ = len(first) − len(second) of the 9 decisive comparisons, sorted, with first-wins:
    -70 1, -50 1, -30 1, -20 0, 0 0, 20 1, 40 1, 50 1, 90 0. Three quantile bins: edges at
    -70, -23.33, 26.67, 90 (numpy's linear quantiles)."""
    judged, _ = files
    curve = bias_report(load_judgements([judged]), n_bins=3).groups[0].curve
    assert not curve.mirrored
    got = [(b.low, b.high, b.median, b.wins.wins, b.wins.n) for b in curve.bins]
    assert got == [(-70, -30, -50, 3, 3), (-20, 20, 0, 1, 3), (40, 90, 50, 2, 3)]
    assert curve.bins[1].wins.ci == pytest.approx(clopper_pearson(1, 3), abs=1e-12)
    assert [p[:2] for p in curve.points()] == [(-50, 1.0), (0, pytest.approx(1 / 3)), (50, pytest.approx(2 / 3))]


def test_quantile_bins_keep_equal_values_together():
    # quantiles of [0, 0, 0, 5, 10] at 1/4, 1/2, 3/4 are 0, 0, 5: the zeros make one bin, so 2 bins, not 4
    bins = quantile_bins([0, 0, 0, 5, 10], [True, False, True, True, False], 4)
    assert [(b.low, b.high, b.wins.wins, b.wins.n) for b in bins] == [(0, 0, 2, 3), (5, 10, 1, 2)]
    assert [(b.low, b.wins.n) for b in quantile_bins([7, 7], [True, True], 10)] == [(7, 2)]
    assert quantile_bins([], [], 5) == []


def test_binomial_share_against_scipy():
    s = binomial_share(17, 40)
    test = binomtest(17, 40, 0.5)
    ci = test.proportion_ci(method="exact")
    assert (s.share, s.ci, s.p_value) == (17 / 40, (ci.low, ci.high), test.pvalue)
    assert s.ci == pytest.approx(clopper_pearson(17, 40), abs=1e-12)
    assert s.p_value == pytest.approx(two_sided_p(17, 40), abs=1e-15)
    assert binomial_share(0, 0).share is None


def test_ranks_give_pairs_without_position(files):
    """x(40) > y(10) > z(100): the longer wins x-y only; x = y is a tie. No order: a mirrored curve."""
    _, ranked = files
    loaded = load_judgements([ranked])
    report = bias_report(loaded, n_bins=3)
    (g,) = report.groups
    assert (g.comparisons, g.ties, g.with_order, g.position) == (4, 1, 0, None)
    assert (g.longer.wins, g.longer.n, g.same_length) == (1, 3, 0)
    assert g.curve.mirrored
    assert [(b.median, b.wins.wins, b.wins.n) for b in g.curve.bins] == [(30, 1, 1), (60, 0, 1), (90, 0, 1)]
    x, share, low, high = zip(*g.curve.points())
    assert x == (-90, -60, -30, 30, 60, 90) and share == (1, 1, 0, 1, 0, 0)
    lo1, _ = clopper_pearson(1, 1)
    assert (low[2], high[2]) == pytest.approx((0, 1 - lo1)) and (low[3], high[3]) == pytest.approx((lo1, 1))
    assert any("4 pair(s) derived from the ranks of 2 prompt(s)" in n for n in report.notes)
    assert any("no position bias" in n for n in report.notes)


def test_by_annotator(files):
    """张三 made c1..c5 (first wins c2 c3 c5 of 4 decisive, tie c4), 李四 c6..c10 (c6 c7 c9 of 5)."""
    judged, ranked = files
    report = bias_report(load_judgements([judged, ranked], by="annotator"))
    got = {g.name: (g.comparisons, g.ties, g.position and (g.position.wins, g.position.n)) for g in report.groups}
    assert got == {"张三": (5, 1, (3, 4)), "李四": (5, 0, (3, 5)), "(no annotator)": (4, 1, None)}
    by_source = bias_report(load_judgements([judged, ranked], by="source"))
    assert [g.name for g in by_source.groups] == ["judge", "rank"]


def judge_details(path: Path) -> Path:
    """A judge's details: pair c(50) > r(20) judged 4 times, pair x(10) > y(30) once."""
    pairs = [
        PairOutcome(
            "c",
            "r",
            False,
            50,
            20,
            verdicts=[
                ShownVerdict("c", "A"),  # first (50) wins
                ShownVerdict("r", "A"),  # first (20) wins
                ShownVerdict("c", None, "no_verdict"),
                ShownVerdict("r", "C"),
            ],
        ),
        PairOutcome("x", "y", False, 10, 30, verdicts=[ShownVerdict("y", "B")]),  # first (30) loses
    ]
    write_details(path, {"open": [PromptOutcome("p1", "代码", pairs)]}, "qwen-judge", "f" * 64)
    return path


def test_details_file(tmp_path):
    details = judge_details(tmp_path / "details.jsonl")
    report = bias_report(load_judgements([details], by="source"))
    (g,) = report.groups
    assert g.name == "qwen-judge"
    assert (g.comparisons, g.ties, g.with_order) == (4, 1, 4)
    assert (g.position.wins, g.position.n) == (2, 3)
    assert (g.longer.wins, g.longer.n) == (1, 3)  # only the 50-character answer, first shown, won as the longer
    assert report.notes == [f"{details}: 1 verdict(s) that could not be parsed are left out"]


def test_scorer_details_and_bad_inputs_are_errors(tmp_path):
    scores = tmp_path / "scores.jsonl"
    outcome = PromptOutcome("p1", "代码", [PairOutcome("c", "r", True, 5, 9, chosen_score=1.0, rejected_score=0.0)])
    write_details(scores, {"open": [outcome]}, "length", "f" * 64)
    with pytest.raises(InputError, match="scorer's scores, not judge verdicts"):
        load_judgements([scores])
    bad = judged_rows()
    bad[0]["comparisons"][0]["shown"] = "ba?"
    with pytest.raises(InputError, match="shown order is 'ba\\?'"):
        load_judgements([write_jsonl(tmp_path / "bad.jsonl", bad)])
    with pytest.raises(InputError, match="grouping"):
        load_judgements([scores], by="model")


# ---------------------------------------------------------------------------------- the CLI


def test_cli_writes_table_json_charts_and_page(files, tmp_path):
    judged, ranked = files
    out = tmp_path / "bias"
    proc = run_cheems(
        "analyze", "bias", judged, ranked, "--bins", "3", "--out", out, "--output-json", tmp_path / "b.json"
    )
    assert proc.returncode == 0, proc.stderr
    assert "0.667 [0.299, 0.925] n=9" in proc.stdout  # P(first shown wins) of the judge file
    assert "no shown order" in proc.stdout and "derived from the ranks" in proc.stdout
    data = json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))
    assert data == json.loads((out / "bias.json").read_text(encoding="utf-8"))
    judge = data["groups"][str(judged)]
    assert (judge["position"]["wins"], judge["position"]["n"], judge["position"]["ties"]) == (6, 9, 1)
    assert [b["wins"] for b in judge["length_curve"]["bins"]] == [3, 1, 2]
    assert data["groups"][str(ranked)]["position"] is None
    assert data["groups"][str(ranked)]["length_curve"]["mirrored"] is True
    for name in ("position.png", "length.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "bias.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 2 and "http" not in page.replace("http-equiv", "")


def test_cli_errors(files, tmp_path, cheems_cli):
    judged, _ = files
    bare = write_jsonl(
        tmp_path / "bare.jsonl", [{"id": "p", "input": "问", "responses": [{"id": "a", "content": "答"}]}]
    )
    assert_user_error(cheems_cli("analyze", "bias", judged, bare), str(bare), "has no comparison", "cheems judge")
    assert_user_error(cheems_cli("analyze", "bias", judged, "--by", "model"), "'--by'", "'file', 'source', 'annotator'")
    assert_user_error(cheems_cli("analyze", "bias", judged, "--out", judged), "--out", "not a folder")


def test_judge_output_with_total_position_bias(tmp_path, monkeypatch, capsys):
    """A real ``cheems judge`` run against a loopback judge that always answers B (the second shown),
    both orders: the first shown never wins (0 of 12, p = 2 / 2**12), and the longer answer wins exactly
    once per pair (6 of 12), since each pair is shown both ways round."""
    rows = [
        {
            "id": f"q{k}",
            "input": f"问题{k}",
            "responses": [{"id": f"r{i}", "content": "答" * (5 * i + k)} for i in (1, 2, 3)],
        }
        for k in (1, 2)
    ]
    src, judged = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "judged.jsonl"
    with FakeJudgeServer(always="B") as server:
        proc = run_main(
            "judge", src, "-o", judged, "--base-url", server.url, "--judge-model", "fake-judge", "--both-orders",
            "--cache", tmp_path / "c.sqlite", "--no-progress",
            monkeypatch=monkeypatch, capsys=capsys, env={"OPENAI_API_KEY": "test-key"},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proc = run_main(
        "analyze", "bias", judged, "--by", "annotator", "--output-json", tmp_path / "b.json",
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    g = json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))["groups"]["fake-judge"]
    assert (g["comparisons"], g["with_shown_order"], g["position"]["wins"], g["position"]["n"]) == (12, 12, 0, 12)
    assert g["position"]["p_value"] == pytest.approx(2 / 2**12)
    assert g["position"]["ci"] == pytest.approx(clopper_pearson(0, 12), abs=1e-12)
    assert (g["longer_wins"]["wins"], g["longer_wins"]["n"]) == (6, 12)
    assert "0.000 [0.000, 0.265] n=12" in proc.stdout


# ---------------------------------------------------------------------------------- the page in Chromium

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium binary on PATH (Debian: apt-get install chromium fonts-noto-cjk)"
)
def test_page_in_chromium(files, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    judged, ranked = files
    report = bias_report(load_judgements([judged, ranked]), n_bins=3)
    page_file = tmp_path / "bias.html"
    page_file.write_text(bias_page(report, "偏差分析", position_png(report), length_png(report)), encoding="utf-8")
    with sync_api.sync_playwright() as p:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses its sandbox as root
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args, timeout=30_000)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.route(
                "**/*",
                lambda route: (
                    route.abort() if not route.request.url.startswith(("file:", "data:")) else route.continue_()
                ),
            )
            page.goto(page_file.as_uri(), timeout=10_000)
            widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
            assert len(widths) == 2 and all(w > 300 for w in widths)
            assert page.title() == "偏差分析"
            cells = page.eval_on_selector_all("table:first-of-type tbody tr", "rows => rows.map(r => r.innerText)")
            assert "0.667 [0.299, 0.925] n=9" in cells[0] and "no shown order" in cells[1]
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "bias.png"), full_page=True, timeout=10_000)
        finally:
            browser.close()
