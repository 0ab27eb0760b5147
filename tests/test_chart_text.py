"""Names are data: every chart draws them as written, never as matplotlib mathtext (issue 31).

A category, subset, bench file, scores file or row name holding ``$`` (``cost $5``, ``$$``), ``\\``, ``_`` or
``^`` used to stop every chart with a mathtext ParseException, or silently drop the dollars. Each command that
draws a chart runs here through the CLI on such names; the figures it saves are opened on their way to the
PNG and every text on them (titles, labels, ticks, legends) must be the name as written, not parsed as math.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import bench_row, run_main, write_jsonl
from test_analysis_bias import judged_rows, ranked_rows
from test_analysis_bon import POOL, SCORES

# Each alone is a mathtext error or loses its dollars; with parse_math on "$$" fails and "$x_1^2$" turns into math.
NAMES = ("cost $5 or $6", "$$", "$x_1^2$", "a\\b", "y^2_z $")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def drawn(monkeypatch) -> list[tuple[str, bool]]:
    """Every text of every figure saved while the test runs: (the text, whether matplotlib reads it as math).

    The real savefig runs first (it lays out the ticks and legends), then the figure's texts are read."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    texts: list[tuple[str, bool]] = []
    save = Figure.savefig

    def savefig(fig: Figure, *args: object, **kwargs: object) -> None:
        save(fig, *args, **kwargs)
        for t in fig.findobj(Text):
            if t.get_visible() and t.get_text():
                texts.append((t.get_text(), t._preprocess_math(t.get_text())[1] is not False))

    monkeypatch.setattr(Figure, "savefig", savefig)
    return texts


def assert_literal(drawn: list[tuple[str, bool]], *names: str) -> None:
    """Each name is on a chart inside some text (the sunburst wraps long names), and no text is drawn as math."""
    assert drawn, "no chart was drawn"
    assert [text for text, math in drawn if math] == []
    for name in names:
        on_chart = [text.replace("\n", "") for text, _ in drawn]
        assert any(name in text for text in on_chart), f"{name!r} is on no chart: {on_chart}"


def bench(tmp_path: Path, file_name: str) -> Path:
    """A bench of one prompt per name, each name its category, with r1 > r2 > r3."""
    rows = [bench_row(f"p{k}", name, ["甲" * 3, "乙" * 2, "丙"], [1, 2, 3]) for k, name in enumerate(NAMES)]
    return write_jsonl(tmp_path / file_name, rows)


def test_validate_plot_draws_category_names_as_written(tmp_path, monkeypatch, capsys, drawn):
    png = tmp_path / "c.png"
    proc = run_main("validate", bench(tmp_path, "b.jsonl"), "--plot", png, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes().startswith(PNG)
    assert_literal(drawn, *NAMES)


def test_eval_report_and_leaderboard_html_draw_subset_category_and_row_names(tmp_path, monkeypatch, capsys, drawn):
    data = bench(tmp_path, "open $1$.jsonl")
    scores = [{"prompt_id": f"p{k}", "response_id": f"r{i}", "score": -i} for k in range(len(NAMES)) for i in (1, 2, 3)]
    scores_file = write_jsonl(tmp_path / "s.jsonl", scores)
    evals = []
    for name in ("run $a$", "run_$$^"):
        out = tmp_path / f"{name}.json"
        args = ["eval", "--bench", data, "--scores", scores_file, "--output-json", out, "--report", tmp_path / name]
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / name / "report.html").exists()
        evals.append(out)
    assert_literal(drawn, "open $1$", *NAMES)
    drawn.clear()
    board = tmp_path / "board.html"
    proc = run_main("leaderboard", *evals, "-o", board, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert "data:image/png;base64," in board.read_text(encoding="utf-8")
    assert_literal(drawn, "run $a$", "run_$$^")


def test_bon_plot_draws_the_scores_file_name_as_written(tmp_path, monkeypatch, capsys, drawn):
    pool = write_jsonl(tmp_path / "pool.jsonl", [r.to_json() for r in POOL])
    rows = [{"prompt_id": p, "response_id": r, "score": s} for (p, r), s in SCORES.items()]
    scores = write_jsonl(tmp_path / "s $$ x_1^2.jsonl", rows)
    png = tmp_path / "curve.png"
    args = ["bon", pool, "--scores", scores, "-o", tmp_path / "picks.jsonl", "--plot", png]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes().startswith(PNG)
    assert_literal(drawn, "s $$ x_1^2.jsonl")


def test_analyze_bias_draws_file_names_as_written(tmp_path, monkeypatch, capsys, drawn):
    judged = write_jsonl(tmp_path / "judged $1$.jsonl", judged_rows())
    ranked = write_jsonl(tmp_path / "ranked_$$^.jsonl", ranked_rows())
    out = tmp_path / "bias"
    args = ["analyze", "bias", judged, ranked, "--bins", "3", "--out", out]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "bias.json").read_text(encoding="utf-8"))["groups"]
    assert_literal(drawn, "judged $1$", "ranked_$$^")
