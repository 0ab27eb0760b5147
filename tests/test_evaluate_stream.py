"""``cheems score`` and ``cheems eval --scores`` a chunk at a time (on a pool of processes) write exactly what the
in-memory functions (``load_bench``, ``score``, ``read_scores``, ``evaluate``) give."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cheems.data.io import read_scores, write_json, write_scores
from cheems.errors import InputError
from cheems.evaluate import bench as bench_module
from cheems.evaluate import evaluate_scores, load_bench, score
from cheems.evaluate.bench import add_intervals
from cheems.evaluate.checks import CheckContext, run_checks
from cheems.evaluate.details import write_details
from cheems.models import load_scorer
from cheems.runtime import content_hash
from helpers import run_main, write_jsonl
from test_data_stream import pooled  # noqa: F401 - the fixture: every file through 2 workers, a few lines a chunk

CATEGORIES = ["数学", "写作", "代码"]


@st.composite
def bench_rows(draw: st.DrawFn, prefix: str) -> list[dict]:
    """Records with ranks, with comparisons to resolve, or with neither; responses of random lengths."""
    rows = []
    for i in range(draw(st.integers(1, 12))):
        n = draw(st.integers(2, 5))
        rids = [f"r{j}" for j in range(n)]
        obj = {
            "id": f"{prefix}{i}",
            "input": f"问题{i}",
            "category": [draw(st.sampled_from(CATEGORIES))],
            "responses": [{"id": r, "content": "答" * draw(st.integers(1, 9))} for r in rids],
        }
        kind = draw(st.sampled_from(["rank", "comparisons", "none"]))
        if kind == "rank":
            obj["rank"] = {r: draw(st.integers(1, 3)) for r in rids}
        elif kind == "comparisons":
            pairs = [(a, b) for k, a in enumerate(rids) for b in rids[k + 1 :]]
            obj["comparisons"] = [{"a": a, "b": b, "label": draw(st.sampled_from(["a", "b", "tie"]))} for a, b in pairs]
        rows.append(obj)
    return rows


def _fixed_rows(prefix: str, n: int) -> list[dict]:
    """Records of 3 responses: ranked, with comparisons, or neither (every third)."""
    rows = []
    for i in range(n):
        responses = [{"id": f"r{j}", "content": "答" * (1 + (i * j) % 5)} for j in range(3)]
        row = {"id": f"{prefix}{i}", "input": f"问题{i}", "category": [CATEGORIES[i % 3]], "responses": responses}
        if i % 3 == 0:
            row["rank"] = {"r0": 1, "r1": 1 + i % 2, "r2": 3}
        elif i % 3 == 1:
            row["comparisons"] = [{"a": "r0", "b": "r1", "label": "ab"[i % 2]}, {"a": "r1", "b": "r2", "label": "tie"}]
        rows.append(row)
    return rows


def _bench(tmp_path: Path, open_rows: list[dict], hidden_rows: list[dict]) -> list[Path]:
    return [write_jsonl(tmp_path / "open.jsonl", open_rows), write_jsonl(tmp_path / "hidden.jsonl", hidden_rows)]


def _score(tmp_path: Path, open_rows: list[dict], hidden_rows: list[dict], workers: int, monkeypatch, capsys) -> None:
    """``cheems score`` writes the bytes of ``write_scores(score(load_bench(...)))``."""
    paths = _bench(tmp_path, open_rows, hidden_rows)
    whole = tmp_path / "whole.jsonl"
    write_scores(whole, score(load_bench(paths, require_pairs=False), load_scorer("length")))
    out = tmp_path / "s.jsonl"
    args = ["score", "--model", "length", "--no-cache", "--workers", workers, "-o", out]
    result = run_main(*args, *[x for p in paths for x in ("--bench", p)], monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == whole.read_bytes()
    n = sum(len(r["responses"]) for r in open_rows + hidden_rows)
    assert len(out.read_text(encoding="utf-8").splitlines()) == n
    assert f"wrote {n} scores" in result.stdout


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(open_rows=bench_rows("o"), hidden_rows=bench_rows("h"), chunk=st.integers(1, 7))
def test_score_in_chunks_writes_what_scoring_the_whole_bench_writes(
    open_rows, hidden_rows, chunk, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(bench_module, "SCORE_CHUNK", chunk)
    _score(tmp_path, open_rows, hidden_rows, 1, monkeypatch, capsys)


def test_score_on_two_workers_writes_what_one_process_writes(tmp_path, pooled, monkeypatch, capsys) -> None:  # noqa: F811
    monkeypatch.setattr(bench_module, "SCORE_CHUNK", 3)
    _score(tmp_path, _fixed_rows("o", 20), _fixed_rows("h", 7), 2, monkeypatch, capsys)


def test_score_checks_the_bench_as_load_bench_does(tmp_path, monkeypatch, capsys) -> None:
    row = {"id": "p", "input": "问", "responses": [{"id": "a", "content": "一"}, {"id": "b", "content": "二"}]}
    first = write_jsonl(tmp_path / "one.jsonl", [row])
    second = write_jsonl(tmp_path / "two.jsonl", [row])
    out = tmp_path / "s.jsonl"
    result = run_main(
        "score", "--model", "length", "--no-cache", "--bench", first, "--bench", second, "-o", out,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert result.returncode == 2 and f"duplicate prompt id 'p' (first at {first}:1)" in result.stderr
    assert not out.exists()
    unranked = write_jsonl(tmp_path / "u.jsonl", [{**row, "rank": {"a": 1}}])
    result = run_main(
        "score", "--model", "length", "--no-cache", "--bench", unranked, "-o", out,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert result.returncode == 0 and "rank leaves out 1 of 2 responses (b)" in result.stderr
    assert [json.loads(line)["score"] for line in out.read_text().splitlines()] == [1.0, 1.0]


def _id_less_benches(tmp_path: Path) -> list[Path]:
    """Two official-format bench files without ids that share a prompt: records with annotations, and pairwise
    rows (grouped by their text), each prompt judged the other way round in the second file."""

    def record(better: str, worse: str) -> dict:
        responses = [{"id": "x", "content": better}, {"id": "y", "content": worse}]
        return {"input": "如何保持良好的睡眠？", "responses": responses, "annotations": [["x", "y", 1]]}

    def pair(better: str, worse: str) -> dict:
        return {"input": "用一句话形容大海。", "answer1": better, "answer2": worse, "preference": 1}

    return [
        write_jsonl(
            tmp_path / "a.jsonl", [record("规律作息，睡前少看手机。", "熬夜。"), pair("大海像蓝色绸缎。", "海。")]
        ),
        write_jsonl(
            tmp_path / "b.jsonl", [record("多睡。", "规律作息，早睡早起。"), pair("海很大。", "大海无边无际。")]
        ),
    ]


def test_id_less_prompt_in_two_bench_files_is_a_prompt_of_each(tmp_path, monkeypatch, capsys) -> None:
    paths = _id_less_benches(tmp_path)
    out = tmp_path / "m.json"
    args = ["eval", "--model", "length", "--output-json", out, "--resamples", "50"]
    result = run_main(*args, "--bench", paths[0], "--bench", paths[1], monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0, result.stderr
    subsets = json.loads(out.read_text())["subsets"]
    assert {name: (subsets[name]["accuracy"], subsets[name]["n_prompts"]) for name in "ab"} == {
        "a": (1.0, 2),
        "b": (0.0, 2),
    }
    bench = load_bench(paths)  # the in-memory reader names them the same way
    assert [r.id.split("/")[0] for records in bench.values() for r in records] == ["a", "a", "b", "b"]
    assert {r.id.split("/")[1] for r in bench["a"]} == {r.id.split("/")[1] for r in bench["b"]}


def test_scores_of_id_less_benches_evaluate_as_the_model_does(tmp_path, monkeypatch, capsys) -> None:
    paths = _id_less_benches(tmp_path)
    scores, by_scores, by_model = tmp_path / "s.jsonl", tmp_path / "s.json", tmp_path / "m.json"
    benches = ["--bench", paths[0], "--bench", paths[1]]
    result = run_main(
        "score", "--model", "length", "--no-cache", *benches, "-o", scores, monkeypatch=monkeypatch, capsys=capsys
    )
    assert result.returncode == 0, result.stderr
    assert len({json.loads(line)["prompt_id"] for line in scores.read_text().splitlines()}) == 4
    for by, out in ((["--scores", scores], by_scores), (["--model", "length"], by_model)):
        args = ["eval", *by, *benches, "--output-json", out, "--resamples", "50"]
        result = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
        assert result.returncode == 0 and "match no response" not in result.stderr, result.stderr
    assert json.loads(by_scores.read_text())["subsets"] == json.loads(by_model.read_text())["subsets"]


def _in_memory_eval(paths: list[Path], scores: Path, tmp_path: Path) -> tuple[bytes, bytes] | str:
    """``--output-json`` and ``--details`` as the in-memory functions write them, or the error message."""
    try:
        bench = load_bench(paths)
        result = add_intervals(evaluate_scores(bench, read_scores(scores), str(scores)), 50, 3)
        result.checks = run_checks(CheckContext(result, records=bench))  # the same from the bench read again
    except InputError as e:
        return str(e)
    fingerprint = content_hash(
        [
            [name, r.id, r.main_category, r.ranked_pairs(), [[x.id, x.content] for x in r.responses]]
            for name, records in sorted(bench.items())
            for r in records
        ]
    )  # bench_fingerprint's definition, computed here the plain way
    write_json(tmp_path / "m.json", result.to_dict())
    write_details(tmp_path / "d.jsonl", result.outcomes, result.scorer, fingerprint)
    return (tmp_path / "m.json").read_bytes(), (tmp_path / "d.jsonl").read_bytes()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    open_rows=bench_rows("o"),
    hidden_rows=bench_rows("h"),
    drop=st.integers(0, 40),
    extra=st.booleans(),
    repeat=st.integers(0, 40),
    seed=st.integers(0, 10**6),
)
def test_eval_scores_in_chunks_writes_what_the_in_memory_evaluation_writes(
    open_rows, hidden_rows, drop, extra, repeat, seed, tmp_path, monkeypatch, capsys
) -> None:
    """Random scores, maybe one missing, one repeated, one of no bench response: the same files or the same error."""
    paths = _bench(tmp_path, open_rows, hidden_rows)
    rng = random.Random(seed)
    rows = [
        {"prompt_id": r["id"], "response_id": x["id"], "score": rng.choice([0, 1, 2, 0.5, -1.25])}
        for r in open_rows + hidden_rows
        for x in r["responses"]
    ]
    if drop < len(rows):
        del rows[drop]
    if repeat < len(rows):
        rows.insert(rng.randrange(len(rows) + 1), {**rows[repeat], "score": 9})
    if extra:
        rows.insert(rng.randrange(len(rows) + 1), {"prompt_id": "elsewhere", "response_id": "r0", "score": 1})
    scores = write_jsonl(tmp_path / "s.jsonl", rows)
    expected = _in_memory_eval(paths, scores, tmp_path)
    out, details = tmp_path / "e.json", tmp_path / "e.jsonl"
    args = ["eval", "--scores", scores, "--output-json", out, "--details", details, "--resamples", "50"]
    args += ["--bootstrap-seed", "3", "--workers", "1", *[x for p in paths for x in ("--bench", p)]]
    result = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    if isinstance(expected, str):
        try:  # with a bad bench AND a bad scores file, the scores file's error may come first (it is read first)
            read_scores(scores)
            either = [expected]
        except InputError as e:
            either = [expected, str(e)]
        assert result.returncode == 2 and any(m in result.stderr for m in either), (either, result.stderr)
        return
    assert result.returncode == 0, result.stderr
    assert (out.read_bytes(), details.read_bytes()) == expected


def test_eval_scores_on_two_workers_writes_what_one_process_writes(tmp_path, pooled, monkeypatch, capsys) -> None:  # noqa: F811
    paths = _bench(tmp_path, _fixed_rows("o", 20), _fixed_rows("h", 7))
    rows = [
        {"prompt_id": r["id"], "response_id": x["id"], "score": (i * 7919) % 13 / 4}
        for r in _fixed_rows("o", 20) + _fixed_rows("h", 7)
        for i, x in enumerate(r["responses"])
    ]
    scores = write_jsonl(tmp_path / "s.jsonl", rows)
    expected = _in_memory_eval(paths, scores, tmp_path)
    out, details, report = tmp_path / "e.json", tmp_path / "e.jsonl", tmp_path / "report"
    args = ["eval", "--scores", scores, "--output-json", out, "--details", details, "--resamples", "50"]
    args += ["--bootstrap-seed", "3", "--workers", "2", "--report", report, *[x for p in paths for x in ("--bench", p)]]
    result = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert result.returncode == 0, result.stderr
    assert (out.read_bytes(), details.read_bytes()) == expected
    assert json.loads((report / "report.json").read_text()) == json.loads(expected[0])


def test_one_evaluation_step_over_files_and_over_lists(tmp_path) -> None:
    """``evaluate_bench`` (with ``bench_prompt`` per record) gives the same report, fingerprint and warnings over
    the bench files streamed as over their records in memory; ``score_responses`` the same scores in chunks of
    one response as in one call."""
    from cheems.data.stream import Records
    from cheems.evaluate.bench import ScoreMap, evaluate_bench, score_responses, stream_bench
    from cheems.evaluate.details import bench_fingerprint

    paths = _bench(tmp_path, _fixed_rows("o", 9), _fixed_rows("h", 4))
    bench = load_bench(paths)
    records = [r for subset in bench.values() for r in subset]
    scorer = load_scorer("length")
    scores = dict(score_responses(records, scorer, None, chunk=None))
    assert dict(score_responses(records, scorer, None, chunk=1)) == scores
    lists = [(name, Records(subset)) for name, subset in bench.items()]
    streamed = evaluate_bench(stream_bench(paths, workers=1), ScoreMap(scores), "length", fingerprint=True)
    in_memory = evaluate_bench(lists, ScoreMap(scores), "length", fingerprint=True)
    assert streamed[0].to_dict() == in_memory[0].to_dict() == evaluate_scores(bench, scores, "length").to_dict()
    assert streamed[1] == in_memory[1] == bench_fingerprint(bench)
    assert [e.message for e in streamed[2]] == [e.message for e in in_memory[2]]
