"""The SQLite score cache and ``score_records``: hits skip the scorer, misses are scored once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.models import ScoreCache, ScoreItem, Scorer, default_cache_path, load_scorer, score_records
from cheems.models import score_cache as cache_module
from tiny_models import build_tiny_bert


class Counting:
    """A real scorer wrapped to count how often, and on how many items, it is called."""

    def __init__(self, inner: Scorer) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        self.items = 0

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        self.calls += 1
        self.items += len(items)
        return self.inner.score(items)


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("bert"))


def records() -> list[Record]:
    rows = [
        {
            "id": "p1",
            "input": "什么是奖励模型？",
            "responses": [{"id": "a", "content": "给回答打分的模型。"}, {"id": "b", "content": "不知道。"}],
        },
        {
            "id": "p2",
            "input": [
                {"role": "user", "content": "你好"},
                {"role": "assistant", "content": "你好！"},
                {"role": "user", "content": "讲个笑话"},
            ],
            "responses": [
                {"id": "a", "content": "从前有座山……"},
                {"id": "b", "content": "不会。"},
                {"id": "c", "content": "哈哈。"},
            ],
        },
        # the same (prompt, response) as p1/a under another prompt id: scored once, reported twice
        {"id": "p3", "input": "什么是奖励模型？", "responses": [{"id": "x", "content": "给回答打分的模型。"}]},
    ]
    return [Record.model_validate(r) for r in rows]


def test_second_call_hits_the_cache_and_never_calls_the_scorer(bert, tmp_path):
    cache = ScoreCache(tmp_path / "nested" / "scores.sqlite")
    scorer = Counting(load_scorer(str(bert)))
    first = score_records(records(), scorer, cache=cache)
    assert (scorer.calls, scorer.items) == (1, 5)  # one call for all misses, the duplicate scored once
    assert set(first) == {("p1", "a"), ("p1", "b"), ("p2", "a"), ("p2", "b"), ("p2", "c"), ("p3", "x")}
    assert first[("p1", "a")] == first[("p3", "x")]

    again = Counting(load_scorer(str(bert)))
    assert score_records(records(), again, cache=cache) == first
    assert again.calls == 0

    other = Counting(load_scorer(str(bert), max_length=64))  # another fingerprint: all misses
    score_records(records(), other, cache=cache)
    assert other.items == 5


def test_only_new_responses_are_scored(tmp_path):
    cache = ScoreCache(tmp_path / "s.sqlite")
    score_records(records(), load_scorer("length"), cache=cache)
    grown = records()
    grown[0].responses.append(grown[0].responses[0].model_copy(update={"id": "new", "content": "新的回答"}))
    scorer = Counting(load_scorer("length"))
    scores = score_records(grown, scorer, cache=cache)
    assert scorer.items == 1 and scores[("p1", "new")] == 4.0


def test_without_cache_scores_everything(tmp_path):
    scorer = Counting(load_scorer("length"))
    assert score_records(records(), scorer)[("p2", "a")] == float(len("从前有座山……"))
    assert scorer.calls == 1


def test_cache_file_is_created_lazily_in_wal_mode(tmp_path):
    path = tmp_path / "a" / "b" / "scores.sqlite"
    cache = ScoreCache(path)
    assert cache.get_many("fp", ["x"]) == {} and not path.exists()  # reading creates nothing
    cache.put_many("fp", {"x": 1.5, "y": float("nan")})
    assert cache.get_many("fp", ["x", "y", "z"]) == {"x": 1.5}  # NaN is not a usable score: a miss
    assert cache.get_many("other", ["x"]) == {}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_path_follows_cheems_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("CHEEMS_CACHE_DIR", str(tmp_path))
    assert ScoreCache().path == default_cache_path() == tmp_path / "scores.sqlite"
    monkeypatch.delenv("CHEEMS_CACHE_DIR")
    assert default_cache_path() == Path.home() / ".cache" / "cheems" / "scores.sqlite"


def test_a_file_that_is_not_a_cache_is_an_input_error(tmp_path):
    path = tmp_path / "scores.sqlite"
    path.write_text("not a database, just text " * 100)
    with pytest.raises(InputError, match="score cache"):
        ScoreCache(path).get_many("fp", ["x"])


def test_progress_bar_only_for_slow_work(bert, monkeypatch, capsys):
    score_records(records(), load_scorer("length"))
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(cache_module, "PROGRESS_AFTER_S", -1.0)  # pretend the work is slow
    score_records(records(), load_scorer(str(bert)))
    assert "scoring with" in capsys.readouterr().err


ALL_HITS = """
import sys, time
from cheems.data.schema import Record
from cheems.models import ScoreCache, load_scorer, score_records
from cheems.models.base import item_digest

records = [Record.model_validate({"id": f"p{i}", "input": f"问题{i}：" + "请详细回答。" * 5,
                                  "responses": [{"id": f"r{j}", "content": f"回答{i}-{j}" * 20} for j in range(4)]})
           for i in range(2500)]
cache = ScoreCache(sys.argv[2])
cache.put_many(load_scorer(sys.argv[1]).fingerprint(),
               {item_digest((r.input, x.content)): 1.0 for r in records for x in r.responses})
start = time.perf_counter()
scores = score_records(records, load_scorer(sys.argv[1]), cache=cache)
elapsed = time.perf_counter() - start
assert len(scores) == 10_000
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers")), elapsed)
"""


def test_all_hits_are_fast_and_never_import_torch(bert, tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", ALL_HITS, str(bert), str(tmp_path / "s.sqlite")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == "[]"
    assert float(out[1]) < 1.0  # seconds for 10,000 responses


class Overflowing:
    """A real length scorer whose model 'overflows' on one response (as an fp16 RM can): inf or NaN."""

    name = "overflowing"

    def __init__(self, bad: float) -> None:
        self.bad = bad
        self.inner = load_scorer("length")

    def fingerprint(self) -> str:
        return f"overflowing-{self.bad}"

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        scores = self.inner.score(items)
        return [self.bad if response == "坏" else s for (_, response), s in zip(items, scores)]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_model_score_is_an_error_and_is_never_cached(tmp_path, bad):
    record = Record.model_validate(
        {"id": "p", "input": "问", "responses": [{"id": "r1", "content": "好的回答"}, {"id": "r2", "content": "坏"}]}
    )
    cache = ScoreCache(tmp_path / "c.sqlite")
    with pytest.raises(InputError, match="non-finite score"):
        score_records([record], Overflowing(bad), cache=cache, progress=False)
    assert not cache.path.exists()  # nothing of that call was stored, not even the good score


class HandsOnThenStops:
    """The length scorer handing on the first ``n`` scores as it goes (as an RM server does), then stopped by
    ``error`` (Ctrl-C, a server that went away)."""

    def __init__(self, n: int, error: BaseException) -> None:
        self.inner = load_scorer("length")
        self.name, self.n, self.error = "hands-on", n, error

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        from cheems.models.base import finished

        finished(range(self.n), self.inner.score(items[: self.n]))
        raise self.error


@pytest.mark.parametrize("error", [KeyboardInterrupt(), InputError("the server went away", hint="start it")])
def test_scores_handed_on_before_a_failure_are_cached(tmp_path, error):
    cache = ScoreCache(tmp_path / "scores.sqlite")
    with pytest.raises(type(error)) as e:
        score_records(records(), HandsOnThenStops(2, error), cache=cache, progress=False)
    if isinstance(error, InputError):  # the message says what is kept, and where
        assert str(e.value).endswith(f"start it; 2 score(s) of this run are saved in {cache.path}: a rerun asks "
                                     "only for the rest")  # fmt: skip
    counting = Counting(load_scorer("length"))
    assert score_records(records(), counting, cache=cache, progress=False) == score_records(
        records(), load_scorer("length"), progress=False
    )
    assert counting.items == 3  # 5 responses, 2 of them cached by the stopped run


def _cached_rows(path: Path) -> list[tuple[str, str, float]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT fingerprint, item, score FROM scores"))


def test_the_library_uses_the_commands_score_cache_by_default(monkeypatch, tmp_path):
    """``cheems.score`` / ``cheems.evaluate`` / ``cheems.bon`` without ``cache=`` read and fill the file
    ``cheems score`` does without ``--cache`` (issue 32), and hit what the command cached; ``cache=None`` is
    ``--no-cache``."""
    import cheems
    from helpers import run_cheems

    demo = Path(cheems.__file__).parent / "assets" / "demo" / "open.jsonl"
    commands, library = tmp_path / "commands", tmp_path / "library"
    proc = run_cheems(
        "score",
        "--model",
        "length",
        "--bench",
        demo,
        "-o",
        tmp_path / "s.jsonl",
        env={"CHEEMS_CACHE_DIR": str(commands)},
    )
    assert proc.returncode == 0, proc.stderr
    bench = cheems.load_bench([demo])
    monkeypatch.setenv("CHEEMS_CACHE_DIR", str(library))
    cheems.score(bench, cheems.load_scorer("length"), cache=None)
    cheems.evaluate(bench, cheems.load_scorer("length"), resamples=0, cache=None)
    assert not library.exists()
    cheems.score(bench, cheems.load_scorer("length"))
    assert _cached_rows(library / "scores.sqlite") == _cached_rows(commands / "scores.sqlite")
    (library / "scores.sqlite").unlink()
    cheems.evaluate(bench, cheems.load_scorer("length"), resamples=0)
    cheems.bon(bench["open"], cheems.load_scorer("length"))
    assert _cached_rows(library / "scores.sqlite") == _cached_rows(commands / "scores.sqlite")

    monkeypatch.setenv("CHEEMS_CACHE_DIR", str(commands))  # the command's entries are hits: the scorer never runs
    counting = Counting(cheems.load_scorer("length"))
    assert cheems.score(bench, counting) == cheems.read_scores(tmp_path / "s.jsonl")
    assert counting.calls == 0
