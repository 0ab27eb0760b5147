"""Hostile config files (issue 8, class 5) against every command that reads one.

``train --config``, ``curate filter --config``, ``curate run RECIPE`` and ``judge --criteria`` all
read their file through :mod:`cheems.yamlfile`. Every case must end in exit 2 with one
``error:`` line naming the file (and the line and key where there is one), no traceback, no hang,
and no output written. The cases run through the real entry point in this process (fast); the
alias bomb also runs as a real subprocess under a time limit.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import assert_user_error, run_cheems, run_main, write_jsonl

RECORD = {
    "id": "p1",
    "input": "1+1等于几？",
    "category": ["数学"],
    "responses": [{"id": "r1", "content": "等于2。"}, {"id": "r2", "content": "等于3。"}],
    "comparisons": [{"a": "r1", "b": "r2", "label": "a"}],
}

ALIAS_BOMB = "".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    + [f"{x}: &{x} [{', '.join(['*' + p] * 9)}]\n" for p, x in zip("abcdefgh", "bcdefghi")]
)


@dataclass(frozen=True)
class Command:
    """A command that reads a config file: its arguments, a valid first line and a key it knows."""

    name: str
    args: Callable[[Path, Path], list[object]]  # (config, folder) -> argv
    outputs: tuple[str, ...]  # what a failed run must not leave in the folder
    first: str  # a valid first line, so the hostile part sits on line 2
    key: str  # a key this config may hold


COMMANDS = {
    "train": Command(
        "train",
        lambda c, d: ["train", "--config", c, "--data", d / "records.jsonl", "--output", d / "out"],
        ("out",),
        "epochs: 1",
        "lr",
    ),
    "filter": Command(
        "filter",
        lambda c, d: ["curate", "filter", d / "records.jsonl", "-o", d / "out.jsonl", "--config", c],
        ("out.jsonl",),
        "max_chars: 5000",
        "max_length_ratio",
    ),
    "recipe": Command(
        "recipe", lambda c, d: ["curate", "run", c], ("curated",), "judge_input: records.jsonl", "output_dir"
    ),
    "criteria": Command(
        "criteria",
        lambda c, d: [
            "judge",
            d / "records.jsonl",
            "-o",
            d / "out.jsonl",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--judge-model",
            "m",
            "--cache",
            d / "judge.sqlite",
            "--no-progress",
            "--criteria",
            c,
        ],
        ("out.jsonl", "judge.sqlite"),
        "代码: code",
        "写作",
    ),
}
ENV = {"OPENAI_API_KEY": "test-key"}


@dataclass(frozen=True)
class Case:
    """A hostile config: its file name and bytes (built from the command), where the error points, what it says."""

    suffix: str
    content: Callable[[Command], bytes | None]  # None: no file; b"<dir>": a folder; b"<fifo>": a named pipe
    line: int | None
    says: str
    field: Callable[[Command], str | None] = lambda c: None


def text(build: Callable[[Command], str]) -> Callable[[Command], bytes]:
    return lambda c: build(c).encode("utf-8")


GENERIC = {
    "alias bomb": Case(".yaml", text(lambda c: ALIAS_BOMB), 1, "anchors and aliases"),
    "anchor and merge key": Case(
        ".yaml", text(lambda c: f"{c.first}\nbase: &b {{x: 1}}\nother:\n  <<: *b\n"), 2, "anchors and aliases"
    ),
    "duplicate key": Case(
        ".yaml",
        text(lambda c: f"{c.first}\n{c.first}\n"),
        2,
        "given twice (first on line 1)",
        lambda c: c.first.split(":")[0],
    ),
    "nested duplicate key": Case(
        ".yaml", text(lambda c: f"{c.first}\nx:\n  y: 1\n  y: 2\n"), 4, "given twice", lambda c: "x.y"
    ),
    ".nan": Case(".yaml", text(lambda c: f"{c.first}\n{c.key}: .nan\n"), 2, "not a finite number", lambda c: c.key),
    "-.inf": Case(".yaml", text(lambda c: f"{c.first}\n{c.key}: -.inf\n"), 2, "not a finite number", lambda c: c.key),
    "1e400": Case(".yaml", text(lambda c: f"{c.first}\n{c.key}: 1e400\n"), 2, "not a finite number", lambda c: c.key),
    "NaN word": Case(".yaml", text(lambda c: f"{c.first}\n{c.key}: NaN\n"), 2, "not a finite number", lambda c: c.key),
    "JSON NaN": Case(".json", text(lambda c: f'{{\n  "{c.key}": NaN\n}}\n'), 2, "not a finite number", lambda c: c.key),
    "JSON Infinity": Case(
        ".json", text(lambda c: f'{{\n  "{c.key}": -Infinity\n}}\n'), 2, "not a finite number", lambda c: c.key
    ),
    "JSON 1e400": Case(
        ".json", text(lambda c: f'{{\n  "{c.key}": 1e400\n}}\n'), 2, "not a finite number", lambda c: c.key
    ),
    "JSON lines in a .json": Case(".json", text(lambda c: f'{{"{c.key}": 1}}\n{{"{c.key}": 2}}\n'), 2, "invalid JSON"),
    "JSON duplicate key": Case(
        ".json", text(lambda c: f'{{\n  "{c.key}": 1,\n  "{c.key}": 2\n}}\n'), 3, "given twice", lambda c: c.key
    ),
    "JSON lone surrogate": Case(
        ".json", text(lambda c: f'{{\n  "{c.key}": "\\ud800"\n}}\n'), 2, "lone surrogate", lambda c: c.key
    ),
    "list at the top": Case(".yaml", text(lambda c: "- a\n- b\n"), 1, "expected a mapping, got a list"),
    "one value at the top": Case(".yaml", text(lambda c: "just some words\n"), 1, "got a single value"),
    "two documents": Case(".yaml", text(lambda c: f"{c.first}\n---\n{c.first}\n"), 2, "more than one YAML document"),
    "not UTF-8": Case(".yaml", lambda c: f"{c.first}\n".encode() + "x: 中文\n".encode("gbk"), 2, "not UTF-8"),
    "binary (a zip)": Case(".yaml", lambda c: b"PK\x03\x04\x14\x00\x00\x00\x08\x00", 1, "control character"),
    "NUL byte": Case(".yaml", lambda c: f"{c.first}\nx: a\x00b\n".encode(), 2, "control character"),
    "tab indent": Case(".yaml", text(lambda c: f"{c.first}\nx:\n\ty: 1\n"), 3, "tabs"),
    "unclosed list": Case(".yaml", text(lambda c: f"{c.first}\n{c.key}: [1, 2\n"), 3, "invalid YAML"),
    "deep nesting": Case(".yaml", text(lambda c: f"{c.first}\nx: {'[' * 5000}{']' * 5000}\n"), 2, "nested more than"),
    "deep JSON": Case(".json", text(lambda c: f'{{"x": {"[" * 100000}{"]" * 100000}}}'), 1, "nested more than"),
    "python tag": Case(
        ".yaml",
        text(lambda c: f"{c.first}\n{c.key}: !!python/object/apply:os.system ['echo hi']\n"),
        2,
        "YAML tag '!!python/object/apply:os.system'",
        lambda c: c.key,
    ),
    "binary tag": Case(
        ".yaml", text(lambda c: f"{c.first}\n{c.key}: !!binary aGk=\n"), 2, "YAML tag '!!binary'", lambda c: c.key
    ),
    "!!bool on text": Case(
        ".yaml",
        text(lambda c: f"{c.first}\n{c.key}: !!bool maybe\n"),
        2,
        "cannot read 'maybe' as bool",
        lambda c: c.key,
    ),
    "5000-digit number": Case(
        ".yaml", text(lambda c: f"{c.first}\n{c.key}: {'9' * 5000}\n"), 2, "out of range", lambda c: c.key
    ),
    "list as a key": Case(".yaml", text(lambda c: f"{c.first}\n? [a, b]\n: 1\n"), 2, "a key must be a plain name"),
    "empty file": Case(".yaml", lambda c: b"", 1, "is empty"),
    "comments only": Case(".yaml", lambda c: b"# nothing here\n", 1, "is empty"),
    "huge file": Case(".yaml", lambda c: b"x: " + b"y" * (2 << 20) + b"\n", None, "too large"),
    "a folder": Case(".yaml", lambda c: b"<dir>", None, "is a folder"),
    "a named pipe (reading it would block)": Case(".yaml", lambda c: b"<fifo>", None, "not a regular file"),
    "no such file": Case(".yaml", lambda c: None, None, "no such"),
}

SPECIFIC = {  # (command, name): (content, line, says, field)
    ("train", "unknown key"): ("epochs: 1\nepoch: 2\n", 2, "unknown key 'epoch'", "epoch"),
    ("train", "unknown nested key"): ("epochs: 1\nlora:\n  rank: 8\n", 3, "unknown key 'lora.rank'", "lora.rank"),
    ("train", "wrong type"): ("epochs: two\n", 1, "expected a whole number", "epochs"),
    ("train", "quoted nan"): ("epochs: 1\nlr: 'nan'\n", 2, "finite number", "lr"),
    ("train", "quoted Infinity in lora"): ("lora:\n  dropout: 'Infinity'\n", 2, "finite number", "lora.dropout"),
    ("train", "zero epochs"): ("epochs: 0\n", 1, "must be >= 1", "epochs"),
    ("train", "a million epochs"): ("epochs: 1000000\n", 1, "at most", "epochs"),
    ("train", "negative seed"): ("seed: -1\n", 1, "between 0 and 2**32 - 1", "seed"),
    ("train", "empty model"): ("epochs: 1\nmodel: ''\n", 2, "is empty", "model"),
    ("train", "data is a number"): ("data: 5\n", 1, "expected a list", "data"),
    ("train", "unknown truncation"): ("truncation: cut\n", 1, "unknown policy", "truncation"),
    ("filter", "unknown key"): ("max_chars: 10\nmax_char: 10\n", 2, "unknown key 'max_char'", "max_char"),
    ("filter", "wrong type"): ("max_chars: many\n", 1, "valid integer", "max_chars"),
    ("filter", "quoted inf"): (
        "max_chars: 10\nmax_length_ratio: 'inf'\n",
        2,
        "not a finite number",
        "max_length_ratio",
    ),
    ("filter", "share above 1"): ("max_non_chinese_share: 2\n", 1, "less than or equal to 1", "max_non_chinese_share"),
    ("filter", "bad regex"): (
        "exempt_prompt_pattern: '('\n",
        1,
        "not a valid regular expression",
        "exempt_prompt_pattern",
    ),
    ("recipe", "unknown nested key"): (
        "output_dir: curated\njudge_input: records.jsonl\nfilter:\n  max_char: 10\n",
        4,
        "unknown key 'max_char'",
        "filter.max_char",
    ),
    ("recipe", "missing key"): ("judge_input: records.jsonl\n", None, "is missing", "output_dir"),
    ("recipe", "input file missing"): (
        "output_dir: curated\njudge_input: nowhere.jsonl\n",
        2,
        "no such file",
        "judge_input",
    ),
    ("recipe", "judge setting of the wrong type"): (
        "output_dir: curated\njudge_input: records.jsonl\njudge:\n  judge_model: m\n  base_url: http://127.0.0.1:9/v1\n"
        "  concurrency: many\n",
        6,
        "valid integer",
        "judge.concurrency",
    ),
    ("recipe", "judge setting quoted nan"): (
        "output_dir: curated\njudge_input: records.jsonl\njudge:\n  judge_model: m\n  base_url: http://127.0.0.1:9/v1\n"
        "  temperature: 'nan'\n",
        6,
        "not a finite number",
        "judge.temperature",
    ),
    ("recipe", "distant margin .inf"): (
        "output_dir: curated\njudge_input: records.jsonl\ndistant:\n  margin: .inf\n",
        4,
        "not a finite number",
        "distant.margin",
    ),
    ("recipe", "debias unit unknown"): (
        "output_dir: curated\njudge_input: records.jsonl\ndebias:\n  unit: words\n",
        4,
        "'chars' or 'tokens'",
        "debias.unit",
    ),
    ("criteria", "unknown group"): ("代码: code\n写作: poetry\n", 2, "unknown criterion group 'poetry'", "写作"),
    ("criteria", "mapping as group"): ("代码: code\n写作: {a: b}\n", 2, "expected a criterion group name", "写作"),
    ("criteria", "empty list"): ("代码: code\n写作: []\n", 2, "expected a criterion group name", "写作"),
    ("criteria", "empty category"): ("代码: code\n'': code\n", 2, "non-empty", None),
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "records.jsonl", [RECORD])
    return tmp_path


def _config(folder: Path, suffix: str, content: bytes | None) -> Path:
    path = folder / f"config{suffix}"
    if content == b"<dir>":
        path.mkdir()
    elif content == b"<fifo>":
        os.mkfifo(path)
    elif content is not None:
        path.write_bytes(content)
    return path


def _check(proc, command: Command, folder: Path, config: Path, line: int | None, says: str, field: str | None) -> None:
    where = f"{config}:{line}:" if line is not None else f"{config}"
    message = assert_user_error(proc, where, says)
    if field is not None:
        assert f"field '{field}'" in message, message
    for name in command.outputs:
        assert not (folder / name).exists(), f"{name} was created"
    assert (folder / "records.jsonl").read_text(encoding="utf-8").count("\n") == 1  # the input is untouched


GENERIC_CASES = [(c, n) for c in COMMANDS for n in GENERIC]  # an empty file is refused by all: never "defaults"


@pytest.mark.parametrize("command,case", GENERIC_CASES, ids=[f"{c}-{n}" for c, n in GENERIC_CASES])
def test_hostile_config_file(folder: Path, monkeypatch, capsys, command: str, case: str):
    cmd, hostile = COMMANDS[command], GENERIC[case]
    config = _config(folder, hostile.suffix, hostile.content(cmd))
    proc = run_main(*cmd.args(config, folder), monkeypatch=monkeypatch, capsys=capsys, env=ENV)
    _check(proc, cmd, folder, config, hostile.line, hostile.says, hostile.field(cmd))


@pytest.mark.parametrize("command,case", list(SPECIFIC), ids=[f"{c}-{n}" for c, n in SPECIFIC])
def test_bad_value_in_config(folder: Path, monkeypatch, capsys, command: str, case: str):
    content, line, says, field = SPECIFIC[command, case]
    cmd = COMMANDS[command]
    config = _config(folder, ".yaml", content.encode("utf-8"))
    proc = run_main(*cmd.args(config, folder), monkeypatch=monkeypatch, capsys=capsys, env=ENV)
    _check(proc, cmd, folder, config, line, says, field)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_alias_bomb_answers_within_seconds_as_a_real_process(folder: Path, command: str):
    """The 9-line "billion laughs" hung every reader at 2.4 GB; now a subprocess ends under a time limit."""
    cmd = COMMANDS[command]
    config = _config(folder, ".yaml", ALIAS_BOMB.encode())
    proc = run_cheems(*cmd.args(config, folder), env=ENV, timeout=60)  # start-up on a busy machine; the read is instant
    _check(proc, cmd, folder, config, 1, "anchors and aliases", None)


def test_the_bomb_is_refused_before_any_expansion(tmp_path: Path):
    """In the library: the reader refuses at the first anchor, in well under a second."""
    from cheems.errors import InputError
    from cheems.yamlfile import read_yaml_mapping

    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB.replace("lol", "lol" * 1000), encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(InputError, match="anchors and aliases"):
        read_yaml_mapping(path)
    assert time.monotonic() - started < 1


def test_valid_configs_still_read_with_lines(tmp_path: Path):
    """What configs really hold keeps working: floats YAML reads as text, dates, JSON escapes, nesting."""
    from cheems.yamlfile import read_yaml_mapping

    path = tmp_path / "c.yaml"
    path.write_text("lr: 5e-6\nepochs: 2\nwhen: 2024-01-01\nyes: 1\nlora:\n  r: 8\nlist: [1, 2.5]\n", encoding="utf-8")
    data, lines = read_yaml_mapping(path)
    assert data == {"lr": "5e-6", "epochs": 2, "when": "2024-01-01", "yes": 1, "lora": {"r": 8}, "list": [1, 2.5]}
    assert lines[("lora", "r")] == 6 and lines[("list", 1)] == 7
    js = tmp_path / "c.json"
    js.write_text(
        '{\n\t"a": "\\ud83d\\ude00",\n\t"b": 1e5\n}\n', encoding="utf-8"
    )  # tabs and a surrogate pair are JSON
    data, lines = read_yaml_mapping(js)
    assert data == {"a": "😀", "b": 100000.0} and lines[("b",)] == 3
    assert json.loads(js.read_text(encoding="utf-8")) == data
