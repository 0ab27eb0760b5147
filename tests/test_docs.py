"""What a user reads: every example in docs/formats.md works as the page says, and nothing a user gets
points to the team's ``../shared`` folder (which a user's clone does not have)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from cheems.data.importers import FORMATS
from helpers import run_main

ROOT = Path(__file__).resolve().parents[1]
FORMATS_DOC = ROOT / "docs" / "formats.md"
# an example is a ```json block right after <!-- example: KIND [ARGS] FILE -->; FILE is the name it is saved as
EXAMPLE = re.compile(r"<!-- example: (?P<kind>\S+) (?P<args>[^>]*?) -->\n```json\n(?P<body>.*?)\n```", re.S)


def examples() -> dict[str, tuple[str, str]]:
    """File name -> (kind with its arguments, text) of every example block."""
    found = {
        m["args"].split()[-1]: (f"{m['kind']} {m['args']}", m["body"])
        for m in EXAMPLE.finditer(FORMATS_DOC.read_text())
    }
    assert len(found) == len(EXAMPLE.findall(FORMATS_DOC.read_text())), "two examples share a file name"
    return found


IMPORTS = {name: spec.split()[1] for name, (spec, _) in examples().items() if spec.startswith("import ")}


def write_example(directory: Path, name: str) -> Path:
    path = directory / name
    path.write_text(examples()[name][1] + "\n", encoding="utf-8")
    return path


def test_every_import_format_has_an_example():
    assert set(IMPORTS.values()) == set(FORMATS)


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_each_import_example_imports(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_example(tmp_path, name)
    proc = run_main("import", IMPORTS[name], name, "-o", "out.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert records and "skipped" not in proc.stdout + proc.stderr
    # every imported record has something to evaluate: a rank or comparisons
    assert all(r.get("rank") or r.get("comparisons") for r in records)
    proc = run_main("validate", "out.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr


def same_shape(got, want, where="") -> None:
    """``got`` and ``want`` hold the same keys and items everywhere, numbers equal up to rounding."""
    assert type(got) is type(want) or {type(got), type(want)} <= {int, float}, f"{where}: {got!r} vs {want!r}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} vs {list(want)}"
        for key in want:
            same_shape(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            same_shape(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=1e-9), f"{where}: {got} vs {want}"
    else:
        assert got == want, f"{where}: {got!r} vs {want!r}"


def test_the_record_scores_and_eval_examples_go_together(tmp_path, monkeypatch, capsys):
    """The record example is a valid bench, the scores match it, and evaluating them writes the eval-JSON example."""
    monkeypatch.chdir(tmp_path)
    kinds = {spec.split()[0]: name for name, (spec, _) in examples().items()}
    bench, scores = write_example(tmp_path, kinds["record"]), write_example(tmp_path, kinds["scores"])
    proc = run_main("validate", bench.name, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    out = kinds["eval-json"]
    proc = run_main(
        "eval",
        "--bench",
        bench.name,
        "--scores",
        scores.name,
        "--output-json",
        out,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert proc.returncode == 0, proc.stderr
    assert "unmatched" not in proc.stdout + proc.stderr  # every score is of a bench response
    same_shape(json.loads((tmp_path / out).read_text()), json.loads(examples()[out][1]))


def test_no_product_file_points_to_the_team_folder():
    """A user has the package, docs/ and README.md, not the team's ../shared next to the repository."""
    package = (p for p in (ROOT / "src" / "cheems").rglob("*") if p.is_file())
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *package]
    found = []
    for path in files:
        if path.suffix in (".png", ".pyc", ".sqlite3"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), start=1):
            if "../shared" in line or "shared/DESIGN" in line or re.search(r"\bDESIGN\.md\b", line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_the_flow_lines_and_the_package_table_name_every_layer():
    """README's and CONTRIBUTING's flow line list tests/test_layers.py's packages in its order, and README's
    package table has a row for each (issue 32: ``prompts`` was missing from all three)."""
    from test_layers import LAYERS

    # data ... train: one package a layer, between the bottom layer and workflows, the CLI and the package's face
    top = next(i for i, layer in enumerate(LAYERS) if "workflows" in layer)
    flow = [name for layer in LAYERS[1:top] for name in sorted(layer)]
    assert len(flow) == top - 1 and flow[0] == "data" and flow[-1] == "train"
    for path in (ROOT / "README.md", ROOT / "CONTRIBUTING.md"):
        line = next(ln for ln in path.read_text(encoding="utf-8").splitlines() if "The flow runs one way" in ln)
        assert re.findall(r"[a-z]+(?= →)|(?<=→ )[a-z]+", line) == flow, f"{path.name}: {line}"
    table = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [name for name in flow + ["workflows", "cli"] if f"| `cheems.{name}` |" not in table]
    assert not missing, f"README's package table has no row for {missing}"


def test_no_test_cites_a_design_file_users_do_not_have():
    """Tests say where a rule is written in files a user has (README, CONTRIBUTING, docs/), not a team file."""
    this = Path(__file__).resolve()
    found = [
        f"{path.name}:{n}"
        for path in sorted((ROOT / "tests").glob("*.py"))
        if path.resolve() != this
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"\bDESIGN\.md\b", line)
    ]
    assert not found, found


# ---------------------------------------------------------------------------- every command the pages show


DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
METASYNTAX = re.compile(r"[\[\]|()…<>]|\.\.\.|\bCOMMAND\b")  # a synopsis (options in brackets, alternatives)


def doc_commands() -> list[tuple[str, str, bool]]:
    """(page, command line, whether it stands in a code block) of every ``cheems ...`` a page shows."""
    found = []
    for page in DOC_PAGES:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip().removeprefix("$ "))
                parts = re.split(r"\s*(?:&&|;)\s*", line)
                found += [(page.name, part, True) for part in parts if part.startswith("cheems ")]
        found += [(page.name, m.replace("\n", " "), False) for m in re.findall(r"`(cheems [^`]+)`", text)]
    return found


def _command(words: list[str]):
    """The click command the words name (global options skipped) and the words left for it, parsed as
    ``cheems`` parses them (:func:`cheems.cli.console.several_values`)."""
    import typer

    from cheems.cli.console import several_values
    from cheems.cli.main import app

    command = typer.main.get_command(app)
    several_values(command)
    while hasattr(command, "commands"):
        while words and words[0].startswith("-"):
            words = words[1:]
        if not words:
            return command, words
        assert words[0] in command.commands, f"no command {words[0]!r}"
        command, words = command.commands[words[0]], words[1:]
    return command, words


def test_the_pages_show_commands_that_exist_with_options_they_take():
    """Every ``cheems ...`` of README.md and docs/: the command exists and takes every option named (a synopsis
    with ``[--opt X]`` and alternatives too)."""
    wrong = []
    for page, line, _ in doc_commands():
        words = line.split()[1:]
        try:
            command, rest = _command([w for w in words if not METASYNTAX.fullmatch(w)])
        except AssertionError as e:
            wrong.append(f"{page}: {line}: {e}")
            continue
        names = {n for p in command.params for n in (*p.opts, *p.secondary_opts)} | {"--help"}
        named = {re.sub(r"[\[\]()…]|=.*$", "", w) for w in rest if re.match(r"[\[(]?--?[a-z]", w)}
        wrong += [f"{page}: {line}: no option {n}" for n in sorted(named - names) if n.startswith("-")]
    assert not wrong, "\n".join(wrong)


def test_every_example_command_parses():
    """A command that is an example, not a synopsis, parses as written: no unknown option, no extra word (``--bench
    a.jsonl b.jsonl`` gives both files, as docs/api.md shows), and in a code block nothing required missing."""
    import shlex

    from cheems.cli.console import click_errors

    wrong, parsed = [], 0
    for page, line, block in doc_commands():
        if METASYNTAX.search(line):
            continue
        command, rest = _command(shlex.split(line)[1:])
        if hasattr(command, "commands"):
            continue  # a group named alone: its help
        try:
            command.make_context("cheems", rest)
            parsed += 1
        except click_errors.UsageError as e:
            prose = (click_errors.MissingParameter, click_errors.BadOptionUsage)  # a command or option named in prose
            if block or not isinstance(e, prose):
                wrong.append(f"{page}: {line}: {e.format_message()}")
    assert not wrong, "\n".join(wrong)
    assert parsed > 80
