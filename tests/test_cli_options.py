"""Settings mapped to command-line options in one place (cheems.cli.options): a field with a description
is an option with that help; an option not given is not an override; a bad value is one error line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import pytest
import typer
from pydantic import Field, model_validator
from typer.testing import CliRunner

from cheems.cli.main import run
from cheems.cli.options import given_settings, settings_options
from cheems.errors import InputError
from cheems.settings import Cli, Settings, Text, TextList, from_options, invalid, rule
from helpers import assert_user_error, record, run_main, write_jsonl


class Inner(Settings):
    enabled: Annotated[bool, Cli("--inner")] = Field(False, description="Switch the inner part on.")
    size: int = 3


class Toy(Settings):
    files: Annotated[TextList, Cli("-f", path=True)] = Field(default_factory=list, description="Input files.")
    name: Text = Field("toy", description="A name.")
    count: Annotated[int, rule(lambda n: n >= 1, "must be >= 1, got {value}", "count from 1")] = Field(
        2, description="How many times."
    )
    rate: float = Field(0.5, description="A rate.")
    fast: bool = Field(False, description="Go fast.")
    quiet: Annotated[bool, Cli(flag=True)] = Field(False, description="Say nothing.")
    hidden: int = 7  # not listed by the command: no option
    inner: Inner = Field(default_factory=Inner)


class Pair(Settings):
    low: int = 0
    high: int = 1

    @model_validator(mode="after")
    def _ordered(self) -> Pair:
        if self.high < self.low:
            raise invalid("is below low", at="high")
        return self


seen: list[dict[str, Any]] = []


def make_app(show_defaults: bool = False) -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.command()
    @settings_options(
        Toy, "files", "config", "name", "count", "rate", "fast", "quiet", "inner.enabled", show_defaults=show_defaults
    )
    def toy(
        *,
        source: Annotated[Path, typer.Argument(metavar="IN", help="The input.")],
        config: Annotated[Optional[Path], typer.Option("--config", "-c", help="A config file.")] = None,
        settings: dict[str, Any],
    ) -> None:
        """A toy command."""
        seen.append({"source": source, "config": config, "settings": settings, "toy": from_options(Toy, settings)})

    return app


def help_text(app: typer.Typer) -> str:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def invoke(app: typer.Typer, *args: str) -> dict[str, Any]:
    seen.clear()
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return seen[-1]


def test_each_listed_field_is_an_option_with_its_description_as_help():
    text = help_text(make_app())
    for line in (
        "--files",
        "-f",
        "Input files.",
        "--name",
        "A name.",
        "--count",
        "How many times.",
        "--rate",
        "--fast",
        "--no-fast",
        "Go fast.",
        "--quiet",
        "Say nothing.",
        "--inner",
        "--no-inner",
        "Switch the inner part on.",
    ):
        assert line in text, line
    assert "--no-quiet" not in text and "--hidden" not in text and "--size" not in text
    assert "<list[Path]>" in text and "<float>" in text and "<int>" in text  # types from the annotations
    # the command's own parameters keep their place in the listed order
    assert text.index("IN") < text.index("--files") < text.index("--config") < text.index("--name")
    assert "[default:" not in text  # a config file or preset decides: no default shown
    assert "[default: 2]" in help_text(make_app(show_defaults=True))


def test_an_option_not_given_is_no_override():
    call = invoke(make_app(), "in.jsonl")
    assert call["settings"] == {} and call["toy"] == Toy()
    assert call["source"] == Path("in.jsonl") and call["config"] is None
    call = invoke(make_app(), "in.jsonl", "--count", "5", "-f", "a.jsonl", "-f", "b.jsonl", "--quiet", "--inner")
    assert call["settings"] == {
        "count": 5,
        "files": [Path("a.jsonl"), Path("b.jsonl")],
        "quiet": True,
        "inner": {"enabled": True},
    }
    toy = call["toy"]
    assert toy.files == ["a.jsonl", "b.jsonl"] and toy.count == 5 and toy.inner == Inner(enabled=True)
    assert invoke(make_app(), "in.jsonl", "--no-fast")["settings"] == {"fast": False}  # False is given, None is not
    # with the model's defaults shown, every option has a value: the same settings
    assert invoke(make_app(show_defaults=True), "in.jsonl")["toy"] == Toy()


def test_given_settings_drops_none_and_nests_dotted_names():
    assert given_settings({"a": None, "b": 0, "c.d": False, "c.e": None}) == {"b": 0, "c": {"d": False}}


def test_options_go_over_a_base_key_by_key():
    toy = from_options(Toy, {"inner": {"enabled": True}}, base={"name": "file", "inner": {"size": 9}})
    assert (toy.name, toy.inner.enabled, toy.inner.size) == ("file", True, 9)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--count", "0"], "--count: field 'count': must be >= 1, got 0 — count from 1"),
        (["--rate", "nan"], "--rate: must be a finite number, got nan"),  # floats are checked while parsing
        (["--count", "many"], "Invalid value for '--count'"),
    ],
)
def test_a_bad_option_value_is_one_error_line(monkeypatch, capsys, args, words):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(sys, "argv", ["toy", "in.jsonl", *args])
    with pytest.raises(SystemExit) as e:
        run(make_app())
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ") and words in err, err


def test_an_error_in_a_setting_not_given_names_no_option():
    with pytest.raises(InputError) as e:
        from_options(Pair, {"low": 5})
    assert e.value.path is None and e.value.field == "high" and "is below low" in str(e.value)
    assert str(e.value).startswith("field 'high': ")  # no made-up place such as <input>


def test_an_error_names_its_place_a_file_or_an_option():
    assert str(InputError("bad", path="a.yaml", line=3, hint="fix")) == "a.yaml:3: bad — fix"
    assert str(InputError("needs 3 annotators", path="--overlap")) == "--overlap: needs 3 annotators"
    assert str(InputError("no such prompt", line=7)) == "line 7: no such prompt"
    assert str(InputError("no training data")) == "no training data"


def test_the_train_judge_and_filter_options_come_from_their_settings():
    """The shipped commands read their help from the models (here: one option each)."""
    from cheems.cli.main import app
    from cheems.curate.filters import FilterConfig
    from cheems.judge.judge_settings import JudgeSettings
    from cheems.train.config import TrainConfig

    for args, model, field, flag in [
        (["train"], TrainConfig, "warmup_ratio", "--warmup-ratio"),
        (["judge"], JudgeSettings, "max_consecutive_failures", "--max-consecutive-failures"),
        (["curate", "filter"], FilterConfig, "long_min_chars", "--long-min-chars"),
    ]:
        result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "250", "NO_COLOR": "1"})
        assert flag in result.output and model.model_fields[field].description in result.output


# every option a command names in its error: (command, the option wrong in it); {pool} is a record file
PLACES = [
    (["score", "--model", "length", "--bench", "{pool}", "--batch-size", "0", "-o", "{out}"], "--batch-size"),
    (["bon", "{pool}", "--model", "length", "--dtype", "fp8", "-o", "{out}"], "--dtype"),
    (["score", "--model", "length", "--bench", "{pool}", "--max-length", "4", "-o", "{out}"], "--max-length"),
    (["score", "--model", "similarity:", "--bench", "{pool}", "-o", "{out}"], "--model"),
    (["score", "--model", "vllm:http://127.0.0.1:9", "--bench", "{pool}", "-o", "{out}"], "--model"),
    (["score", "--model", "not a/hub id", "--bench", "{pool}", "-o", "{out}"], "--model"),
    (["eval", "--model", "length", "--bench", "{pool}", "--batch-size", "0", "--output-json", "{out}"], "--batch-size"),
    (["eval", "--model", "similarity:", "--bench", "{pool}", "--output-json", "{out}"], "--model"),
    (["bon", "{pool}", "--model", "length", "--max-length", "2", "-o", "{out}"], "--max-length"),
    (["bon", "{pool}", "--model", "openrlhf:http://127.0.0.1:9#rm", "-o", "{out}"], "--model"),
    (["curate", "distant", "{pool}", "--model", "similarity:", "-o", "{out}"], "--model"),
    (["curate", "distant", "{pool}", "--scores", "{pool}", "--margin", "-1", "-o", "{out}"], "--margin"),
    (
        ["split", "{pool}", "--train", "{out}/a.jsonl", "--test", "{out}/b.jsonl", "--test-fraction", "1.5"],
        "--test-fraction",
    ),
    (["train", "--data", "{pool}", "--model", "not a/hub id", "--output", "{out}"], "--model"),
    (["demo", "--model", "similarity:", "--no-train", "-o", "{out}"], "--model"),
    (["judge", "{pool}", "-o", "{out}"], "--judge-model"),
    (["judge", "{pool}", "--judge-model", "qwen"], "--output"),
    (["generate", "{pool}", "-o", "{out}"], "--gen-model"),
    (["generate", "{pool}", "--gen-model", "qwen"], "--output"),
]


@pytest.mark.parametrize(("args", "option"), PLACES, ids=[f"{a[0]} {o}" for a, o in PLACES])
def test_a_bad_option_value_names_the_option_as_its_place(tmp_path, monkeypatch, capsys, args, option):
    ranked = record(3, [("r1", "r2", "a")], rank={"r1": 1, "r2": 2, "r3": 3})
    pool = write_jsonl(tmp_path / "pool.jsonl", [ranked.model_dump(mode="json", exclude_none=True)])
    before = pool.read_bytes()
    out = tmp_path / "out"
    proc = run_main(*(a.format(pool=pool, out=out) for a in args), monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {option}: "), proc.stderr
    # nothing written, nothing changed (demo's folder is its own: only what it wrote before the error)
    assert pool.read_bytes() == before and (args[0] == "demo" or not out.exists())


def test_library_checks_name_the_option_their_argument_comes_from():
    """Called from Python the checks behind those options (typer refuses -n 0 or --bins 0 before them) say the same."""
    from cheems.analysis.bias import Loaded, bias_report, load_judgements
    from cheems.analysis.bon import best_of_n
    from cheems.curate.debias import length_function
    from cheems.curate.distant import new_report
    from cheems.models import load_scorer

    for call, option in [
        (lambda: load_scorer("length", batch_size=0), "--batch-size"),
        (lambda: load_scorer("length", max_length=4), "--max-length"),
        (lambda: load_scorer(" "), "--model"),
        (lambda: best_of_n([], {}, n=0), "-n"),
        (lambda: best_of_n([], {}, sample="best"), "--sample"),  # type: ignore[arg-type]
        (lambda: load_judgements([], by="day"), "--by"),
        (lambda: bias_report(Loaded(), n_bins=0), "--bins"),
        (lambda: new_report(-1.0, None), "--margin"),
        (lambda: length_function("tokens"), "--tokenizer"),
    ]:
        with pytest.raises(InputError) as e:
            call()
        assert e.value.path == option and str(e.value).startswith(f"{option}: "), str(e.value)


def _commands(app: typer.Typer, path: tuple[str, ...] = ()):
    """(command path, the function typer calls) of every command of ``app`` and its sub-apps."""
    for info in app.registered_commands:
        assert info.callback is not None
        yield (*path, info.name or info.callback.__name__.replace("_", "-")), info.callback
    for group in app.registered_groups:
        assert group.typer_instance is not None and group.name is not None
        yield from _commands(group.typer_instance, (*path, group.name))


def test_every_settings_field_of_a_command_has_a_description_shown_in_its_help():
    """A new setting is one field with a description: the option, its flag and its help come from it."""
    from cheems.cli.main import app
    from cheems.settings import Settings, field_info, option_name

    seen = set()
    for path, callback in _commands(app):
        fields = getattr(callback, "settings_fields", [])
        if not fields:
            continue
        seen.add(path)
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "250", "NO_COLOR": "1"})
        assert result.exit_code == 0, result.output
        text = " ".join(result.output.split())
        for model, name in fields:
            assert issubclass(model, Settings)
            description = field_info(model, name).description  # a dotted name: the nested field's
            assert description, f"cheems {' '.join(path)}: setting {name} of {model.__name__} has no description"
            flag = option_name(model, name)
            assert f" {flag} " in text, f"cheems {' '.join(path)} --help does not show {flag}"
            # rich folds the help: its words, not its line breaks, are compared
            assert " ".join(description.split()[:6]) in text, f"cheems {' '.join(path)}: {flag} lacks its help"
    assert {("score",), ("eval",), ("bon",), ("curate", "distant"), ("winrate",), ("train",)} <= seen


# the one "exactly one of --scores / --model / --judge-model" decoding (cheems.ScoredBy.from_settings), per command
NOT_ONE_SOURCE = [
    (["eval", "--bench", "{pool}", "--model", "length", "--scores", "{pool}"], "cheems eval needs --bench and exactly"),
    (
        ["eval", "--bench", "{pool}", "--scores", "{pool}", "--judge-model", "q"],
        "cheems eval needs --bench and exactly",
    ),
    (["eval", "--bench", "{pool}"], "cheems eval needs --bench and exactly"),
    (["bon", "{pool}", "--model", "length", "--scores", "{pool}", "-o", "{out}"], "cheems bon needs -o PICKS.jsonl"),
    (["bon", "{pool}", "-o", "{out}"], "cheems bon needs -o PICKS.jsonl"),
    (["curate", "distant", "{pool}", "--model", "length", "--scores", "{pool}", "-o", "{out}"], "exactly one of"),
    (["curate", "distant", "{pool}", "-o", "{out}"], "cheems curate distant needs exactly one of --scores or --model"),
    (
        [
            "winrate",
            "{pool}",
            "--pool",
            "{pool}",
            "--baseline-field",
            "reference",
            "--judge-model",
            "q",
            "--from-export",
            "{pool}",
        ],
        "cheems winrate needs --pool, --baseline-field and exactly one of",
    ),  # fmt: skip
    (["winrate", "{pool}", "--pool", "{pool}", "--baseline-field", "reference"], "cheems winrate needs --pool"),
]


@pytest.mark.parametrize(("args", "message"), NOT_ONE_SOURCE, ids=[" ".join(a[:2]) for a, _ in NOT_ONE_SOURCE])
def test_not_exactly_one_source_of_scores_is_one_line_before_anything_is_read(
    tmp_path, monkeypatch, capsys, args, message
):
    pool = write_jsonl(tmp_path / "pool.jsonl", [record(2, [("r1", "r2", "a")]).model_dump(mode="json")])
    before = pool.read_bytes()
    out = tmp_path / "out.jsonl"
    proc = run_main(*(a.format(pool=pool, out=out) for a in args), monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, message)
    assert len(proc.stderr.splitlines()) == 1 and pool.read_bytes() == before and not out.exists()


# options that became settings fields: a bad value is one line naming the option, before any file is read
SETTINGS_PLACES = [
    (["bon", "{missing}", "--model", "length", "-n", "0", "-o", "{out}"], "-n"),
    (["eval", "--bench", "{missing}", "--model", "length", "--resamples", "-1"], "--resamples"),
    (["compare", "{missing}", "{missing}", "--level", "0.3"], "--level"),
    (["correlate", "--bench", "{missing}", "--downstream", "{missing}", "--resamples", "0"], "--resamples"),
    (["winrate", "{missing}", "--pool", "{missing}", "--baseline-field", "r", "--overlap", "0"], "--overlap"),
]


@pytest.mark.parametrize(("args", "option"), SETTINGS_PLACES, ids=[f"{a[0]} {o}" for a, o in SETTINGS_PLACES])
def test_a_bad_setting_is_refused_before_any_file_is_read(tmp_path, monkeypatch, capsys, args, option):
    missing, out = tmp_path / "missing.jsonl", tmp_path / "out.jsonl"
    proc = run_main(*(a.format(missing=missing, out=out) for a in args), monkeypatch=monkeypatch, capsys=capsys)
    line = assert_user_error(proc)
    assert line.startswith(f"error: {option}: ") and not out.exists(), line
