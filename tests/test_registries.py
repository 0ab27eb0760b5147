"""The registries of the extension points: a scorer, a ``--metric`` metric and an import format registered from
outside (a test's own entry, removed after it) work through the library call and ``cheems``, and are listed in
``--help`` and in the hints; an unknown name is one line listing the registered ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cheems.data.importers import FORMATS, import_file
from cheems.errors import InputError
from cheems.evaluate import evaluate_scores, load_bench
from cheems.evaluate.benchmark_report import benchmark_report
from cheems.metrics.metric_registry import METRICS
from cheems.models.registry import SCORERS, load_scorer, scorers_help, spec_hint
from cheems.registries import Registry
from helpers import assert_user_error, run_main, write_jsonl

# A plugin as a user writes one: one function and one decorator line per entry.
ENTRIES = """
from cheems.data.importers import register_format
from cheems.data.schema import Record
from cheems.metrics.metric_registry import pair_right, register_metric
from cheems.models.registry import register_scorer


class Constant:
    name = "constant"

    def __init__(self, value):
        self.value = value

    def fingerprint(self):
        return f"constant-{self.value}"

    def score(self, items):
        return [self.value if "好" in response else 0.0 for _, response in items]


@register_scorer("constant", form="constant:VALUE", help="VALUE for a response with 好, else 0")
def constant(spec, options):
    return Constant(float(spec.partition(":")[2]))


@register_metric("first-pair", title="first pair", help="share of prompts whose first pair is right")
def first_pair(outcomes, records, name):
    hits = [pair_right(o.pairs[0]) for o in outcomes if o.pairs]
    share = sum(hits) / len(hits)
    return {"accuracy": share, "pooled_accuracy": share, "n_prompts": len(hits), "n_pairs": len(hits),
            "categories": {}}


@register_format("qa", help="{q, good, bad} rows")
def qa(job):
    for line, row in job.rows:
        yield job.fn(Record.model_validate({"id": f"q{line}", "input": row["q"], "responses": [
            {"id": "good", "content": row["good"]}, {"id": "bad", "content": row["bad"]}],
            "rank": {"good": 1, "bad": 2}}))
"""


@pytest.fixture
def entries():
    """The plugin's entries registered in this process, and removed after the test."""
    exec(ENTRIES, {"__name__": "plugin"})
    yield
    SCORERS.remove("constant")
    METRICS.remove("first-pair")
    FORMATS.remove("qa")


def plugin(tmp_path: Path, *args: object) -> subprocess.CompletedProcess:
    """``cheems ARGS`` in a fresh process that registered the plugin's entries first (the help lists them)."""
    script = tmp_path / "plugin.py"
    script.write_text(ENTRIES + "\nfrom cheems.cli.main import main\n\nmain()\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script), *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


def help_words(tmp_path: Path, command: str) -> str:
    """``cheems COMMAND --help`` of the plugin, as one line of words (the panels' borders and folds left out)."""
    return " ".join(plugin(tmp_path, command, "--help").stdout.replace("│", " ").split())


def bench(tmp_path: Path) -> Path:
    """Two prompts: a better response with 好 and a longer worse one, then the other way round."""
    rows = [
        {"id": "p1", "input": "问", "responses": [{"id": "a", "content": "好"}, {"id": "b", "content": "不行不行"}]},
        {"id": "p2", "input": "问", "responses": [{"id": "a", "content": "很长的回答"}, {"id": "b", "content": "好"}]},
    ]
    return write_jsonl(tmp_path / "open.jsonl", [{**r, "rank": {"a": 1, "b": 2}} for r in rows])


# ---------------------------------------------------------------- the registry itself


def test_a_registry_lists_its_entries_in_order_and_refuses_an_unknown_or_doubled_name():
    reg: Registry[int] = Registry("thing", "--thing")
    reg.add("one", 1, "the first")
    reg.register("two", help="the second")(2)
    assert list(reg) == ["one", "two"] and reg.get("two") == 2 and "one" in reg
    assert reg.help_text() == "one (the first) or two (the second)"
    with pytest.raises(InputError) as e:
        reg.get("three")
    assert str(e.value) == "--thing: unknown thing 'three' — use one of one, two"
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("one", 3, "")
    reg.remove("one")
    assert reg.names() == ("two",)


# ---------------------------------------------------------------- metrics


def test_a_registered_metric_is_computed_and_listed(tmp_path, entries):
    records = load_bench([bench(tmp_path)])
    result = evaluate_scores(records, {("p1", "a"): 1.0, ("p1", "b"): 0.0, ("p2", "a"): 0.0, ("p2", "b"): 1.0}, "s")
    report = benchmark_report("first-pair", records, result).to_dict()
    assert report["metric"] == "first-pair" and report["overall"] == 0.5
    assert METRICS.hint() == (
        "use one of cheems, rmbench, bon, pairwise, judgebench, kendall, ppe-preference, ppe-correctness, "
        "rewardbench, first-pair"
    )


def test_a_plugin_metric_runs_through_cheems_eval_and_its_help(tmp_path):
    out = tmp_path / "eval.json"
    proc = plugin(tmp_path, "eval", "--bench", bench(tmp_path), "--model", "length", "--no-cache",
                  "--metric", "first-pair", "--output-json", out)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "first pair metrics: length" in proc.stdout
    data = json.loads(out.read_text())
    assert (data["metric"], data["overall"]) == ("first-pair", 0.5)  # length: p1 wrong (the worse is longer), p2 right
    assert "first-pair (share of prompts whose first pair is right)" in help_words(tmp_path, "eval")


def test_an_unknown_metric_is_one_line_listing_them(tmp_path, monkeypatch, capsys):
    proc = run_main("eval", "--bench", bench(tmp_path), "--model", "length", "--metric", "elo",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert_user_error(proc, "--metric: unknown metric 'elo'", "use one of cheems, rmbench, bon, pairwise")


# ---------------------------------------------------------------- scorers


def test_a_registered_scorer_is_loaded_and_listed(entries):
    assert load_scorer("constant:2.5").score([("问", "好"), ("问", "不")]) == [2.5, 0.0]
    assert (
        "'constant:VALUE'" in spec_hint()
        and "'constant:VALUE' (VALUE for a response with 好, else 0)" in scorers_help()
    )


def test_a_plugin_scorer_runs_through_cheems_score_and_its_help(tmp_path):
    out = tmp_path / "scores.jsonl"
    proc = plugin(tmp_path, "score", "--bench", bench(tmp_path), "--model", "constant:3", "--no-cache", "-o", out)
    assert proc.returncode == 0, proc.stderr
    scores = {(s["prompt_id"], s["response_id"]): s["score"] for s in map(json.loads, out.read_text().splitlines())}
    assert scores == {("p1", "a"): 3.0, ("p1", "b"): 0.0, ("p2", "a"): 0.0, ("p2", "b"): 3.0}
    assert "'constant:VALUE' (VALUE for a response with 好, else 0)" in help_words(tmp_path, "score")


def test_an_unknown_scorer_is_one_line_listing_them(tmp_path, monkeypatch, capsys):
    proc = run_main("score", "--bench", bench(tmp_path), "--model", "vlm:http://localhost:8000#rm", "-o",
                    tmp_path / "s.jsonl", monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert_user_error(proc, "--model: unknown scorer 'vlm'", "use 'length', 'similarity:MODEL', 'vllm:URL#MODEL'")
    assert not (tmp_path / "s.jsonl").exists()


# ---------------------------------------------------------------- import formats


def test_a_registered_format_imports_and_is_listed(tmp_path, entries):
    source = write_jsonl(tmp_path / "qa.jsonl", [{"q": "问", "good": "好", "bad": "不好"}])
    (record,) = import_file(source, "qa").records
    assert (record.id, record.rank) == ("q1", {"good": 1, "bad": 2})
    assert FORMATS.hint().endswith("judgebench, rewardbench, ppe-preference, ppe-correctness, qa")


def test_a_plugin_format_runs_through_cheems_import_and_its_help(tmp_path):
    source = write_jsonl(tmp_path / "qa.jsonl", [{"q": "问", "good": "好", "bad": "不好"}])
    proc = plugin(tmp_path, "import", "qa", source, "-o", tmp_path / "out.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["rank"] == {"good": 1, "bad": 2}
    assert "qa ({q, good, bad} rows)" in help_words(tmp_path, "import")


def test_an_unknown_format_is_one_line_listing_them(tmp_path, monkeypatch, capsys):
    source = write_jsonl(tmp_path / "qa.jsonl", [{"q": "问", "good": "好", "bad": "不好"}])
    with pytest.raises(InputError) as e:
        import_file(source, "qa")
    assert str(e.value) == (
        f"{source}: unknown format 'qa' — use one of pairwise, ranked, ratings, official, rmbench, rmb, rewardbench2, "
        "judgebench, rewardbench, ppe-preference, ppe-correctness"
    )
    proc = run_main("import", "qa", source, "-o", tmp_path / "out.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "expected '[FORMAT] IN'", "FORMAT is one of pairwise, ranked, ratings, official, rmbench")
    assert not (tmp_path / "out.jsonl").exists()


# ---------------------------------------------------------------- the docs


def test_the_docs_name_every_registered_metric_and_scorer():
    root = Path(__file__).resolve().parents[1]
    readme, formats = (root / "README.md").read_text(), (root / "docs" / "formats.md").read_text()
    assert f"[--metric {'|'.join(METRICS)}]" in readme
    assert all(f"`--metric {name}`" in formats for name in METRICS)  # the import formats: test_docs.py
    assert all(f"`{entry.value.form}`" in readme for entry in SCORERS.entries())
