"""The tables of ``eval``, ``leaderboard``, ``validate`` and ``compare`` in an 80-column terminal: real
subprocesses with ``COLUMNS=80``. No line is wider than the terminal (in cells: a Chinese character takes
two), nothing is cut with an ellipsis, and the cells a reader needs (numbers, intervals, names, headings)
are whole on their line.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.cells import cell_len

from cheems.evaluate.report_html import with_ci
from helpers import run_cheems, write_jsonl
from test_cli_compare import details_rows

DEMO = Path(__file__).resolve().parents[1] / "src" / "cheems" / "assets" / "demo"
NARROW = {"COLUMNS": "80"}


def table_lines(stdout: str, last: str) -> list[str]:
    """The lines up to and including the first one holding ``last`` (what follows is soft-wrapped prose)."""
    lines = stdout.splitlines()
    end = next(i for i, line in enumerate(lines) if last in line)
    return lines[: end + 1]


def assert_fits(lines: list[str]) -> None:
    assert all(cell_len(line) <= 80 for line in lines), "\n".join(lines)
    assert not any("…" in line for line in lines), "\n".join(lines)


def test_eval_table_keeps_every_number_and_interval_whole(tmp_path):
    out = tmp_path / "length.json"
    proc = run_cheems(
        "eval", "--bench", DEMO / "open.jsonl", "--bench", DEMO / "human.jsonl", "--model", "length",
        "--no-cache", "--output-json", out, env=NARROW, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = table_lines(proc.stdout, "overall = mean over subsets")
    assert_fits(lines)
    data = json.loads(out.read_text(encoding="utf-8"))
    rows = {line.split("│")[1].strip() + " " + line.split("│")[2].strip(): line for line in lines if "│" in line}
    for name in ("open", "human"):
        cells = [with_ci(data["subsets"][name], key, compact=True) for key in ("accuracy", "exact_match")]
        assert all(cell in rows[f"{name} mean"] for cell in cells), rows[f"{name} mean"]
    overall = rows["overall "]
    assert with_ci(data, "overall", compact=True) in overall  # e.g. 0.434 [.36,.52] on one line
    assert "40" in overall and "289" in overall  # the overall row counts every prompt and pair


def eval_json(scorer: str, overall: float, ci: list[float] | None = None, **more) -> dict:
    def subset(acc: float, exact: float) -> dict:
        out = {"accuracy": acc, "exact_match": exact, "n_prompts": 24, "n_pairs": 172}
        if ci:
            out |= {"accuracy_ci": [acc - 0.05, acc + 0.05], "exact_match_ci": [exact - 0.1, exact + 0.1]}
        return out

    data = {"scorer": scorer, "subsets": {"open": subset(0.8, 0.4), "human": subset(0.7, 0.3)}, "overall": overall}
    if ci:
        data |= {"overall_ci": ci, "bootstrap": {"resamples": 1000, "seed": 0, "level": 0.95}}
    return data | more


def test_leaderboard_shows_folder_names_and_whole_intervals(tmp_path):
    rows = {
        "rm.json": eval_json("/home/me/models/Qwen2.5-7B/", 0.55, [0.5, 0.6]),
        "judge.json": eval_json("qwen-judge", 0.45, [0.4, 0.5], judge={"judge_model": "qwen-judge"}),
        "len.json": eval_json("length", 0.43),
    }
    for name, data in rows.items():
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    proc = run_cheems("leaderboard", *(tmp_path / n for n in rows), env=NARROW, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = table_lines(proc.stdout, "note:")[:-1]
    assert_fits(lines)
    assert "/home/me" not in proc.stdout  # the model's folder name, not its path
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("1 "))
    assert "Qwen2.5-7B" in lines[first] and " RM " in lines[first]
    assert all(v in lines[first] for v in ("0.800", "0.400", "0.700", "0.300", "0.550"))
    # each interval whole, below its number: [.75,.85] [.30,.50] [.65,.75] [.20,.40] [.50,.60]
    for interval in ("[.75,.85]", "[.30,.50]", "[.65,.75]", "[.20,.40]", "[.50,.60]"):
        assert interval in lines[first + 1]
    headings = " ".join(lines[: first - 1])
    assert all(word in headings.split() for word in ("name", "kind", "open", "human", "acc", "exact", "overall"))


def test_validate_headings_and_numbers_are_whole(tmp_path):
    proc = run_cheems("validate", DEMO / "open.jsonl", env=NARROW, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = table_lines(proc.stdout, "pairs: comparisons without ties")
    assert_fits(lines)
    words = " ".join(lines).split()
    for heading in ("file", "prompts", "responses", "per", "prompt", "pairs", "chosen", "rejected", "length"):
        assert heading in words
    row = next(line for line in lines if " 117 " in line)
    assert row.split()[-7:] == ["24", "117", "4.88", "332", "56.8", "103.2", "66.7"]
    # then the responses per model and the prompts per category, every line whole
    lines = proc.stdout.splitlines()
    assert_fits(lines)
    assert next(line for line in lines if "demo-j " in line).split() == ["demo-j", "17", "14.5%", "17"]
    assert next(line for line in lines if "复杂指令 " in line).split() == ["复杂指令", "3", "12.5%", "15", "3"]


def test_compare_table_fits_with_the_overall_row_on_one_line(tmp_path):
    d1 = write_jsonl(tmp_path / "a.jsonl", details_rows("/home/me/models/rm-good", 0))
    d2 = write_jsonl(tmp_path / "b.jsonl", details_rows("/home/me/models/rm-bad", 1))
    proc = run_cheems("compare", d1, d2, "--resamples", 200, env=NARROW, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = table_lines(proc.stdout, "overall = mean over subsets")
    assert_fits(lines)
    assert "A = rm-good   vs   B = rm-bad" in lines[0] and "/home/me" not in proc.stdout
    overall = next(line for line in lines if line.strip().startswith("overall "))
    assert overall.split()[1:4] == ["0.542", "0.125", "+0.417"] and "rm-good better" in overall
