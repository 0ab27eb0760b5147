"""``report.html`` of a hand-made evaluation: its sections and numbers, no network, and a real headless Chromium.

The bench is small enough to check by hand: every number the page shows is worked out below. The
browser test opens the written file in Debian's Chromium (Playwright), as a reader would, and
saves a screenshot to ``tests/artifacts/report.png``; it is skipped, with the reason, where the
``playwright`` package or a Chromium binary is missing.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import warnings
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cheems.data.schema import Record
from cheems.evaluate import evaluate_scores
from cheems.evaluate.bench import report_from_outcomes
from cheems.evaluate.plots import cjk_font
from cheems.evaluate.report import REPORT_FILES, write_report
from cheems.evaluate.report_html import report_page
from cheems.metrics.outcomes import PairOutcome, PromptOutcome, ShownVerdict
from helpers import run_main, shown, write_jsonl

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
WAIT_MS = 10_000


def bench_record(pid: str, category: str, texts: dict[str, str], rank: dict[str, int]) -> Record:
    return Record.model_validate(
        {
            "id": pid,
            "input": "问题",
            "category": [category],
            "responses": [{"id": rid, "content": text} for rid, text in texts.items()],
            "rank": rank,
        }
    )


# open: p1 (代码) r1 > r2 > r3, lengths 8, 1, 4; scores 2.0, 0.5, 1.0: (r1,r2) right by 1.5, (r1,r3) right by 1.0,
#       (r2,r3) wrong by -0.5 -> 代码 accuracy 2/3, exact 0.
#       p2 (数学) r1 > r2, lengths 1, 6; scores 1, 0: right by 1.0 -> 数学 accuracy 1, exact 1.
#       open accuracy (2/3 + 1) / 2 = 0.833, exact (0 + 1) / 2 = 0.5.
# human: p3 (写作) r1 > r2, lengths 2, 2; scores 0, 1: wrong by -1 -> accuracy 0, exact 0.
# overall ((0.8333 + 0.5) / 2 + 0) / 2 = 0.333.
# length: open longer 2/2, shorter 1/2 (the p1 pair r2-r3 wrong, p2 right); human same length 0/1.
BENCH = {
    "open": [
        bench_record(
            "p1", "代码", {"r1": "好的回答很长很长", "r2": "短", "r3": "中等回答"}, {"r1": 1, "r2": 2, "r3": 3}
        ),
        bench_record("p2", "数学", {"r1": "对", "r2": "错误的长回答"}, {"r1": 1, "r2": 2}),
    ],
    "human": [bench_record("p3", "写作", {"r1": "甲乙", "r2": "丙丁"}, {"r1": 1, "r2": 2})],
}
SCORES = {
    ("p1", "r1"): 2.0,
    ("p1", "r2"): 0.5,
    ("p1", "r3"): 1.0,
    ("p2", "r1"): 1.0,
    ("p2", "r2"): 0.0,
    ("p3", "r1"): 0.0,
    ("p3", "r2"): 1.0,
}
TITLE = 'CheemsBench report: <img src="https://example.com/x.png">'  # escaped, so neither markup nor a URL


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


# open's margins 1.5, 1.0, -0.5, 1.0 in 5 bins of width 0.3: {1.5}, {1.0, 1.0}, {-0.5}
OPEN_ECE = (1 - sigmoid(1.5)) / 4 + 2 * (1 - sigmoid(1.0)) / 4 + sigmoid(0.5) / 4
HUMAN_ECE = sigmoid(1.0)  # one pair, wrong, |margin| 1


class Page(HTMLParser):
    """Sections of a rendered page: heading -> tables (rows of cell texts) and image sources."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.current: dict | None = None
        self.cell: list[str] | None = None
        self.in_h2 = False
        self.urls: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        self.urls += [attrs[a] for a in ("src", "href") if a in attrs]
        if tag == "h2":
            self.in_h2, self.current = True, {"tables": [], "images": [], "heading": ""}
        elif tag == "table" and self.current is not None:
            self.current["tables"].append([])
        elif tag == "tr" and self.current is not None:
            self.current["tables"][-1].append([])
        elif tag in ("td", "th"):
            self.cell = []
        elif tag == "img" and self.current is not None:
            self.current["images"].append(attrs["src"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self.in_h2 = False
            self.sections[self.current["heading"]] = self.current
        elif tag in ("td", "th"):
            self.current["tables"][-1][-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.in_h2:
            self.current["heading"] += data
        elif self.cell is not None:
            self.cell.append(data)


def scorer_report():
    return evaluate_scores(BENCH, SCORES, "scores.jsonl")


def rows_by_first_cells(table: list[list[str]], n: int = 2) -> dict[tuple[str, ...], list[str]]:
    return {tuple(row[:n]): row[n:] for row in table[1:]}


@pytest.fixture(scope="module")
def scorer_page() -> tuple[str, list[warnings.WarningMessage]]:
    """The scorer report's page, rendered once (six charts take a few seconds), and the warnings drawing it gave."""
    report = scorer_report()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = report_page(report.to_dict(), report.outcomes, TITLE)
    return text, caught


def test_scorer_report_has_every_section_and_the_hand_checked_numbers(scorer_page):
    page = Page(scorer_page[0])
    assert list(page.sections) == [
        "Metrics",
        "Accuracy by category",
        "Scores of chosen and rejected responses",
        "Calibration",
        "Length",
    ]
    metrics = page.sections["Metrics"]["tables"][0]
    assert metrics[0] == ["subset", "category", "accuracy", "exact match", "prompts", "pairs", "ECE"]
    rows = rows_by_first_cells(metrics)
    assert rows[("open", "代码")] == ["0.667", "0.000", "1", "3", ""]
    assert rows[("open", "数学")] == ["1.000", "1.000", "1", "1", ""]
    assert rows[("open", "mean of categories")] == ["0.833", "0.500", "2", "4", f"{OPEN_ECE:.3f}"]
    assert rows[("human", "mean of categories")] == ["0.000", "0.000", "1", "1", f"{HUMAN_ECE:.3f}"]
    assert rows[("overall", "mean of (acc + exact) / 2")][0] == "0.333"
    length = rows_by_first_cells(page.sections["Length"]["tables"][0], 1)
    assert length[("open",)] == ["1.000 (2)", "0.500 (2)", "— (0)", "+0.500"]
    assert length[("human",)] == ["— (0)", "— (0)", "0.000 (1)", "—"]
    assert length[("whole bench",)] == ["1.000 (2)", "0.500 (2)", "0.000 (1)", "+0.500"]
    # a category chart and a score chart per subset, one calibration curve, one length chart
    counts = {h: len(s["images"]) for h, s in page.sections.items()}
    assert counts == {
        "Metrics": 0,
        "Accuracy by category": 2,
        "Scores of chosen and rejected responses": 2,
        "Calibration": 1,
        "Length": 1,
    }


def test_intervals_in_the_json_are_shown_beside_their_numbers():
    report = scorer_report()
    data = report.to_dict()
    data["subsets"]["open"] |= {"accuracy_ci": [0.5, 1.0], "exact_match_ci": [0.0, 1.0]}
    data["overall_ci"] = [0.125, 0.5]
    text = report_page(data, report.outcomes, TITLE)
    rows = rows_by_first_cells(Page(text).sections["Metrics"]["tables"][0])
    assert rows[("open", "mean of categories")][:2] == ["0.833 [0.500, 1.000]", "0.500 [0.000, 1.000]"]
    assert rows[("human", "mean of categories")][:2] == ["0.000", "0.000"]  # no interval in its JSON, none shown
    assert rows[("overall", "mean of (acc + exact) / 2")][0] == "0.333 [0.125, 0.500]"
    assert "the band its interval" in text  # the category charts shade it
    assert "overall 0.333 [0.125, 0.500] over 2 subset(s): 3 prompts, 5 pairs" in text


def judge_outcomes() -> dict[str, list[PromptOutcome]]:
    """Both orders: p1's pair consistent and right, p2's pair inconsistent (wrong), p3's a tie and a parse failure."""

    def pair(correct: bool, *verdicts: ShownVerdict) -> PairOutcome:
        return PairOutcome("r1", "r2", correct, 4, 2, verdicts=list(verdicts))

    return {
        "open": [
            PromptOutcome("p1", "代码", [pair(True, ShownVerdict("r1", "A"), ShownVerdict("r2", "B"))]),
            PromptOutcome("p2", "数学", [pair(False, ShownVerdict("r1", "A"), ShownVerdict("r2", "A"))]),
        ],
        "human": [
            PromptOutcome("p3", "写作", [pair(False, ShownVerdict("r1", "C"), ShownVerdict("r2", None, "no_label"))])
        ],
    }


JUDGE = {
    "judge_model": "qwen-judge",
    "template": "eval-zh",
    "seed": 3,
    "both_orders": True,
    "questions": 6,
    "verdicts": {"A": 3, "B": 1, "C": 1},
    "parse_failures": 1,
    "parse_failure_reasons": {"no_label": 1},
    "first_shown_win_share": 0.75,
    "position_consistency": {"pairs": 3, "consistent": 1, "rate": 1 / 3},
    "cached": 2,
    "judged": 4,
    "requests": 4,
    "prompt_tokens": 12345,
    "completion_tokens": 67,
    "cost": 0.0123,
}


def judge_report():
    report = report_from_outcomes(judge_outcomes())
    report.scorer, report.judge = "qwen-judge", JUDGE
    return report


def test_a_judge_report_shows_its_verdicts_instead_of_score_charts():
    report = judge_report()
    page = Page(report_page(report.to_dict(), report.outcomes, "judge"))
    assert list(page.sections) == ["Metrics", "Accuracy by category", "Judge", "Length"]
    metrics = rows_by_first_cells(page.sections["Metrics"]["tables"][0])
    assert "ECE" not in page.sections["Metrics"]["tables"][0][0]  # a judge has no scores to calibrate
    assert metrics[("open", "mean of categories")] == ["0.500", "0.500", "2", "2"]
    judge = dict(page.sections["Judge"]["tables"][0][1:])
    assert judge["judge model"] == "qwen-judge"
    assert judge["both orders"] == "yes"
    assert (judge["A: first shown wins"], judge["B: second shown wins"], judge["C: tie"]) == ("3", "1", "1")
    assert judge["unparseable verdicts"] == "1"
    assert judge["unparseable: the answer names none of A, B or C"] == "1"
    assert judge["first-shown win share"] == "0.750"
    assert judge["same winner in both orders"] == "0.333 (1 of 3)"
    assert judge["prompt tokens"] == "12,345"
    assert judge["cost"] == "0.0123"
    assert len(page.sections["Judge"]["images"]) == 1  # the verdict counts


@pytest.mark.parametrize("make", [None, judge_report], ids=["scorer", "judge"])
def test_the_page_is_self_contained_and_escapes_text(make, scorer_page):
    if make is None:
        text = scorer_page[0]
    else:
        report = make()
        text = report_page(report.to_dict(), report.outcomes, TITLE)
    page = Page(text)
    assert page.urls, "the page has images and in-page links"
    for url in page.urls:  # nothing is fetched: charts are data: URIs, links go to sections of the page
        assert url.startswith(("data:image/png;base64,", "#s")), url[:80]
    assert not re.search(r"<script|<link|@import|url\(", text)
    assert "&lt;img src=" in text  # the hostile title is text


def test_chinese_category_names_are_drawn_with_a_font_that_has_them(scorer_page):
    if cjk_font() is None:
        pytest.skip("no CJK font installed (Debian: apt-get install fonts-noto-cjk)")
    # matplotlib warns "Glyph NNNNN (...) missing from font(s) ..." for every character it draws as a box
    assert not [w for w in scorer_page[1] if "missing from" in str(w.message)]


def test_eval_report_folder_gets_report_html(tmp_path, monkeypatch, capsys):
    bench = [write_jsonl(tmp_path / f"{name}.jsonl", [r.to_json() for r in records]) for name, records in BENCH.items()]
    scores = write_jsonl(
        tmp_path / "s.jsonl", [{"prompt_id": p, "response_id": r, "score": s} for (p, r), s in SCORES.items()]
    )
    args = ["eval", "--bench", bench[0], "--bench", bench[1], "--scores", scores, "--report", tmp_path / "r"]
    result = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0, result.stderr
    assert "report.html" in REPORT_FILES
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == sorted(REPORT_FILES)
    page = Page((tmp_path / "r" / "report.html").read_text(encoding="utf-8"))
    rows = rows_by_first_cells(page.sections["Metrics"]["tables"][0])
    data = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    assert rows[("open", "mean of categories")][:2] == [
        shown(data["subsets"]["open"], "accuracy", 5 / 6),
        shown(data["subsets"]["open"], "exact_match", 0.5),
    ]


def test_a_real_judge_run_reports_its_verdicts(tmp_path, monkeypatch, capsys):
    """``cheems eval --judge-model ... --both-orders --report`` against the loopback fake judge (★ wins, else the
    longer answer, else C): p1 ★ on the chosen -> A then B, right; p2 the rejected is longer -> B then A, wrong;
    p3 same length -> C, C, wrong; p4 unparseable twice, wrong. 数学 0.5, 代码 0: accuracy, exact, overall 0.25."""
    from fault_server import FakeJudgeServer

    bad = "{{fault:bad*}}"
    rows = [
        bench_record("p1", "数学", {"r1": "★短", "r2": "很长很长的错误回答"}, {"r1": 1, "r2": 2}),
        bench_record("p2", "数学", {"r1": "短", "r2": "很长很长的回答"}, {"r1": 1, "r2": 2}),
        bench_record("p3", "代码", {"r1": "甲乙", "r2": "丙丁"}, {"r1": 1, "r2": 2}),
        bench_record("p4", "代码", {"r1": f"甲{bad}", "r2": f"乙乙{bad}"}, {"r1": 1, "r2": 2}),
    ]
    bench = write_jsonl(tmp_path / "open.jsonl", [r.to_json() for r in rows])
    with FakeJudgeServer() as server:
        args = ["eval", "--bench", bench, "--judge-model", "fake-judge", "--base-url", server.url, "--both-orders"]
        args += ["--cache", tmp_path / "c.sqlite", "--max-retries", "1", "--no-progress", "--report", tmp_path / "r"]
        result = run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env={"OPENAI_API_KEY": "test-key"})
    assert result.returncode == 0, result.stderr
    page = Page((tmp_path / "r" / "report.html").read_text(encoding="utf-8"))
    assert list(page.sections) == ["Metrics", "Accuracy by category", "Judge", "Length", "Checks"]
    data = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    checks = page.sections["Checks"]["tables"][0]  # the eval's checks, warnings first
    assert checks[0] == ["check", "subset", "level", "finding"]
    assert [row[2] for row in checks[1:]] == sorted((c["level"] for c in data["checks"]), key=lambda x: x != "warning")
    assert ["label_swap", "(bench)", "ok", "skipped: a judge's verdicts have no scores to reverse"] in checks
    metrics = rows_by_first_cells(page.sections["Metrics"]["tables"][0])
    assert metrics[("open", "mean of categories")] == [
        shown(data["subsets"]["open"], "accuracy", 0.25),
        shown(data["subsets"]["open"], "exact_match", 0.25),
        "4",
        "4",
    ]
    judge = dict(page.sections["Judge"]["tables"][0][1:])
    assert (judge["questions asked"], judge["both orders"], judge["first-shown win share"]) == ("8", "yes", "0.500")
    assert (judge["A: first shown wins"], judge["B: second shown wins"], judge["C: tie"]) == ("2", "2", "2")
    assert judge["unparseable verdicts"] == "2"
    consistency = data["judge"]["position_consistency"]
    expected = f"{consistency['rate']:.3f} ({consistency['consistent']} of {consistency['pairs']})"
    assert judge["same winner in both orders"] == expected


# ------------------------------------------------------------------------------------------ in a browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed (pip install -e '.[test]')"
    )
    if CHROMIUM is None:
        pytest.skip("no Chromium binary on PATH (Debian: apt-get install chromium fonts-noto-cjk)")
    with sync_api.sync_playwright() as p:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses its sandbox as root
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args, timeout=WAIT_MS * 3)
        yield launched
        launched.close()


@pytest.mark.parametrize("make", [scorer_report, judge_report], ids=["scorer", "judge"])
def test_the_report_renders_in_chromium_with_every_image_loaded(browser, tmp_path, make):
    write_report(make(), tmp_path, "手工基准")
    context = browser.new_context(viewport={"width": 1200, "height": 900}, locale="zh-CN")
    context.route("**/*", lambda route: route.abort() if route.request.url.startswith("http") else route.continue_())
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("requestfailed", lambda r: problems.append(f"request {r.url[:60]} failed"))
    page.goto((tmp_path / "report.html").as_uri(), wait_until="load")
    images = page.eval_on_selector_all("img", "els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])")
    assert images and all(done and width > 0 and height > 0 for done, width, height in images), images
    assert page.title() == "CheemsBench report: 手工基准"
    assert "代码" in page.inner_text("section#s1 table")
    page.click("nav a:text('Length')")  # the section links work
    page.wait_for_function("location.hash === '#s' + document.querySelectorAll('section').length")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"report-{make.__name__}.png"), full_page=True)
    context.close()
    assert problems == []
