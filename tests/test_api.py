"""The public Python API: every name documented and importable, ``import cheems`` light, docs/api.md's
example run as written, and each call's result equal to what its command writes (real subprocesses)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cheems
from cheems.data.io import write_json

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"
DEMO = ROOT / "src" / "cheems" / "assets" / "demo"
BENCH = [DEMO / "open.jsonl", DEMO / "human.jsonl"]
BENCH_ARGS = ["--bench", BENCH[0], "--bench", BENCH[1]]

tiny_models = pytest.importorskip("tiny_models")


def test_every_public_name_is_importable_and_documented():
    for name in cheems.__all__:
        obj = getattr(cheems, name)
        assert (obj.__doc__ or "").strip(), f"cheems.{name} has no docstring"
        exec(f"from cheems import {name}", {})
    table = API_DOC.read_text(encoding="utf-8").partition("## The public names")[2]
    missing = [name for name in cheems.__all__ if f"`{name}" not in table and f" {name}`" not in table]
    assert not missing, f"docs/api.md's table lacks {missing}"


def test_import_cheems_loads_neither_torch_nor_the_readers():
    heavy = "('torch', 'numpy', 'pydantic')"
    code = f"import sys, cheems; print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_evaluate_judge_and_train_are_packages_a_script_calls(tmp_path):
    import cheems.evaluate.checks as checks  # a submodule imports as ever
    import cheems.judge.verdict as verdict
    from cheems.train import config

    assert cheems.evaluate.__name__ == "cheems.evaluate" and cheems.train.__name__ == "cheems.train"
    assert checks.__name__ == "cheems.evaluate.checks" and config.TrainConfig is cheems.TrainConfig
    assert cheems.judge.__name__ == "cheems.judge" and verdict.parse_verdict is cheems.judge.parse_verdict
    assert callable(cheems.evaluate) and callable(cheems.train) and callable(cheems.judge)
    settings = cheems.JudgeSettings("m", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "judge.sqlite")
    assert cheems.judge([], settings).records == []
    report = cheems.evaluate(cheems.load_bench(BENCH), cheems.load_scorer("length"), resamples=0)
    assert (
        report.overall
        == cheems.evaluate.evaluation.evaluate(
            cheems.load_bench(BENCH), cheems.load_scorer("length"), resamples=0
        ).overall
    )


def test_evaluate_names_one_function():
    """``evaluate`` is the public ``cheems.evaluate(...)`` only; the evaluation of a bench by a scores table is
    ``evaluate_scores`` (issue 32: ``cheems.evaluate.evaluate`` was another function with another signature)."""
    from cheems.evaluate.bench import evaluate_scores

    defined = [p for p in (ROOT / "src" / "cheems").rglob("*.py") if "\ndef evaluate(" in p.read_text("utf-8")]
    assert [p.relative_to(ROOT).as_posix() for p in defined] == ["src/cheems/evaluate/evaluation.py"]
    assert not hasattr(cheems.evaluate, "evaluate") and cheems.evaluate.evaluate_scores is evaluate_scores
    bench = cheems.load_bench(BENCH)
    scores = cheems.score(bench, cheems.load_scorer("length"))
    assert cheems.evaluate(bench, scores, resamples=0).overall == evaluate_scores(bench, scores).overall


def same_file(tmp_path: Path, data: dict, cli_file: Path) -> None:
    """``data`` written as the commands write JSON is byte for byte the command's file."""
    mine = tmp_path / f"api.{cli_file.name}"
    write_json(mine, data)
    assert mine.read_bytes() == cli_file.read_bytes()


def test_evaluate_writes_what_eval_output_json_writes(tmp_path, cheems_cli):
    out = tmp_path / "eval.json"
    proc = cheems_cli("eval", *BENCH_ARGS, "--model", "length", "--no-cache", "--output-json", out)
    assert proc.returncode == 0, proc.stderr
    report = cheems.evaluate(cheems.load_bench(BENCH), cheems.load_scorer("length"))
    same_file(tmp_path, report.to_dict(), out)


def test_score_and_evaluate_of_a_scores_table_match_score_and_eval(tmp_path, cheems_cli):
    scores, out = tmp_path / "scores.jsonl", tmp_path / "eval.json"
    proc = cheems_cli("score", "--model", "length", *BENCH_ARGS, "--no-cache", "-o", scores)
    assert proc.returncode == 0, proc.stderr
    bench = cheems.load_bench(BENCH)
    values = cheems.score(bench, cheems.load_scorer("length"))
    assert values == cheems.read_scores(scores)
    proc = cheems_cli("eval", *BENCH_ARGS, "--scores", scores, "--resamples", "50", "--output-json", out)
    assert proc.returncode == 0, proc.stderr
    report = cheems.evaluate(bench, cheems.read_scores(scores), source=str(scores), resamples=50)
    same_file(tmp_path, report.to_dict(), out)


def test_compare_matches_compare_of_details_files(tmp_path, cheems_cli):
    """Length against its reverse (a scores table): the same numbers from the details files and from the reports."""
    bench = cheems.load_bench(BENCH)
    length = cheems.score(bench, cheems.load_scorer("length"))
    reverse = tmp_path / "reverse.jsonl"
    cheems.write_scores(reverse, {key: -value for key, value in length.items()})
    runs = {}
    for name, given in (("length", ["--model", "length", "--no-cache"]), ("reverse", ["--scores", reverse])):
        runs[name] = tmp_path / f"{name}.details.jsonl"
        proc = cheems_cli("eval", *BENCH_ARGS, *given, "--resamples", "0", "--details", runs[name])
        assert proc.returncode == 0, proc.stderr
    out = tmp_path / "compare.json"
    proc = cheems_cli("compare", runs["length"], runs["reverse"], "--resamples", "200", "--output-json", out)
    assert proc.returncode == 0, proc.stderr
    same_file(tmp_path, cheems.compare(runs["length"], runs["reverse"], resamples=200).to_dict(), out)
    reports = [
        cheems.evaluate(bench, cheems.load_scorer("length"), resamples=0),
        cheems.evaluate(bench, cheems.read_scores(reverse), source=str(reverse), resamples=0),
    ]
    # a report in memory names no file and carries no bench fingerprint; every number is the same
    from_reports, from_files = cheems.compare(*reports, resamples=200).to_dict(), json.loads(out.read_text())
    for side in ("a", "b", "bench"):
        from_reports.pop(side), from_files.pop(side)
    assert from_reports == from_files
    assert from_files["overall"]["delta"] > 0


def test_bon_writes_what_bon_writes(tmp_path, cheems_cli):
    pool = tmp_path / "pool.jsonl"
    records, _, _ = cheems.resolve(cheems.read_records(DEMO / "human.jsonl").records)
    cheems.write_records(pool, records)
    picks, out = tmp_path / "picks.jsonl", tmp_path / "bon.json"
    proc = cheems_cli("bon", pool, "--model", "length", "-n", "4", "--no-cache", "-o", picks, "--output-json", out)
    assert proc.returncode == 0, proc.stderr
    result = cheems.bon(records, cheems.load_scorer("length"), n=4, source="length")
    same_file(tmp_path, result.to_dict(), out)
    assert dict(result.picks) == cheems.read_scores(picks)


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_api_page_runs(tmp_path, monkeypatch, capsys):
    """Every python block of docs/api.md, in order, in one namespace, with a tiny random BERT for m3e-small
    (the similarity encoder and the backbone trained): the same calls, two seconds instead of a minute."""
    tiny = tiny_models.build_tiny_bert(tmp_path / "tiny")
    blocks = code_blocks(API_DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 4 and sum("m3e-small" in b for b in blocks) == 2
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block.replace("m3e-small", str(tiny)), str(API_DOC), "exec"), namespace)
    printed = capsys.readouterr().out
    for line in ("length baseline: overall", "similarity - length:", "trained on open", "best-of-5 by trained"):
        assert line in printed
    assert namespace["model"] == Path("rm") and (tmp_path / "rm" / "config.json").is_file()


def test_train_refuses_a_bad_setting_before_any_work(tmp_path):
    config = cheems.TrainConfig(data=[str(BENCH[0])], output=str(tmp_path / "rm"))
    for given, settings in ((config, {"epochs": 0}), (None, {"data": [str(BENCH[0])], "epochs": 0})):
        with pytest.raises(cheems.InputError, match="epochs"):
            cheems.train(given, **settings)
    assert not list(tmp_path.iterdir())


def test_evaluate_by_a_judge_writes_what_eval_judge_model_writes(tmp_path, monkeypatch, cheems_cli):
    """A real loopback OpenAI-compatible judge (tests/fault_server.py), each run with its own judgement cache."""
    from fault_server import FakeJudgeServer
    from test_evaluate_judge_bench import KEY_ENV, write_bench

    bench, out = write_bench(tmp_path / "open.jsonl"), tmp_path / "eval.json"
    monkeypatch.setenv("OPENAI_API_KEY", KEY_ENV["OPENAI_API_KEY"])
    with FakeJudgeServer() as server:
        given = ["--judge-model", "fake-judge", "--base-url", server.url, "--max-retries", "1", "--no-progress"]
        proc = cheems_cli("eval", "--bench", bench, *given, "--cache", tmp_path / "cli.sqlite", "--output-json", out)
        assert proc.returncode == 0, proc.stderr
        settings = cheems.JudgeSettings(
            judge_model="fake-judge", base_url=server.url, max_retries=1, cache=tmp_path / "api.sqlite"
        )
        report = cheems.evaluate(cheems.load_bench([bench]), settings, progress=False)
    same_file(tmp_path, report.to_dict(), out)
    assert report.to_dict()["judge"]["questions"] == 9


def test_judge_files_and_bon_files_write_what_their_commands_write(tmp_path, monkeypatch, cheems_cli):
    """The one call behind ``cheems judge`` and ``cheems bon``, against a real loopback judge: the same files."""
    from fault_server import FakeJudgeServer
    from test_cli_judge import write_records

    source = write_records(tmp_path / "in.jsonl")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeJudgeServer() as server:
        given = ["--judge-model", "fake-judge", "--base-url", server.url, "--no-progress"]
        cli, api = tmp_path / "cli.jsonl", tmp_path / "api.jsonl"
        proc = cheems_cli("judge", source, "-o", cli, *given, "--cache", tmp_path / "cli.sqlite")
        assert proc.returncode == 0, proc.stderr
        settings = cheems.JudgeSettings(judge_model="fake-judge", base_url=server.url, cache=tmp_path / "api.sqlite")
        run = cheems.judge_files(source, api, settings, stats_json=tmp_path / "stats.json", progress=False)
    assert api.read_bytes() == cli.read_bytes()
    assert run.failures is None and run.result.stats.judged == 18
    assert json.loads((tmp_path / "stats.json").read_text(encoding="utf-8")) == run.result.stats.to_dict()

    picks_cli, picks_api = tmp_path / "picks-cli.jsonl", tmp_path / "picks-api.jsonl"
    proc = cheems_cli("bon", source, "--model", "length", "-n", "3", "--no-cache", "-o", picks_cli)
    assert proc.returncode == 0, proc.stderr
    by = cheems.ScoredBy(scoring=cheems.ScoringSettings(model="length", no_cache=True))
    result = cheems.bon_files(source, picks_api, by, cheems.BonSettings(n=3))
    assert result is not None and picks_api.read_bytes() == picks_cli.read_bytes()
