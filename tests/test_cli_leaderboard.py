"""``cheems leaderboard``: rows sorted by overall, named, written as markdown and HTML; malformed input refused.

The eval JSONs are written by hand (or by ``cheems eval`` itself), so every cell is known.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from helpers import assert_user_error, record, run_main, shown, write_jsonl


def subset(acc: float, exact: float, prompts: int, pairs: int, **more) -> dict:
    return {"accuracy": acc, "exact_match": exact, "n_prompts": prompts, "n_pairs": pairs, **more}


# overall = mean over subsets of (accuracy + exact match) / 2, as cheems eval writes it
LENGTH = {
    "scorer": "length",
    "subsets": {"open": subset(0.70, 0.20, 24, 172), "human": subset(0.68, 0.14, 16, 117)},
    "overall": 0.43,
}
JUDGE = {
    "scorer": "qwen-judge",
    "subsets": {
        "open": subset(0.80, 0.40, 24, 172, accuracy_ci=[0.75, 0.85], exact_match_ci=[0.2, 0.6]),
        "human": subset(0.70, 0.30, 16, 117, accuracy_ci=[0.6, 0.8], exact_match_ci=[0.1, 0.5]),
    },
    "overall": 0.55,
    "overall_ci": [0.5, 0.6],
    "bootstrap": {"resamples": 1000, "seed": 0, "level": 0.95},
    "judge": {"judge_model": "qwen-judge", "verdicts": {"A": 200, "B": 80, "C": 9}},
}
UNNAMED = {  # no scorer: the row is named after the file
    "subsets": {"human": subset(0.66, 0.20, 16, 117), "open": subset(0.75, 0.30, 24, 172)},
    "overall": 0.4775,
}


@pytest.fixture
def evals(tmp_path) -> list[Path]:
    """Three eval JSONs in the order length (0.43), judge (0.55), unnamed (0.4775)."""
    files = []
    for name, data in (("length", LENGTH), ("judge", JUDGE), ("c", UNNAMED)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        files.append(path)
    return files


def leaderboard(*args, monkeypatch, capsys):
    return run_main("leaderboard", *args, monkeypatch=monkeypatch, capsys=capsys)


def markdown_rows(text: str) -> list[list[str]]:
    """Cells of the markdown table's body rows (``\\|`` is a bar inside a cell)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| #")]
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines]


def test_rows_are_sorted_by_overall_with_intervals_and_the_best_in_bold(evals, tmp_path, monkeypatch, capsys):
    out = tmp_path / "board.md"
    result = leaderboard(*evals, "-o", out, monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0, result.stderr
    assert result.stdout.index("qwen-judge") < result.stdout.index(" c ") < result.stdout.index("length")
    assert "note: [low, high]: 95% bootstrap intervals" in result.stdout
    text = out.read_text(encoding="utf-8")
    assert "| # | name | kind | open acc | open exact | human acc | human exact | overall |" in text
    assert markdown_rows(text) == [
        [
            "1",
            "qwen-judge",
            "judge",
            "**0.800 [0.750, 0.850]**",
            "**0.400 [0.200, 0.600]**",
            "**0.700 [0.600, 0.800]**",
            "**0.300 [0.100, 0.500]**",
            "**0.550 [0.500, 0.600]**",
        ],
        ["2", "c", "reward model", "0.750", "0.300", "0.660", "0.200", "0.477"],  # columns in the first file's order
        ["3", "length", "reward model", "0.700", "0.200", "0.680", "0.140", "0.430"],
    ]
    assert "- [low, high]: 95% bootstrap intervals from 1,000 resamples of prompts" in text


def test_names_name_the_rows_in_file_order_as_for_table_3(evals, tmp_path, monkeypatch, capsys):
    out = tmp_path / "board.md"
    names = ["--name", "中文偏好", "--name", "a|b", "--name", "HH-RLHF"]
    result = leaderboard(*evals, *names, "-o", out, monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0, result.stderr
    assert [(row[1], row[-1]) for row in markdown_rows(out.read_text(encoding="utf-8"))] == [
        ("a|b", "**0.550 [0.500, 0.600]**"),
        ("HH-RLHF", "0.477"),
        ("中文偏好", "0.430"),
    ]


class Cells(HTMLParser):
    """Body cells of every table (text, classes) and every src/href of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, str]]] = []
        self.urls: list[str] = []
        self.cell: list[str] | None = None
        self.classes = ""
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        self.urls += [attrs[a] for a in ("src", "href") if a in attrs]
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self.cell, self.classes = [], attrs.get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self.rows[-1].append(("".join(self.cell), self.classes))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def test_html_has_the_rows_the_bold_bests_and_nothing_from_the_network(evals, tmp_path, monkeypatch, capsys):
    out = tmp_path / "board.html"
    names = ["--name", "length", "--name", "qwen-judge", "--name", "<b>x</b>"]
    result = leaderboard(*evals, *names, "-o", out, monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    page = Cells(text)
    body = [row for row in page.rows if row]
    assert [[cell for cell, _ in row] for row in body] == [
        [
            "1",
            "qwen-judge",
            "judge",
            "0.800 [0.750, 0.850]",
            "0.400 [0.200, 0.600]",
            "0.700 [0.600, 0.800]",
            "0.300 [0.100, 0.500]",
            "0.550 [0.500, 0.600]",
        ],
        ["2", "<b>x</b>", "reward model", "0.750", "0.300", "0.660", "0.200", "0.477"],
        ["3", "length", "reward model", "0.700", "0.200", "0.680", "0.140", "0.430"],
    ]
    assert [[cls for _, cls in row] for row in body][0][3:] == ["num best"] * 5
    assert {cls for row in body[1:] for _, cls in row[3:]} == {"num"}
    assert "&lt;b&gt;x&lt;/b&gt;" in text  # a name is text, never markup
    assert len([u for u in page.urls if u.startswith("data:image/png;base64,")]) == 1  # the overall chart
    assert all(u.startswith(("data:image/png;base64,", "#")) for u in page.urls)


def test_reads_what_cheems_eval_writes(tmp_path, monkeypatch, capsys):
    # p1: r1 > r2 > r3; p2 (another category): r1 > r2
    bench = write_jsonl(
        tmp_path / "open.jsonl",
        [
            record(3, rank={"r1": 1, "r2": 2, "r3": 3}, pid="p1", category="代码").to_json(),
            record(2, rank={"r1": 1, "r2": 2}, pid="p2", category="数学").to_json(),
        ],
    )
    good = {"p1": [3, 2, 1], "p2": [1, 0]}  # every pair right: 1.0, 1.0, overall 1.0
    half = {"p1": [3, 1, 2], "p2": [0, 1]}  # 代码 2/3 right, 数学 0: accuracy 1/3, exact 0, overall 1/6
    for name, scores in (("good", good), ("half", half)):
        rows = [
            {"prompt_id": p, "response_id": f"r{i}", "score": s}
            for p, values in scores.items()
            for i, s in enumerate(values, 1)
        ]
        write_jsonl(tmp_path / f"{name}.scores.jsonl", rows)
        args = [
            "eval",
            "--bench",
            bench,
            "--scores",
            tmp_path / f"{name}.scores.jsonl",
            "--output-json",
            tmp_path / f"{name}.json",
        ]
        assert run_main(*args, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    out = tmp_path / "board.md"
    result = leaderboard(
        tmp_path / "half.json", tmp_path / "good.json", "-o", out, monkeypatch=monkeypatch, capsys=capsys
    )
    assert result.returncode == 0, result.stderr
    good_json, half_json = (json.loads((tmp_path / f"{n}.json").read_text(encoding="utf-8")) for n in ("good", "half"))
    assert [row[1:] for row in markdown_rows(out.read_text(encoding="utf-8"))] == [
        [
            "good.scores.jsonl",  # the scorer's file name, not its whole path
            "reward model",
            f"**{shown(good_json['subsets']['open'], 'accuracy', 1.0)}**",
            f"**{shown(good_json['subsets']['open'], 'exact_match', 1.0)}**",
            f"**{shown(good_json, 'overall', 1.0)}**",
        ],
        [
            "half.scores.jsonl",
            "reward model",
            shown(half_json["subsets"]["open"], "accuracy", 1 / 3),
            shown(half_json["subsets"]["open"], "exact_match", 0.0),
            shown(half_json, "overall", 1 / 6),
        ],
    ]


BAD = {
    "syntax": ('{"subsets": {', ["bad.json:1", "invalid JSON"]),
    "array": ("[1, 2]", ["bad.json:1", "expected one JSON object"]),
    "no overall": (json.dumps({"subsets": LENGTH["subsets"]}), ["bad.json:1", "field 'overall'", "is missing"]),
    "text accuracy": (
        json.dumps(
            {**LENGTH, "subsets": {**LENGTH["subsets"], "open": {**LENGTH["subsets"]["open"], "accuracy": "0.7"}}}
        ),
        ["bad.json:1", "field 'subsets.open.accuracy'"],
    ),
    "short interval": (
        json.dumps({**LENGTH, "overall_ci": [0.4]}),
        ["bad.json:1", "field 'overall_ci'"],
    ),
    "no subsets": (json.dumps({**LENGTH, "subsets": {}}), ["bad.json:1", "field 'subsets'"]),
    "unknown metric": (json.dumps({**LENGTH, "metric": "elo"}), ["bad.json:1", "field 'metric'"]),
    # length.json records no metric (written before eval recorded it): CheemsBench's
    "other metric": (
        json.dumps({**LENGTH, "metric": "pairwise"}),
        ["bad.json: field 'metric': metric pairwise differs from metric cheems of", "length.json", "--metric"],
    ),
    "other subsets": (
        json.dumps({**LENGTH, "subsets": {"open": LENGTH["subsets"]["open"]}}),
        ["bad.json", "subsets open differ from open, human of", "length.json"],
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_malformed_eval_json_is_one_line_naming_file_and_field(case, evals, tmp_path, monkeypatch, capsys):
    content, expected = BAD[case]
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    result = leaderboard(evals[0], bad, "-o", tmp_path / "board.md", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(result, *expected)
    assert not (tmp_path / "board.md").exists()


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--name", "a", "--name", "b"], ["--name: 2 --name for 3 files"]),
        (["--name", "a", "--name", "b", "--name", "a"], ["--name: 'a' is given twice"]),
        (["-o", "board.txt"], ["board.txt", "unknown suffix '.txt'"]),
        (["-o", "BOARD"], ["BOARD", "no suffix"]),
    ],
)
def test_usage_mistakes_are_one_line(extra, expected, evals, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert_user_error(leaderboard(*evals, *extra, monkeypatch=monkeypatch, capsys=capsys), *expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_output_never_replaces_an_input(evals, tmp_path, monkeypatch, capsys):
    target = tmp_path / "c.md"
    target.write_text("keep", encoding="utf-8")
    result = leaderboard(*evals, "-o", evals[0].with_suffix(".md"), monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0  # a new file beside the inputs is fine
    assert_user_error(leaderboard(evals[0], target, "-o", target, monkeypatch=monkeypatch, capsys=capsys), "c.md")
    assert target.read_text(encoding="utf-8") == "keep"


def test_a_file_given_twice_is_refused(evals, tmp_path, monkeypatch, capsys):
    assert_user_error(
        leaderboard(*evals, evals[0], monkeypatch=monkeypatch, capsys=capsys), "length.json: is given twice"
    )
    (tmp_path / "sub").mkdir()
    again = tmp_path / "sub" / ".." / "judge.json"
    assert_user_error(
        leaderboard(*evals, again, monkeypatch=monkeypatch, capsys=capsys),
        f"{again}: is given twice (also as {evals[1]})",
    )


def test_cheems_eval_jsons_of_two_metrics_are_not_ranked_together(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "open.jsonl", [record(3, rank={"r1": 1, "r2": 2, "r3": 3}, pid="p1").to_json()])
    for metric in ("cheems", "pairwise"):
        args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", metric]
        args += ["--output-json", tmp_path / f"{metric}.json"]
        assert run_main(*args, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    cheems_json, pairwise_json = tmp_path / "cheems.json", tmp_path / "pairwise.json"
    result = leaderboard(cheems_json, pairwise_json, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(
        result, f"{pairwise_json}: field 'metric': metric pairwise differs from metric cheems of {cheems_json}:"
    )
    assert result.stdout == ""


def test_another_metrics_leaderboard_says_how_overall_is_made(evals, tmp_path, monkeypatch, capsys):
    for path in evals:
        path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), "metric": "bon"}), encoding="utf-8")
    result = leaderboard(*evals, monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0, result.stderr
    assert "note: sorted by overall: mean over subsets of accuracy (cheems eval --metric bon)" in result.stdout


def test_default_names_are_short_and_tell_rows_apart(tmp_path, monkeypatch, capsys):
    scorers = {
        "a": {"scorer": "/runs/a/checkpoint-500"},
        "b": {"scorer": "/runs/b/checkpoint-500/"},
        "c": {"scorer": "/home/me/models/Qwen2.5-7B-RM"},
        "d": {"scorer": "similarity:m3e-small"},
        "e": {"scorer": "length"},
        "f": {"scorer": "length"},  # the same scorer in two files
        "g": {"scorer": "/home/me/models/x", "name": "中文偏好/v2"},  # the JSON's own name is kept as it is
        "h": {},  # no scorer: the file stem
    }
    files = []
    for i, (stem, more) in enumerate(scorers.items()):
        files.append(tmp_path / f"{stem}.json")
        files[-1].write_text(json.dumps({**UNNAMED, "overall": 0.9 - i / 10, **more}), encoding="utf-8")
    out = tmp_path / "board.md"
    assert leaderboard(*files, "-o", out, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    assert [row[1] for row in markdown_rows(out.read_text(encoding="utf-8"))] == [
        "a/checkpoint-500",
        "b/checkpoint-500",
        "Qwen2.5-7B-RM",
        "similarity:m3e-small",
        "length (e.json)",
        "length (f.json)",
        "中文偏好/v2",
        "h",
    ]
