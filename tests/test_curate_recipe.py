"""``cheems curate run``: the recipe end to end, merging, the LLM-judge stage, and bad recipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cheems.cli.main import app
from cheems.curate.recipe import load_recipe, run_recipe
from cheems.curate.subsets import merge_subsets
from cheems.data.io import write_records, write_scores
from cheems.data.schema import Record
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.ranking.pairs import training_pairs
from cheems.workflows.curation import llm_judgements, rm_scores
from fault_server import FakeJudgeServer

GOOD = "深度学习是机器学习的一个分支，它使用多层神经网络从数据中自动学习特征表示。"


def judged(pid: str, contents: list[str], comparisons: list[tuple[str, str, str]]) -> Record:
    return Record.model_validate(
        {
            "id": pid,
            "input": f"问题{pid}",
            "category": ["知识"],
            "responses": [{"id": f"r{i}", "content": c} for i, c in enumerate(contents, start=1)],
            "comparisons": [
                {"a": a, "b": b, "label": lab, "source": "judge", "annotator": "gpt-4o"} for a, b, lab in comparisons
            ],
        }
    )


def human(pid: str) -> Record:
    return Record.model_validate(
        {
            "id": pid,
            "input": f"问题{pid}",
            "category": ["知识"],
            "responses": [{"id": "h1", "content": GOOD}, {"id": "h2", "content": GOOD + "补充。"}],
            "comparisons": [{"a": "h2", "b": "h1", "label": "a", "source": "human"}],
            "rank": {"h2": 1, "h1": 2},
        }
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A judged pool, a human subset and RM scores, as files beside a recipe."""
    pool = [
        # p1: r3 is empty (filtered); the judge's r2>r1 is what the RM says too
        judged("p1", [GOOD, GOOD + "更多。", " "], [("r2", "r1", "a"), ("r1", "r3", "a")]),
        # p2: the judge says r1>r2, the RM disagrees: dropped, the record has nothing left
        judged("p2", [GOOD + "长一些的回答。", GOOD], [("r1", "r2", "a")]),
        # p3: three responses, chosen shorter twice, agreeing with the RM
        judged(
            "p3", [GOOD, GOOD + "啰嗦", GOOD + "更加啰嗦"], [("r1", "r2", "a"), ("r1", "r3", "a"), ("r2", "r3", "tie")]
        ),
        # p4 (equal lengths: debias keeps it) is also in the human subset: the human record wins the merge
        judged("p4", [GOOD + "。", GOOD + "！"], [("r1", "r2", "a")]),
    ]
    write_records(tmp_path / "data" / "pool.jsonl", pool)
    write_records(tmp_path / "data" / "human.jsonl", [human("h-1"), human("p4")])
    scores = {
        ("p1", "r1"): 0.0,
        ("p1", "r2"): 1.0,
        ("p2", "r1"): 0.0,
        ("p2", "r2"): 1.0,
        ("p3", "r1"): 2.0,
        ("p3", "r2"): 1.0,
        ("p3", "r3"): 0.0,
        ("p4", "r1"): 1.0,
        ("p4", "r2"): 0.0,
    }
    write_scores(tmp_path / "data" / "scores.jsonl", scores)
    (tmp_path / "recipe.yaml").write_text(
        "output_dir: out\n"
        "human: data/human.jsonl\n"
        "judge_input: data/pool.jsonl\n"
        "filter: {max_length_ratio: 3.0}\n"
        "distant: {scores: data/scores.jsonl, margin: 0.0}\n"
        "debias: {seed: 0}\n",
        encoding="utf-8",
    )
    return tmp_path


def test_recipe_end_to_end(project: Path):
    summary = run_recipe(load_recipe(project / "recipe.yaml"))
    out = project / "out"
    for name in (
        "01-filtered.jsonl",
        "03-distant.jsonl",
        "04-debiased.jsonl",
        "final.jsonl",
        "summary.json",
        "summary.md",
    ):
        assert (out / name).is_file(), name
    assert not (out / "02-judged.jsonl").exists() and summary.skipped == ["judge"]
    assert [s.name for s in summary.stages] == ["input", "filter", "distant", "debias", "human", "final"]

    filtered = read_records(out / "01-filtered.jsonl").records
    assert [x.id for x in filtered[0].responses] == ["r1", "r2"] and len(filtered[0].comparisons) == 1
    assert summary.stage("filter").report["dropped_by_reason"]["empty"] == 1

    distant = summary.stage("distant").report
    assert distant["by_source"]["judge"] == {"before": 6, "kept": 4, "dropped": 2}  # p2's r1>r2 and p3's tie
    assert distant["records_with_no_comparison_left"] == 1 and distant["conflict_ratio_after"] == 0.0
    assert [r.id for r in read_records(out / "03-distant.jsonl").records] == ["p1", "p3", "p4"]

    # pairs: p1 r2>r1 (longer), p3 r1>r2 and r1>r3 (shorter), p4 r1>r2 (equal length)
    debias = summary.stage("debias").report
    assert debias["pairs_before"] == {"chosen_longer": 1, "chosen_shorter": 2, "equal_length": 1}
    assert debias["pairs_after"] == {"chosen_longer": 1, "chosen_shorter": 1, "equal_length": 1}
    debiased = read_records(out / "04-debiased.jsonl").records
    assert [r.id for r in debiased] == ["p1", "p3", "p4"]
    assert len(debiased[1].comparisons) == 1 and debiased[1].comparisons[0].a == "r1"

    final = read_records(out / "final.jsonl").records
    assert [r.id for r in final] == ["h-1", "p4", "p1", "p3"]
    assert final[1].responses[0].id == "h1"  # p4 is the human record
    assert summary.stage("final").report["overlap"] == 1

    data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    stats = {s["name"]: s["stats"] for s in data["stages"]}
    assert stats["input"]["prompts"] == 4 and stats["human"]["prompts"] == 2
    assert stats["final"]["prompts"] == len(final)
    assert {s["name"]: s["conflicts"]["conflict_ratio"] for s in data["stages"]}["distant"] == 0.0
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert "| distant | 03-distant.jsonl | 3 |" in md and "conflict ratio" in md


def test_recipe_runs_from_the_cli(project: Path):
    result = CliRunner().invoke(app, ["curate", "run", str(project / "recipe.yaml")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "curation summary" in result.output and "skipped: judge" in result.output
    assert (project / "out" / "final.jsonl").is_file()


def test_merge_keeps_human_records_and_reports_overlap():
    merged, report = merge_subsets(
        [human("a"), human("b")], [judged("b", [GOOD, GOOD + "。"], []), judged("c", [GOOD, GOOD + "。"], [])]
    )
    assert [r.id for r in merged] == ["a", "b", "c"] and merged[1].comparisons[0].source == "human"
    assert report.to_dict() == {
        "human": 2,
        "judge_kept": 1,
        "judge": 2,
        "overlap": 1,
        "overlap_examples": ["b"],
        "total": 3,
    }


def test_recipe_with_the_llm_judge_and_an_rm_model(tmp_path: Path):
    """The judge stage through the real client over loopback HTTP; distant supervision scored by a real scorer."""
    pool = [
        Record.model_validate(
            {
                "id": f"q{k}",
                "input": f"问题{k}",
                "category": ["知识"],
                "responses": [{"id": f"r{i}", "content": GOOD + "好" * i} for i in range(1, 4)],
            }
        )
        for k in range(2)
    ]
    write_records(tmp_path / "pool.jsonl", pool)
    with FakeJudgeServer() as server:  # prefers the longer answer
        (tmp_path / "recipe.yaml").write_text(
            "output_dir: out\njudge_input: pool.jsonl\n"
            "judge: "
            f"{{judge_model: fake-judge, base_url: '{server.url}', api_key: k, cache: judge.sqlite, concurrency: 2}}\n"
            "distant: {model: length}\n",
            encoding="utf-8",
        )
        recipe = load_recipe(tmp_path / "recipe.yaml")
        assert recipe.judge.cache == str(tmp_path / "judge.sqlite")  # relative to the recipe
        summary = run_recipe(recipe, judge=lambda r, s: llm_judgements(r, s, print), score=rm_scores)
    assert summary.stage("judge").report == {"comparisons_by_source": {"judge": 6}}
    assert summary.stage("distant").report["by_source"]["judge"] == {
        "before": 6,
        "kept": 6,
        "dropped": 0,
    }  # length agrees
    assert (tmp_path / "out" / "02-judged.jsonl").is_file() and (tmp_path / "out" / "scores.jsonl").is_file()
    final = read_records(tmp_path / "out" / "final.jsonl").records
    assert training_pairs(final[0]) == [("r2", "r1"), ("r3", "r1"), ("r3", "r2")]
    assert final[0].rank == {"r3": 1, "r2": 2, "r1": 3}


def test_judge_stage_needs_a_judge_and_unjudged_input_needs_a_judge_stage(project: Path):
    recipe = load_recipe(project / "recipe.yaml")
    recipe.judge = {"judge_model": "x"}
    with pytest.raises(InputError, match="no judge was given"):
        run_recipe(recipe)
    write_records(
        project / "data" / "pool.jsonl",
        [
            Record.model_validate(
                {
                    "id": "q",
                    "input": "问题",
                    "responses": [{"id": "r1", "content": GOOD}, {"id": "r2", "content": GOOD}],
                }
            )
        ],
    )
    with pytest.raises(InputError, match="no comparisons and the recipe has no 'judge' stage"):
        run_recipe(load_recipe(project / "recipe.yaml"))


BAD_RECIPES = {
    "unknown top-level key": (
        "output_dir: out\njudge_input: data/pool.jsonl\nfiltr: {}\n",
        ":3: field 'filtr': unknown key 'filtr'",
    ),
    "unknown nested key": (
        "output_dir: out\njudge_input: data/pool.jsonl\nfilter:\n  max_ratio: 2\n",
        ":4: field 'filter.max_ratio': unknown key 'max_ratio' — known keys: max_chars",
    ),
    "missing input file": ("output_dir: out\njudge_input: data/nope.jsonl\n", ":2: field 'judge_input': no such file"),
    "missing scores file": (
        "output_dir: out\njudge_input: data/pool.jsonl\ndistant:\n  scores: nope.jsonl\n",
        ":4: field 'distant.scores': no such file",
    ),
    "missing key": ("judge_input: data/pool.jsonl\n", "field 'output_dir': is missing"),
    "scores and model": (
        "output_dir: out\njudge_input: data/pool.jsonl\ndistant: {scores: data/scores.jsonl, model: length}\n",
        ":3: field 'distant': give exactly one of 'scores'",
    ),
    "negative margin": (
        "output_dir: out\njudge_input: data/pool.jsonl\ndistant: {scores: data/scores.jsonl, margin: -1}\n",
        ":3: field 'distant.margin'",
    ),
    "tokens without a tokenizer": (
        "output_dir: out\njudge_input: data/pool.jsonl\ndebias:\n  unit: tokens\n",
        ":4: field 'debias.unit': length in tokens needs a tokenizer — add 'tokenizer: PATH'",
    ),
    "bad judge key": (
        "output_dir: out\njudge_input: data/pool.jsonl\njudge:\n  judge_model: m\n  base_url: "
        "http://x/v1\n  concurency: 2\n",
        ":6: field 'judge.concurency': unknown key 'concurency'",
    ),
    "invalid YAML": ("output_dir: out\njudge_input: [\n", "invalid YAML"),
    "not a mapping": ("- a\n- b\n", "a recipe must be a YAML mapping"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECIPES))
def test_bad_recipes_are_located_errors(project: Path, case: str):
    text, expected = BAD_RECIPES[case]
    path = project / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_recipe(path)
    assert str(e.value).startswith(str(path)) and expected in str(e.value), str(e.value)


def test_bad_recipe_is_one_line_and_exit_2(project: Path):
    path = project / "bad.yaml"
    path.write_text("output_dir: out\njudge_input: data/pool.jsonl\ndebias: {seed: 0, sed: 1}\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "cheems", "curate", "run", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}:3: field 'debias.sed': unknown key 'sed'" in lines[0]


def test_shipped_example_recipe_is_valid(tmp_path):
    """configs/curate_recipe.yaml parses, once the files it names exist beside it."""
    import shutil

    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "configs").mkdir()
    shutil.copy(repo / "configs" / "curate_recipe.yaml", tmp_path / "configs" / "curate_recipe.yaml")
    (tmp_path / "data").mkdir()
    for name in ("human.jsonl", "pool.jsonl"):
        (tmp_path / "data" / name).write_text("", encoding="utf-8")
    recipe = load_recipe(tmp_path / "configs" / "curate_recipe.yaml")
    assert recipe.filter is not None and recipe.distant.model and recipe.debias.seed == 0
    assert recipe.judge.judge_model and recipe.output_dir.resolve() == (tmp_path / "curated").resolve()
