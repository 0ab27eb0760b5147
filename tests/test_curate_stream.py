"""Each curation step over a file (``cheems curate filter|debias|distant``, 2 worker processes) writes exactly
what the same step gives over a list, byte for byte, with the same report; ``curate run``, streaming each
stage file, writes what the steps chained over lists give; the compact scores table fails as read_scores does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cheems.cli.main import app
from cheems.curate.debias import length_debias
from cheems.curate.distant import distant_supervision
from cheems.curate.filters import FilterConfig, filter_records
from cheems.curate.recipe import load_recipe, run_recipe
from cheems.curate.subsets import merge_subsets
from cheems.data import stream
from cheems.data.io import read_scores, write_records
from cheems.data.keytable import read_score_table
from cheems.data.stream import read_records
from cheems.errors import InputError

TEXTS = [
    "",
    "   ",
    "这是一个正常的中文回答。",
    "回答" * 30 + "。",
    "This answer is written in English only, with many words and no Chinese at all, " * 3,
    "重复的一行内容在这里出现\n" * 8,
    "这个回答写到一半就停了" * 25 + "因为",
    "```python\nprint(1)\n",
    "好" * 1200,
    "短",
]
SETTINGS = settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file goes through 2 worker processes, in chunks of a few lines."""
    monkeypatch.setattr(stream, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 300)


@st.composite
def records(draw: st.DrawFn) -> list[dict]:
    """Records with responses that trip each filter, comparisons of several sources, ranks or none."""
    out = []
    for i in range(draw(st.integers(1, 20))):
        rids = [f"r{j}" for j in range(draw(st.integers(2, 5)))]
        responses = [{"id": r, "content": draw(st.sampled_from(TEXTS)) + r} for r in rids]
        pairs = [(a, b) for k, a in enumerate(rids) for b in rids[k + 1 :]]
        chosen = draw(st.lists(st.sampled_from(pairs), max_size=6))
        obj = {
            "id": f"p{i}",
            "input": draw(st.sampled_from(["问题", "请翻译成英文", "What is 1+1?"])),
            "responses": responses,
        }
        obj["comparisons"] = [
            {"a": a, "b": b, "label": draw(st.sampled_from(["a", "b", "tie"]))}
            | ({"source": s} if (s := draw(st.sampled_from(["judge", "human", None]))) else {})
            for a, b in chosen
        ]
        if not chosen or draw(st.booleans()):
            obj["rank"] = {r: draw(st.integers(1, 3)) for r in rids}
        out.append(obj)
    return out


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(tmp: Path, *args: str) -> tuple[bytes, dict]:
    out, report = tmp / "out.jsonl", tmp / "report.json"
    for p in (out, report):
        p.unlink(missing_ok=True)
    result = CliRunner().invoke(app, ["curate", *args, "-o", str(out), "--report-json", str(report), "--workers", "2"])
    assert result.exit_code == 0, result.output
    return out.read_bytes(), json.loads(report.read_text(encoding="utf-8"))


def _expected(tmp: Path, records: list, report: dict) -> tuple[bytes, dict]:
    write_records(tmp / "expected.jsonl", records)
    return (tmp / "expected.jsonl").read_bytes(), json.loads(json.dumps(report))


@SETTINGS
@given(rows=records())
def test_filter_streamed_is_the_list_function(rows, tmp_path, pooled) -> None:
    source = _write(tmp_path / "in.jsonl", rows)
    kept, report = filter_records(read_records(source).records)
    assert _run(tmp_path, "filter", str(source)) == _expected(tmp_path, kept, report.to_dict())


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=records(), seeds=st.lists(st.integers(0, 2**32), min_size=2, max_size=2, unique=True))
def test_debias_two_passes_are_the_one_pass_function(rows, seeds, tmp_path, pooled) -> None:
    source = _write(tmp_path / "in.jsonl", rows)
    for seed in seeds:
        kept, report = length_debias(read_records(source).records, seed=seed)
        got = _run(tmp_path, "debias", str(source), "--seed", str(seed))
        assert got == _expected(tmp_path, kept, report.to_dict())


@SETTINGS
@given(rows=records(), data=st.data())
def test_distant_streamed_is_the_list_function(rows, data, tmp_path, pooled) -> None:
    source = _write(tmp_path / "in.jsonl", rows)
    values = st.sampled_from([0.0, 0.5, 1.0, -2.0, 3.25])
    scores = [
        {"prompt_id": r["id"], "response_id": x["id"], "score": data.draw(values)} for r in rows for x in r["responses"]
    ]
    scores_file = _write(tmp_path / "scores.jsonl", scores)
    margin, every = data.draw(st.sampled_from([0.0, 0.5, 2.0])), data.draw(st.booleans())
    sources = None if every else ["judge"]
    kept, report = distant_supervision(
        read_records(source).records, read_scores(scores_file), margin, sources, scores_path=str(scores_file)
    )
    args = ["distant", str(source), "--scores", str(scores_file), "--margin", str(margin)]
    assert _run(tmp_path, *args, *(["--all-sources"] if every else [])) == _expected(tmp_path, kept, report.to_dict())


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=records(), data=st.data())
def test_the_recipe_streamed_is_the_steps_chained_over_lists(rows, data, tmp_path) -> None:
    """In this process (the steps on worker processes are the tests above)."""
    source = _write(tmp_path / "in.jsonl", rows)
    human = _write(tmp_path / "human.jsonl", rows[: data.draw(st.integers(1, 2))])
    scores = _write(
        tmp_path / "s.jsonl",
        [_row(r["id"], x["id"], data.draw(st.sampled_from([0, 1.5]))) for r in rows for x in r["responses"]],
    )
    out = tmp_path / "out"
    recipe_file = tmp_path / f"recipe{data.draw(st.integers(0, 10**9))}.yaml"
    folder = out / recipe_file.stem
    recipe_file.write_text(
        f"output_dir: {folder}\njudge_input: {source}\nhuman: {human}\nfilter: {{}}\n"
        f"distant: {{scores: {scores}, all_sources: true}}\ndebias: {{seed: 3}}\n",
        encoding="utf-8",
    )
    filtered, _ = filter_records(read_records(source).records, FilterConfig())
    if not any(r.comparisons for r in filtered):
        with pytest.raises(InputError, match="judge_input has no comparisons"):
            run_recipe(load_recipe(recipe_file), workers=2)
        return
    distant, _ = distant_supervision(filtered, read_scores(scores), 0.0, None, scores_path=str(scores))
    debiased, report = length_debias(distant, seed=3)
    final, merged = merge_subsets(read_records(human).records, debiased)
    summary = run_recipe(load_recipe(recipe_file), workers=2)
    for name, records in [
        ("01-filtered", filtered),
        ("03-distant", distant),
        ("04-debiased", debiased),
        ("final", final),
    ]:
        write_records(tmp_path / "expected.jsonl", records)
        assert (folder / f"{name}.jsonl").read_bytes() == (tmp_path / "expected.jsonl").read_bytes()
    assert summary.stage("debias").report == report.to_dict()
    assert summary.stage("final").report == merged.to_dict()


def test_debias_in_tokens_streamed(tmp_path, qwen2_tokenizer_dir) -> None:
    """In this process (a worker would load transformers for the tokenizer: seconds each)."""
    rows = [
        {
            "id": f"p{i}",
            "input": "问题",
            "responses": [{"id": "a", "content": "好" * (i + 1)}, {"id": "b", "content": "hello world " * 3}],
            "comparisons": [{"a": "a", "b": "b", "label": "ab"[i % 2]}],
        }
        for i in range(8)
    ]
    source = _write(tmp_path / "in.jsonl", rows)
    kept, report = length_debias(read_records(source).records, seed=1, unit="tokens", tokenizer=qwen2_tokenizer_dir)
    got = _run(tmp_path, "debias", str(source), "--seed", "1", "--tokenizer", str(qwen2_tokenizer_dir))
    assert got == _expected(tmp_path, kept, report.to_dict())
    assert got[1]["unit"] == "tokens"


def test_a_missing_score_stops_the_streamed_distant_even_with_skip_invalid(tmp_path, pooled) -> None:
    rows = [
        {"id": "p0", "input": "问", "responses": [{"id": "a", "content": "甲"}, {"id": "b", "content": "乙"}]}
        | {"comparisons": [{"a": "a", "b": "b", "label": "a", "source": "judge"}]}
    ]
    source = _write(tmp_path / "in.jsonl", rows)
    scores = _write(tmp_path / "s.jsonl", [{"prompt_id": "p0", "response_id": "a", "score": 1}])
    out = tmp_path / "out.jsonl"
    args = ["curate", "distant", str(source), "--scores", str(scores), "-o", str(out), "--skip-invalid"]
    result = CliRunner().invoke(app, [*args, "--workers", "2"])
    assert isinstance(result.exception, InputError)
    assert str(result.exception).startswith(f"{scores}: no score for prompt 'p0' response 'b'")
    assert not out.exists()


def _row(p: str, r: str, s: object) -> dict:
    return {"prompt_id": p, "response_id": r, "score": s}


@pytest.mark.parametrize(
    "rows",
    [
        [_row("p", "a", 1), _row("p", "b", 2.5), _row("q", "a", -1)],
        [_row("p", "a", 1), _row("p", "b", 2.5), _row("p", "a", -1), _row("q", "b", 3), _row("q", "b", 3)],
        [_row("p", "a", 1), _row("p", "b", 2.5), _row("p", "a", -1), [1]],
        [_row("p", "a", 1), [1], _row("p", "a", -1)],
        [_row("p", "a", 1), {"prompt_id": "p"}],
        [_row("p", "a", 1), _row("p", "b", True)],
    ],
)
def test_the_score_table_reads_as_read_scores(rows, tmp_path) -> None:
    path = _write(tmp_path / "s.jsonl", rows)
    keys = [("p", "a"), ("p", "b"), ("q", "a"), ("q", "b"), ("x", "y"), ("pa", "")]

    def lookup(read):
        try:
            table = read(path)
        except InputError as e:
            return str(e)
        return [table.get(k) for k in keys]

    expected = lookup(read_scores)
    assert lookup(read_score_table) == expected
    if rows[0] == _row("p", "a", 1) and len(rows) == 3 and rows[2] == _row("q", "a", -1):
        assert expected == [1.0, 2.5, -1.0, None, None, None]
    if len(rows) == 5:
        assert expected == f"{path}:3: second score for prompt 'p' response 'a' — keep one row per response"
