"""The ``cheems`` command end to end: through its real entry point in this process (the ``cheems_cli`` fixture);
the help and the bare command as a real subprocess, as a user runs it."""

from __future__ import annotations

import json

import pytest

from helpers import run_cheems, write_jsonl

GOOD = {
    "id": "p1",
    "input": "1+1等于几？",
    "category": ["数学", "算术"],
    "responses": [
        {"id": "r1", "content": "等于2。"},
        {"id": "r2", "content": "等于3。"},
        {"id": "r3", "content": "不知道"},
    ],
    "comparisons": [
        {"a": "r1", "b": "r2", "label": "a", "annotator": "x"},
        {"a": "r2", "b": "r3", "label": "a"},
        {"a": "r3", "b": "r1", "label": "a"},
    ],
}


def bad(**changes):
    row = json.loads(json.dumps(GOOD))
    row.update(changes)
    return row


BAD_INPUTS = {
    "invalid JSON": ('{"id": "p1", "input": ', "invalid JSON"),
    "rank names unknown response": (bad(rank={"r1": 1, "r9": 2}), "unknown response 'r9'"),
    "duplicate response ids": (
        bad(responses=[{"id": "r1", "content": "a"}, {"id": "r1", "content": "b"}], comparisons=[]),
        "duplicate response id 'r1'",
    ),
    "non-string content": (bad(responses=[{"id": "r1", "content": 3}], comparisons=[]), "responses.0.content"),
    "comparison names unknown id": (bad(comparisons=[{"a": "r1", "b": "zz", "label": "a"}]), "unknown response 'zz'"),
    "bad label": (bad(comparisons=[{"a": "r1", "b": "r2", "label": "better"}]), "comparisons.0.label"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_clear_line_with_file_and_line(tmp_path, case, cheems_cli):
    row, expected = BAD_INPUTS[case]
    path = write_jsonl(tmp_path / "in.jsonl", [GOOD | {"id": "p0"}, row])
    result = cheems_cli("validate", path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{path}:2" in lines[0] and expected in lines[0]


def test_empty_responses_are_a_prompt_pool_for_validate_and_one_line_for_resolve(tmp_path, cheems_cli):
    # a prompt pool (no responses yet) is valid input to the prompt-side commands; resolve needs responses
    path = write_jsonl(tmp_path / "in.jsonl", [GOOD | {"id": "p0"}, bad(responses=[], comparisons=[])])
    assert cheems_cli("validate", path).returncode == 0
    result = cheems_cli("resolve", path, "-o", tmp_path / "out.jsonl")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}:2" in lines[0] and "'responses' is empty" in lines[0], result.stderr
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("content,expected", [("", "file is empty"), (None, "no such file")])
def test_empty_and_missing_files(tmp_path, content, expected, cheems_cli):
    path = tmp_path / "in.jsonl"
    if content is not None:
        path.write_text(content)
    result = cheems_cli("resolve", path, "-o", tmp_path / "out.jsonl")
    assert result.returncode == 2 and expected in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_skip_invalid_lists_every_skipped_line_and_keeps_the_rest(tmp_path, cheems_cli):
    rows = [GOOD, BAD_INPUTS["invalid JSON"][0], bad(id="p2", rank={"r9": 1}), GOOD | {"id": "p3"}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    result = cheems_cli("resolve", src, "-o", out, "--skip-invalid")
    assert result.returncode == 0, result.stderr
    assert f"{src}:2" in result.stderr and f"{src}:3" in result.stderr and "2 line(s) skipped" in result.stderr
    assert [json.loads(l)["id"] for l in out.read_text().splitlines()] == ["p1", "p3"]


def test_resolve_keeps_fields_adds_rank_and_writes_stats(tmp_path, cheems_cli):
    src = write_jsonl(tmp_path / "in.jsonl", [GOOD | {"note": "kept"}])
    out, stats = tmp_path / "out.jsonl", tmp_path / "stats.json"
    result = cheems_cli("resolve", src, "-o", out, "--stats-json", stats)
    assert result.returncode == 0, result.stderr
    rec = json.loads(out.read_text())
    assert rec["note"] == "kept" and rec["comparisons"][0]["annotator"] == "x" and rec["category"] == ["数学", "算术"]
    assert rec["rank"] == {"r1": 1, "r2": 1, "r3": 1}  # r1>r2>r3>r1 is one cycle
    assert json.loads(stats.read_text()) == {"records": 1, "comparisons": 3, "conflicts": 3, "conflict_ratio": 1.0}


def test_score_then_eval_with_scores_and_with_model_agree(tmp_path, cheems_cli):
    ranked = bad(comparisons=[], rank={"r1": 1, "r2": 2, "r3": 3})
    bench = write_jsonl(tmp_path / "open.jsonl", [ranked])
    scores, j1, j2 = tmp_path / "s.jsonl", tmp_path / "a.json", tmp_path / "b.json"
    assert cheems_cli("score", "--model", "length", "--bench", bench, "-o", scores, "--no-cache").returncode == 0
    rows = [json.loads(l) for l in scores.read_text().splitlines()]
    assert {(r["response_id"], r["score"]) for r in rows} == {("r1", 4.0), ("r2", 4.0), ("r3", 3.0)}  # characters
    r1 = cheems_cli("eval", "--bench", bench, "--scores", scores, "--output-json", j1)
    r2 = cheems_cli(
        "eval", "--bench", bench, "--model", "length", "--output-json", j2, "--no-cache", "--report", tmp_path / "rep"
    )
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    out, other = json.loads(j1.read_text()), json.loads(j2.read_text())
    assert (out.pop("scorer"), other.pop("scorer")) == (str(scores), "length")
    checks = [[c for c in data.pop("checks") if c["name"] != "truncation"] for data in (out, other)]
    assert out == other and checks[0] == checks[1]  # truncation alone says why it skipped: a file, or length
    cat = out["subsets"]["open"]["categories"]["数学"]
    assert cat["accuracy"] == pytest.approx(2 / 3) and cat["exact_match"] == 0.0  # r1 ~ r2 tie in score: wrong
    assert "overall" in r1.stdout and (tmp_path / "rep" / "report.md").exists()


def test_eval_needs_exactly_one_score_source(tmp_path, cheems_cli):
    bench = write_jsonl(tmp_path / "open.jsonl", [GOOD])
    result = cheems_cli("eval", "--bench", bench)
    assert result.returncode == 2 and "exactly one of --scores, --model or --judge-model" in result.stderr


def test_eval_reports_missing_scores(tmp_path, cheems_cli):
    bench = write_jsonl(tmp_path / "open.jsonl", [bad(comparisons=[], rank={"r1": 1, "r2": 2, "r3": 3})])
    scores = write_jsonl(tmp_path / "s.jsonl", [{"prompt_id": "p1", "response_id": "r1", "score": 1.0}])
    result = cheems_cli("eval", "--bench", bench, "--scores", scores)
    assert result.returncode == 2 and "no score for prompt 'p1'" in result.stderr and "Traceback" not in result.stderr


def test_official_pairwise_rows_are_read_unchanged(tmp_path, cheems_cli):
    rows = [
        {"input": "问", "answer1": "好", "answer2": "差", "preference": 1},
        {"input": "问", "answer1": "差", "answer2": "中", "preference": "2"},
    ]
    src = write_jsonl(tmp_path / "official.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert cheems_cli("resolve", src, "-o", out).returncode == 0
    rec = json.loads(out.read_text())
    by_text = {r["content"]: rec["rank"][r["id"]] for r in rec["responses"]}
    assert by_text == {"好": 1, "中": 1, "差": 2}


def test_demo_without_training_runs_offline(tmp_path, cheems_cli):
    result = cheems_cli("demo", "-o", tmp_path / "demo", "--no-train", "-m", "length")
    assert result.returncode == 0, result.stderr
    assert "overall" in result.stdout
    metrics = json.loads((tmp_path / "demo" / "metrics.length.json").read_text())
    assert set(metrics["subsets"]) == {"open", "human"}
    stats = json.loads((tmp_path / "demo" / "bench" / "open.conflicts.json").read_text())
    assert 0 < stats["conflict_ratio"] < 0.5


@pytest.mark.parametrize(
    "args, contains",
    [
        (["split", "x.jsonl", "--train", "a.jsonl", "--test", "b.jsonl", "--seed", "abc"], "'--seed'"),
        (["nosuch"], "No such command 'nosuch'"),
        (["split", "x.jsonl", "--bogus"], "No such option: --bogus"),
        (["eval", "--bench"], "'--bench' requires an argument"),
        (["curate", "distant", "x.jsonl", "-o", "y.jsonl", "--margin", "abc"], "'--margin'"),
    ],
)
def test_usage_errors_are_one_line_not_a_boxed_help(tmp_path, args, contains, cheems_cli):
    from helpers import assert_user_error

    line = assert_user_error(cheems_cli(*args, cwd=tmp_path), contains)
    assert "--help" in line
    assert list(tmp_path.iterdir()) == []


def test_help_still_exits_0_and_no_arguments_shows_help():
    assert run_cheems("--help").returncode == 0
    bare = run_cheems()
    assert bare.returncode == 2 and "Usage" in bare.stdout + bare.stderr and "Traceback" not in bare.stderr
