"""The public Python API is as safe as the commands (issue 31): its version, its outputs, its argument types."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cheems
from cheems.arguments import ArgumentTypeError
from cheems.errors import InputError
from helpers import assert_user_error, run_cheems, run_main

SRC = Path(cheems.__file__).resolve().parents[1]
PYPROJECT = SRC.parent / "pyproject.toml"


def _pyproject_version() -> str:
    found = re.search(r'^version\s*=\s*"([^"]+)"', PYPROJECT.read_text(encoding="utf-8"), re.MULTILINE)
    assert found
    return found.group(1)


# ---------------------------------------------------------------------------- version


def test_version_is_the_installed_packages_and_the_commands():
    assert cheems.__version__ == metadata.version("cheems") == _pyproject_version()
    proc = run_cheems("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"cheems {cheems.__version__}"


def test_version_of_a_source_checkout_that_is_not_installed():
    """``python -S``: no site-packages, so no metadata; the checkout's pyproject.toml gives the version."""
    heavy = "{m.split('.')[0] for m in sys.modules} & {'torch', 'numpy', 'pydantic'}"
    code = f"import sys, cheems; print(cheems.__version__); print(sorted({heavy}))"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split("\n")[:2] == [_pyproject_version(), "[]"]


# ---------------------------------------------------------------------------- outputs: the library checks them


def _records(path: Path, n: int = 4) -> Path:
    rows = [
        {
            "id": f"p{i}",
            "input": f"问题{i}：请解释深度学习。",
            "category": ["知识"],
            "responses": [{"id": "a", "content": f"深度学习是一个分支{i}。"}, {"id": "b", "content": "不知道。"}],
            "comparisons": [{"a": "a", "b": "b", "label": "a", "source": "judge"}],
        }
        for i in range(n)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _scores(path: Path) -> Path:
    rows = [{"prompt_id": f"p{i}", "response_id": r, "score": s} for i in range(4) for r, s in (("a", 1.0), ("b", 0.0))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _call(name: str, P: Path, Q: Path, S: Path):
    """Each public function that writes files, given an input as one of its outputs."""
    from cheems.prompts.decontaminate import decontaminate_files
    from cheems.prompts.dedup import dedup_files

    calls = {
        "convert_file": lambda: cheems.convert_file(P, None, P),
        "split_file-train": lambda: cheems.split_file(P, P, Q),
        "split_file-test": lambda: cheems.split_file(P, Q, P),
        "resolve_file": lambda: cheems.resolve_file(P, P),
        "resolve_file-stats": lambda: cheems.resolve_file(P, Q, P),
        "filter_file": lambda: cheems.filter_file(P, P),
        "filter_file-report": lambda: cheems.filter_file(P, Q, report_json=P),
        "distant_file": lambda: cheems.distant_file(P, P, S),
        "distant_file-scores": lambda: cheems.distant_file(P, S, S),
        "debias_file": lambda: cheems.debias_file(P, P),
        "debias_file-report": lambda: cheems.debias_file(P, Q, report_json=P),
        "validate_files-plot": lambda: cheems.validate_files([P], plot=P),
        "dedup_files": lambda: dedup_files([P], P),
        "dedup_files-report": lambda: dedup_files([P], Q, P),
        "decontaminate_files": lambda: decontaminate_files(P, [S], S),
        "decontaminate_files-in": lambda: decontaminate_files(P, [Q], P),
        "judge_files": lambda: cheems.judge_files(P, P, _judge(P)),
        "generate_files": lambda: cheems.generate_files(P, P, _generate(P)),
        "bon_files": lambda: cheems.bon_files(P, P, cheems.ScoredBy(scores=S)),
        "bon_files-scores": lambda: cheems.bon_files(P, S, cheems.ScoredBy(scores=S)),
    }
    return calls[name]


def _judge(P: Path):
    return cheems.JudgeSettings(judge_model="m", base_url="http://127.0.0.1:9/v1", cache=P.parent / "judge.sqlite")


def _generate(P: Path):
    return cheems.GenerateSettings(gen_model="m", base_url="http://127.0.0.1:9/v1", cache=P.parent / "gen.sqlite")


CALLS = [
    *"convert_file split_file-train split_file-test resolve_file resolve_file-stats filter_file".split(),
    *"filter_file-report distant_file distant_file-scores debias_file debias_file-report validate_files-plot".split(),
    *"dedup_files dedup_files-report decontaminate_files decontaminate_files-in judge_files generate_files".split(),
    *"bon_files bon_files-scores".split(),
]


@pytest.mark.parametrize("name", CALLS)
def test_a_public_function_never_writes_onto_its_input(tmp_path, monkeypatch, name):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    P, Q, S = _records(tmp_path / "in.jsonl"), tmp_path / "other.jsonl", _scores(tmp_path / "scores.jsonl")
    bench = _records(tmp_path / "other.jsonl", n=1) if name.startswith("decontaminate_files-in") else None
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(InputError, match="input"):
        _call(name, P, Q if bench is None else bench, S)()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def _model_folder(folder: Path) -> Path:
    """A folder as a model is (what train refuses to replace is decided before it is loaded)."""
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen2"}\n', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "where",
    ["output-is-the-model", "data-inside-the-model", "output-holds-the-data", "output-inside-the-model", "config"],
)
def test_train_never_replaces_its_model_or_data_even_with_overwrite(tmp_path, where):
    rm = _model_folder(tmp_path / "rm")
    data = _records(rm / "x.jsonl") if where == "data-inside-the-model" else _records(tmp_path / "d" / "x.jsonl")
    settings = {"model": str(rm), "data": [str(data)], "output": str(rm), "overwrite": True}
    if where == "output-holds-the-data":
        settings.update(output=str(tmp_path / "d"), model=str(rm))
    elif where == "output-inside-the-model":
        settings.update(output=str(rm / "sub"))
    config = None
    if where == "config":  # the config file itself lies in the output folder
        config = tmp_path / "out" / "train.yaml"
        config.parent.mkdir()
        config.write_text("epochs: 1\n", encoding="utf-8")
        settings.update(output=str(tmp_path / "out"))
    before = _snapshot(tmp_path)
    with pytest.raises(InputError, match="input"):
        cheems.train(config, **settings)
    assert _snapshot(tmp_path) == before


def test_train_given_a_config_object_checks_it_too(tmp_path):
    rm = _model_folder(tmp_path / "rm")
    data = _records(rm / "x.jsonl")
    config = cheems.TrainConfig(model=str(rm), data=[str(data)], output=str(rm), overwrite=True)
    before = _snapshot(tmp_path)
    with pytest.raises(InputError, match="is also the input --model"):
        cheems.train(config)
    assert _snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- argument types: named at the call


class _Wrong:
    """A value no annotation of the public API admits."""


PUBLIC_FUNCTIONS = [n for n in cheems.__all__ if inspect.isfunction(getattr(cheems, n))]


def test_every_public_function_checks_its_arguments():
    assert len(PUBLIC_FUNCTIONS) > 30
    unchecked = [n for n in PUBLIC_FUNCTIONS if not getattr(getattr(cheems, n), "__checked__", False)]
    assert not unchecked


UNCHECKED = {  # parameters no annotation check can hold: what they take is checked by the body
    ("train", "settings"),  # **settings: TrainConfig's fields, each checked by the settings model
    ("judge", "chat"),  # any awaitable chat function (a test's fake server client too)
}


def _public_parameters() -> list[tuple[str, str]]:
    found = []
    for name in PUBLIC_FUNCTIONS:
        for p in inspect.signature(getattr(cheems, name)).parameters.values():
            if (name, p.name) not in UNCHECKED and p.kind != p.VAR_KEYWORD:
                found.append((name, p.name))
    return found


@pytest.mark.parametrize("name, parameter", _public_parameters(), ids=[f"{n}-{p}" for n, p in _public_parameters()])
def test_a_wrong_argument_is_a_type_error_naming_it(name, parameter, tmp_path, monkeypatch):
    """Every parameter of every public function: a value no annotation admits raises ArgumentTypeError (an
    InputError and a TypeError) naming that parameter, before anything is read or written."""
    monkeypatch.chdir(tmp_path)
    fn = getattr(cheems, name)
    p = inspect.signature(fn).parameters[parameter]
    args, kwargs = ((_Wrong(),), {}) if p.kind == p.POSITIONAL_ONLY else ((), {parameter: _Wrong()})
    with pytest.raises(ArgumentTypeError, match=f"argument '{parameter}' of {name}\\(\\) must be"):
        fn(*args, **kwargs)
    assert list(tmp_path.iterdir()) == []


ISSUE_CASES = {
    "load_bench-str": (lambda: cheems.load_bench("open.jsonl"), "paths", "['open.jsonl']"),
    "load_bench-None": (lambda: cheems.load_bench(None), "paths", "None"),
    "validate_files-str": (lambda: cheems.validate_files("open.jsonl"), "paths", "wrap one file in a list"),
    "evaluate_files-str": (lambda: cheems.evaluate_files("open.jsonl", cheems.ScoredBy()), "bench", "list"),
    "write_records-dicts": (lambda: cheems.write_records("o.jsonl", [{"id": "p"}]), "records", "model_validate"),
    "filter_records-dict": (lambda: cheems.filter_records({"id": "p"}), "records", "model_validate"),
    "resolve_record-dict": (lambda: cheems.resolve_record({"id": "p"}), "record", "model_validate"),
    "evaluate-dicts": (lambda: cheems.evaluate({"b": [{"id": "p"}]}, cheems.load_scorer("length")), "bench", ""),
    "split_file-None": (lambda: cheems.split_file(None, "a.jsonl", "b.jsonl"), "source", "None"),
    "judge_files-int": (lambda: cheems.judge_files(3, "o.jsonl", None), "source", "int"),
    "judge-None": (lambda: cheems.judge(None, None), "records", "None"),
    "train-int": (lambda: cheems.train(3), "config", "int"),
}


@pytest.mark.parametrize("case", ISSUE_CASES, ids=list(ISSUE_CASES))
def test_the_issues_wrong_arguments(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call, argument, shown = ISSUE_CASES[case]
    with pytest.raises(ArgumentTypeError) as caught:
        call()
    assert f"argument '{argument}'" in str(caught.value) and shown in str(caught.value)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, InputError)
    assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_leaderboard_is_an_input_error():
    with pytest.raises(InputError, match="no evaluation to rank"):
        cheems.leaderboard([])


@settings(max_examples=60, deadline=None)
@given(
    value=st.one_of(
        st.text(min_size=1),
        st.binary(),
        st.integers(),
        st.none(),
        st.dictionaries(st.text(), st.text()),
        st.lists(st.integers(), min_size=1),
    )
)
def test_a_list_of_paths_never_takes_anything_else(value):
    """Where a list of files goes (load_bench, validate_files, evaluate_files, score_files, leaderboard)."""
    for call in (
        lambda: cheems.load_bench(value),
        lambda: cheems.validate_files(value),
        lambda: cheems.leaderboard(value),
        lambda: cheems.evaluate_files(value, cheems.ScoredBy()),
    ):
        with pytest.raises(ArgumentTypeError, match=r"argument '(paths|bench)'"):
            call()


def test_a_str_where_a_path_goes_is_made_a_path(tmp_path):
    """judge_files, generate_files, bon_files annotate Path: a str works too (before, `.suffix` failed deep down)."""
    P, S = _records(tmp_path / "in.jsonl"), _scores(tmp_path / "scores.jsonl")
    result = cheems.bon_files(str(P), str(tmp_path / "picks.jsonl"), cheems.ScoredBy(scores=S))
    assert result is not None and (tmp_path / "picks.jsonl").exists()


# ---------------------------------------------------------------------------- several files after one option


def _bench(path: Path, prefix: str) -> Path:
    rows = [
        {
            "id": f"{prefix}{i}",
            "input": f"问题{prefix}{i}",
            "responses": [{"id": "a", "content": "好的回答"}, {"id": "b", "content": "差"}],
            "rank": {"a": 1, "b": 2},
        }
        for i in range(3)
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_one_bench_option_takes_several_files_as_docs_api_shows(tmp_path, monkeypatch, capsys):
    """``cheems eval --bench open.jsonl human.jsonl --model length --output-json J`` (docs/api.md) evaluates both."""
    monkeypatch.chdir(tmp_path)
    _bench(tmp_path / "open.jsonl", "o"), _bench(tmp_path / "human.jsonl", "h")
    args = [
        "eval",
        "--bench",
        "open.jsonl",
        "human.jsonl",
        "--model",
        "length",
        "--no-cache",
        "--output-json",
        "j.json",
    ]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert set(json.loads((tmp_path / "j.json").read_text())["subsets"]) == {"open", "human"}
    repeated = run_main(*args[:3], "--bench", *args[3:], monkeypatch=monkeypatch, capsys=capsys)
    assert repeated.returncode == 0, repeated.stderr


def test_a_word_left_over_names_the_fix(tmp_path, monkeypatch, capsys):
    """Where a word after ``--bench`` could be the command's own argument it stays one; one too many is an error
    that says how to give several files."""
    monkeypatch.chdir(tmp_path)
    _records(tmp_path / "in.jsonl"), _bench(tmp_path / "a.jsonl", "a"), _bench(tmp_path / "b.jsonl", "b")
    proc = run_main(
        "decontaminate",
        "in.jsonl",
        "--bench",
        "a.jsonl",
        "b.jsonl",
        "-o",
        "o.jsonl",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert_user_error(proc, "unexpected extra argument", "--bench a.jsonl --bench b.jsonl")
    assert not (tmp_path / "o.jsonl").exists()


def test_a_suites_json_never_replaces_its_config_or_a_bench(tmp_path):
    bench = _bench(tmp_path / "open.jsonl", "o")
    config = tmp_path / "suite.yaml"
    config.write_text("resamples: 0\nbenches:\n  - name: open\n    bench: open.jsonl\n", encoding="utf-8")
    scores = tmp_path / "s.jsonl"
    rows = [{"prompt_id": f"o{i}", "response_id": r, "score": s} for i in range(3) for r, s in (("a", 1.0), ("b", 0.0))]
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = cheems.suite_files(config, cheems.ScoredBy(scores=scores), progress=False)
    before = _snapshot(tmp_path)
    for target in (config, bench):
        with pytest.raises(InputError, match="is also the input"):
            result.write(target)
    assert _snapshot(tmp_path) == before
    result.write(tmp_path / "suite.json")
    assert json.loads((tmp_path / "suite.json").read_text())["benches"]["open"]["score"] == 1.0


def test_an_evaluations_files_never_replace_a_bench_or_the_scores(tmp_path):
    """``cheems.evaluate_files(...).write(...)``, as ``cheems eval`` writes them."""
    bench = [_bench(tmp_path / "open.jsonl", "o")]
    scores = tmp_path / "s.jsonl"
    rows = [{"prompt_id": f"o{i}", "response_id": r, "score": s} for i in range(3) for r, s in (("a", 1.0), ("b", 0.0))]
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = cheems.evaluate_files(bench, cheems.ScoredBy(scores=scores), progress=False, fingerprint=True)
    before = _snapshot(tmp_path)
    for one in ({"output_json": bench[0]}, {"output_json": scores}, {"details": bench[0]}):
        with pytest.raises(InputError, match="is also the input"):
            run.write(**{"output_json": None, "report": None, "details": None, **one})
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "words, spread",
    [
        ("--bench a b --model m", "--bench a --bench b --model m"),
        ("--bench=a b", "--bench=a --bench b"),
        ("--model m x", "--model m x"),  # --model is given once: x stays a word click refuses
        ("--bench a --no-cache b", "--bench a --no-cache b"),  # a flag ends the files
        ("--bench", "--bench"),  # no value: click says so
        ("--bench a -- b", "--bench a -- b"),
    ],
)
def test_the_words_after_a_repeatable_option(words, spread):
    import typer

    from cheems.cli.console import spread_values
    from cheems.cli.main import app

    command = typer.main.get_command(app).commands["eval"]
    assert spread_values(command.params, words.split()) == spread.split()


def test_paths_in_a_list_or_tuple_are_made_paths():
    from cheems.arguments import checked

    def f(a: Sequence[Path], b: list[Path], c: Path | None = None) -> tuple:
        return a, b, c

    assert checked(f)(("x",), ["y"], "z") == ((Path("x"),), [Path("y")], Path("z"))
    assert checked(f)([], [])[2] is None
    with pytest.raises(ArgumentTypeError, match="argument 'b' of f\\(\\) must be a list of Path, not tuple"):
        checked(f)([], ("y",))
