"""Names from the user's files are shown on the terminal, never obeyed (issue 31).

A category, class, subset, file or row name holding an escape sequence (window title, clear screen), a bidi
override or rich markup (``[bold]x[/]``, a lone ``[/]``) reached the terminal raw through ``validate``,
``categorize apply``, ``eval``'s tables, ``leaderboard`` and error lines. Every command prints through
:class:`cheems.terminal.SafeConsole`: controls shown as escapes, markup printed as written.
"""

from __future__ import annotations

import json

import pytest
from rich.text import Text

from cheems.prompts.classifier import META
from cheems.terminal import SafeConsole, printable
from helpers import assert_user_error, bench_row, run_main, write_jsonl
from tiny_models import build_tiny_bert

TITLE, CLEAR, BIDI = "\x1b]0;pwned\x07", "\x1b[2J", "\u202eevil"
# name as written -> as it must show on the terminal
NAMES = {
    TITLE: "\\x1b]0;pwned\\x07",
    CLEAR + "x": "\\x1b[2Jx",
    BIDI: "\\u202eevil",
    "[bold]x[/]": "[bold]x[/]",
    "[/]": "[/]",
}


def assert_shown_not_obeyed(text: str, *shown: str) -> None:
    """No control character or bidi mark reaches the terminal; each name shows in its escaped form."""
    assert [c for c in text if c == "\x1b" or c == "\x07" or c == "\u202e" or "\x80" <= c <= "\x9f"] == []
    flat = " ".join(text.split())  # a narrow cell may fold a long name: compare without the folds
    for name in shown:
        assert name in text or name in flat.replace(" ", ""), f"{name!r} not shown in:\n{text}"


def test_printable_escapes_controls_and_bidi_marks_and_keeps_text():
    assert printable("a\x1b[2Jb\x07\x7f\x9b\u202e\u2066c\n\t中") == "a\\x1b[2Jb\\x07\\x7f\\x9b\\u202e\\u2066c\n\t中"
    assert printable("[bold]$x$[/] 数学") == "[bold]$x$[/] 数学"


def test_a_safe_console_shows_text_objects_and_markup_literally(tmp_path):
    with (tmp_path / "out.txt").open("w") as file:
        console = SafeConsole(width=80, record=True, file=file)
        # a Text made elsewhere (rich itself drops BEL from it): its ESC is still escaped on the way out
        console.print(Text.assemble(("error: ", "red"), f"{CLEAR}.jsonl: bad"), "[/]", "[bold]x[/]", BIDI)
    assert console.export_text() == "error: \\x1b[2J.jsonl: bad [/] [bold]x[/] \\u202eevil\n"


def ranked_rows() -> list[dict]:
    """One prompt per hostile name, the name its category, r1 > r2 > r3."""
    return [bench_row(f"p{k}", name, ["甲" * 3, "乙" * 2, "丙"], [1, 2, 3]) for k, name in enumerate(NAMES)]


def test_validate_shows_category_names_escaped_and_literal(tmp_path, monkeypatch, capsys):
    proc = run_main(
        "validate", write_jsonl(tmp_path / "b.jsonl", ranked_rows()), monkeypatch=monkeypatch, capsys=capsys
    )
    assert proc.returncode == 0, proc.stderr
    assert_shown_not_obeyed(proc.stdout + proc.stderr, *NAMES.values())


def test_eval_and_leaderboard_tables_show_subset_category_and_row_names_escaped(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / f"open{CLEAR}.jsonl", ranked_rows())
    scores = [{"prompt_id": f"p{k}", "response_id": f"r{i}", "score": -i} for k in range(len(NAMES)) for i in (1, 2, 3)]
    scores_file = write_jsonl(tmp_path / "s.jsonl", scores)
    out = tmp_path / f"run{TITLE}.json"
    proc = run_main(
        "eval", "--bench", bench, "--scores", scores_file, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys
    )
    assert proc.returncode == 0, proc.stderr
    assert_shown_not_obeyed(proc.stdout + proc.stderr, "open\\x1b[2J", *NAMES.values())
    other = tmp_path / "[red]x[b].json"
    other.write_text(out.read_text(encoding="utf-8"), encoding="utf-8")
    proc = run_main("leaderboard", out, other, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert_shown_not_obeyed(proc.stdout + proc.stderr, "run\\x1b]0;pwned\\x07", "[red]x[b]", "open\\x1b[2J")


def test_an_error_line_shows_the_file_name_escaped(tmp_path, monkeypatch, capsys):
    bad = tmp_path / f"bad{TITLE}[b].jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    proc = run_main("validate", bad, monkeypatch=monkeypatch, capsys=capsys)
    line = assert_user_error(proc, "bad\\x1b]0;pwned\\x07[b].jsonl")
    assert_shown_not_obeyed(line)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> str:
    return str(build_tiny_bert(tmp_path_factory.mktemp("enc") / "tiny-bert"))


def test_categorize_apply_shows_class_names_escaped(encoder, tmp_path, monkeypatch, capsys):
    labels = [("数学", "代数"), ("写作", "诗歌")] * 6
    rows = [{"id": f"l{k}", "input": f"{sub}题目{k}", "category": [main, sub]} for k, (main, sub) in enumerate(labels)]
    clf = tmp_path / "clf"
    fit = ["categorize", "fit", write_jsonl(tmp_path / "l.jsonl", rows), "-o", clf, "--encoder", encoder]
    assert run_main(*fit, "--device", "cpu", monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    prompts = write_jsonl(
        tmp_path / "p.jsonl", [{"id": f"q{k}", "input": f"{sub}题目{k}"} for k, (_, sub) in enumerate(labels)]
    )
    out = tmp_path / "out.jsonl"
    # a classifier folder is a file from anywhere: its class names are data like any category ("/" parts them)
    meta = json.loads((clf / META).read_text(encoding="utf-8"))
    hostile = {"数学": TITLE, "写作": "[bold]x[b]" + BIDI}
    meta["classes"] = [hostile[c.split("/")[0]] + c[c.index("/") :] for c in meta["classes"]]
    (clf / META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    proc = run_main(
        "categorize", "apply", prompts, "-o", out, "--classifier", clf, monkeypatch=monkeypatch, capsys=capsys
    )
    assert proc.returncode == 0, proc.stderr
    assigned = {json.loads(line)["category"][0] for line in out.read_text(encoding="utf-8").splitlines()}
    assert assigned & set(hostile.values())
    assert_shown_not_obeyed(proc.stdout + proc.stderr, *map(printable, assigned))
