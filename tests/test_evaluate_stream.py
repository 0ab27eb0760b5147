"""``cheems score`` and ``cheems eval --scores`` a chunk at a time (on a pool of processes) write exactly what the
in-memory functions (``load_bench``, ``score_bench``, ``read_scores``, ``evaluate``) give."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cheems.data.io import write_scores
from cheems.evaluate import bench as bench_module
from cheems.evaluate import load_bench, score_bench
from cheems.models import load_scorer
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
    """``cheems score`` writes the bytes of ``write_scores(score_bench(load_bench(...)))``."""
    paths = _bench(tmp_path, open_rows, hidden_rows)
    whole = tmp_path / "whole.jsonl"
    write_scores(whole, score_bench(load_bench(paths, require_pairs=False), load_scorer("length"), None))
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
    assert result.returncode == 2 and f"prompt id 'p' is also in {first}" in result.stderr
    assert not out.exists()
    unranked = write_jsonl(tmp_path / "u.jsonl", [{**row, "rank": {"a": 1}}])
    result = run_main(
        "score", "--model", "length", "--no-cache", "--bench", unranked, "-o", out,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert result.returncode == 0 and "rank leaves out 1 of 2 responses (b)" in result.stderr
    assert [json.loads(line)["score"] for line in out.read_text().splitlines()] == [1.0, 1.0]
