"""``judge_records`` against a real loopback HTTP server that misbehaves on purpose (tests/fault_server.py)."""

from __future__ import annotations

import time

import pytest

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.judge import JudgeSettings, judge_records
from cheems.judge.judgements import JudgeCache
from cheems.judge.questions import plan_pairs
from cheems.llm.client import usage_tokens
from fault_server import FakeJudgeServer, messages_key


def records(
    n_records: int = 2, n_responses: int = 3, special: dict[int, str] | None = None, pid: str = "p"
) -> list[Record]:
    """Responses r1..rn of growing length (the fake judge prefers the longer: r_j beats r_i for j > i)."""
    out = []
    for k in range(n_records):
        responses = [
            {"id": f"r{i}", "content": f"{pid}{k}回答" + "好" * i + (special or {}).get(i, "")}
            for i in range(1, n_responses + 1)
        ]
        out.append(
            Record.model_validate(
                {"id": f"{pid}{k}", "input": f"问题{pid}{k}", "category": ["知识"], "responses": responses}
            )
        )
    return out


def settings(server: FakeJudgeServer, tmp_path, **kw) -> JudgeSettings:
    base = dict(
        judge_model="fake-judge",
        base_url=server.url,
        api_key="test-key",
        cache=tmp_path / "judge.sqlite",
        backoff_base=0.001,
        backoff_max=0.01,
        timeout=5.0,
        concurrency=4,
    )
    return JudgeSettings(**{**base, **kw})


@pytest.fixture
def server():
    with FakeJudgeServer() as s:
        yield s


def judge_comparisons(result) -> list[tuple[str, str, str, str]]:
    return [(r.id, c.a, c.b, c.label) for r in result.records for c in r.comparisons if c.source == "judge"]


def test_every_pair_judged_and_mapped_back_to_a_b(server, tmp_path):
    recs = records(3, 4)
    result = judge_records(recs, settings(server, tmp_path, price_in=2.0, price_out=8.0), progress=False)
    s = result.stats
    assert (s.pairs, s.judged, s.cached, s.failed_total, s.not_attempted) == (18, 18, 0, 0, 0)
    # The longer response wins whichever way round it was shown: the a/b mapping is right.
    assert all(label == "b" for *_, label in judge_comparisons(result))
    shown = {c.model_extra["shown"] for r in result.records for c in r.comparisons}
    assert shown == {"ab", "ba"}
    c = result.records[0].comparisons[0]
    assert (c.annotator, c.source) == ("fake-judge", "judge")
    assert c.model_extra["raw"] and c.model_extra["template"]
    assert recs[0].comparisons == []  # the input records are not modified
    # Usage is summed from the server's replies; cost from the prices.
    assert s.requests == server.total == 18
    assert s.prompt_tokens > 0 and s.completion_tokens > 0
    assert s.cost == pytest.approx((s.prompt_tokens * 2.0 + s.completion_tokens * 8.0) / 1e6)
    assert s.shown_labels["A"] + s.shown_labels["B"] == 18 and s.a_share == s.shown_labels["A"] / 18


def test_transient_faults_are_retried_until_a_verdict(tmp_path):
    faults = "{{fault:429,500,503,reset,malformed,nochoices,hang,bad,think}}"
    with FakeJudgeServer(hang_s=1.0) as server:
        result = judge_records(
            records(1, 2, special={2: faults}), settings(server, tmp_path, timeout=0.4, max_retries=7), progress=False
        )
    assert result.stats.judged == 1 and result.stats.failed_total == 0
    assert judge_comparisons(result) == [("p0", "r1", "r2", "b")]
    # 7 transport faults were retried; then 2 replies without a verdict were re-asked, the third answered.
    assert list(server.counts.values()) == [10]
    assert server.behaviours["hang"] == 1 and server.behaviours["reset"] == 1
    temperatures = [b["temperature"] for b in server.bodies]
    assert temperatures[:8] == [0.0] * 8 and temperatures[8:] == [0.7, 0.7]  # re-asks sample


@pytest.mark.parametrize(
    ("fault", "reason", "cached"),
    [
        ("500", "http_500", False),
        ("429", "http_429", False),
        ("reset", "connection", False),
        ("malformed", "malformed", False),
        ("hang", "timeout", False),
        ("bad", "no_label", True),
        ("think", "reasoning_only", True),
    ],
)
def test_persistent_faults_are_reported_never_guessed(tmp_path, fault, reason, cached):
    with FakeJudgeServer(hang_s=0.6) as server:
        recs = records(1, 3, special={3: "{{fault:%s*}}" % fault})
        result = judge_records(recs, settings(server, tmp_path, timeout=0.3, max_retries=2), progress=False)
        # Pairs with r3 fail; the pair (r1, r2) is judged: the run finishes.
        assert judge_comparisons(result) == [("p0", "r1", "r2", "b")]
        assert result.stats.failed == {reason: 2}
        assert {(f.a, f.b, f.reason) for f in result.failures} == {("r1", "r3", reason), ("r2", "r3", reason)}
        assert all(n == 3 for key, n in server.counts.items() if n > 1)  # 1 try + 2 retries (or re-asks)
        if cached:
            assert result.failures[0].raw  # the judge's reply is kept for inspection
        # A rerun asks again what failed in transport, not what the judge answered without a verdict.
        before = server.total
        again = judge_records(recs, settings(server, tmp_path, timeout=0.3, max_retries=0), progress=False)
        assert server.total - before == (0 if cached else 2)
        assert again.stats.cached == 1 and again.stats.failed == {reason: 2}
        assert all(f.from_cache == cached for f in again.failures)
        if cached:  # --retry-failed asks those again
            retry = judge_records(recs, settings(server, tmp_path, max_retries=0, retry_failed=True), progress=False)
            assert server.total - before == 2 and retry.stats.failed == {reason: 2}


def test_http_400_fails_the_pair_without_retrying(server, tmp_path):
    result = judge_records(records(1, 3, special={3: "{{fault:400*}}"}), settings(server, tmp_path), progress=False)
    assert result.stats.failed == {"http_400": 2} and result.stats.judged == 1
    assert sorted(server.counts.values()) == [1, 1, 1]


def test_retry_after_is_honoured(tmp_path):
    with FakeJudgeServer(retry_after="1") as server:
        cfg = settings(server, tmp_path, backoff_max=2.0)
        result = judge_records(records(1, 2, special={2: "{{fault:429}}"}), cfg, progress=False)
    assert result.stats.judged == 1
    first, second = server.request_times
    assert second - first >= 0.95  # the server said 1 s; our own backoff alone would be 0.01 s


def test_retry_after_is_capped_by_backoff_max(tmp_path):
    # A server asking for an hour is asked again after backoff_max (here 0.01 s): the run ends, the pair fails.
    with FakeJudgeServer(retry_after="3600") as server:
        recs = records(1, 2, special={2: "{{fault:429*}}"})
        result = judge_records(recs, settings(server, tmp_path, max_retries=2), progress=False)
    assert result.stats.failed == {"http_429": 1} and list(server.counts.values()) == [3]


def test_concurrency_is_bounded_and_used(tmp_path):
    with FakeJudgeServer(latency=0.1) as server:
        start = time.monotonic()
        result = judge_records(records(5, 3), settings(server, tmp_path, concurrency=3), progress=False)
        elapsed = time.monotonic() - start
    assert result.stats.judged == 15
    assert server.max_in_flight == 3
    assert elapsed < 15 * 0.1 / 3 + 1.0  # about 5 rounds of 0.1 s, not 15


def test_budget_stops_the_run_and_a_rerun_resumes(server, tmp_path):
    recs = records(2, 4)  # 12 questions
    cut = judge_records(recs, settings(server, tmp_path, max_requests=5), progress=False)
    assert cut.stats.judged == 5 and cut.stats.not_attempted == 7 and cut.stats.budget_exhausted
    assert server.total == 5 and len(judge_comparisons(cut)) == 5
    rest = judge_records(recs, settings(server, tmp_path), progress=False)
    assert rest.stats.cached == 5 and rest.stats.judged == 7 and not rest.stats.budget_exhausted
    assert server.total == 12 and set(server.counts.values()) == {1}  # nothing asked twice
    with FakeJudgeServer() as fresh:
        whole = judge_records(recs, settings(fresh, tmp_path / "other"), progress=False)
    assert [r.to_json() for r in rest.records] == [r.to_json() for r in whole.records]


def test_budget_counts_retries(tmp_path):
    with FakeJudgeServer() as server:
        result = judge_records(
            records(1, 2, special={2: "{{fault:500*}}"}),
            settings(server, tmp_path, max_requests=2, max_retries=5),
            progress=False,
        )
    assert server.total == 2 and result.stats.not_attempted == 1 and result.stats.budget_exhausted


def test_cache_makes_a_rerun_free_and_a_new_seed_asks_only_new_orders(server, tmp_path):
    recs = records(4, 4)
    first = judge_records(recs, settings(server, tmp_path), progress=False)
    again = judge_records(recs, settings(server, tmp_path), progress=False)
    assert server.total == 24 and again.stats.cached == 24 and again.stats.requests == 0
    assert [r.to_json() for r in again.records] == [r.to_json() for r in first.records]
    changed = sum(a.shown != b.shown for a, b in zip(plan_pairs(recs, seed=0), plan_pairs(recs, seed=1)))
    assert 0 < changed < 24
    judge_records(recs, settings(server, tmp_path, seed=1), progress=False)
    assert server.total == 24 + changed
    with JudgeCache(tmp_path / "judge.sqlite") as cache:
        assert cache.count() == 24 + changed


def test_other_judge_model_or_endpoint_is_another_cache_key(server, tmp_path):
    recs = records(1, 2)
    judge_records(recs, settings(server, tmp_path), progress=False)
    judge_records(recs, settings(server, tmp_path, judge_model="other"), progress=False)
    judge_records(recs, settings(server, tmp_path, base_url=server.url + "/"), progress=False)  # same endpoint
    assert server.total == 2


def test_identical_questions_are_asked_once(server, tmp_path):
    recs = records(1, 3) + [Record.model_validate({**records(1, 3)[0].to_json(), "id": "copy"})]
    # Both orders: the two records ask exactly the same six questions (one order alone depends on the id).
    result = judge_records(recs, settings(server, tmp_path, both_orders=True), progress=False)
    assert server.total == 6 and result.stats.judged == 12
    assert [c.label for c in result.records[1].comparisons] == [c.label for c in result.records[0].comparisons]


def test_judging_the_output_again_adds_nothing(server, tmp_path):
    first = judge_records(records(2, 3), settings(server, tmp_path), progress=False)
    second = judge_records(first.records, settings(server, tmp_path / "fresh"), progress=False)
    assert second.stats.pairs == 0 and server.total == 6
    assert [r.to_json() for r in second.records] == [r.to_json() for r in first.records]


def test_both_orders_consistency_report(server, tmp_path):
    result = judge_records(records(2, 3), settings(server, tmp_path, both_orders=True), progress=False)
    assert result.stats.pairs == 12 and result.stats.consistency == {"pairs": 6, "consistent": 6, "rate": 1.0}
    assert sum(len(r.comparisons) for r in result.records) == 12
    assert result.stats.a_share == 0.5


def test_position_bias_shows_up_in_the_report(tmp_path):
    with FakeJudgeServer(always="A") as server:  # a judge that always picks the first answer
        result = judge_records(records(2, 3), settings(server, tmp_path, both_orders=True), progress=False)
    assert result.stats.consistency == {"pairs": 6, "consistent": 0, "rate": 0.0}
    assert result.stats.a_share == 1.0


def test_ties_become_tie_labels(server, tmp_path):
    rec = Record.model_validate(
        {"id": "t", "input": "问", "responses": [{"id": "x", "content": "一样长"}, {"id": "y", "content": "同样长"}]}
    )
    result = judge_records([rec], settings(server, tmp_path), progress=False)
    assert judge_comparisons(result) == [("t", "x", "y", "tie")]


def test_bad_key_stops_with_one_line(tmp_path):
    with FakeJudgeServer(api_key="right") as server:
        with pytest.raises(InputError) as e:
            judge_records(records(5, 4), settings(server, tmp_path, api_key="wrong"), progress=False)
        assert server.total <= 4  # the workers stop at the first 401, not after every pair
    assert "HTTP 401" in str(e.value) and "OPENAI_API_KEY" in str(e.value) and "\n" not in str(e.value)


def test_wrong_path_is_a_user_error(server, tmp_path):
    with pytest.raises(InputError, match="HTTP 404"):
        judge_records(
            records(1, 2), settings(server, tmp_path, base_url=server.url.replace("/v1", "/nope")), progress=False
        )


def test_unreachable_server_is_a_user_error(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = JudgeSettings(
        "m",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="k",
        cache=tmp_path / "c.sqlite",
        max_retries=1,
        backoff_base=0.001,
    )
    with pytest.raises(InputError) as e:
        judge_records(records(1, 2), cfg, progress=False)
    assert "cannot reach the judge" in str(e.value) and e.value.field == "base_url"


def test_a_dead_server_stops_the_run_at_once_even_with_workers_in_backoff(tmp_path):
    with FakeJudgeServer(die_after=3) as server:
        start = time.monotonic()
        with pytest.raises(InputError) as e:
            judge_records(
                records(4, 4),
                settings(
                    server,
                    tmp_path,
                    concurrency=8,
                    max_consecutive_failures=8,
                    max_retries=10,
                    backoff_base=0.05,
                    backoff_max=30.0,
                ),
                progress=False,
            )
        elapsed = time.monotonic() - start
    # 8 requests in a row without a reply stop every worker, also those sleeping in a (up to 30 s) backoff.
    assert elapsed < 5 and server.total <= 3 + 1 + 8 + 8
    assert "stopped answering" in str(e.value) and "3 judgement(s) of this run are saved in" in str(e.value)
    with JudgeCache(tmp_path / "judge.sqlite") as cache:
        assert cache.count() == 3


def test_replies_are_capped_when_read_and_when_stored(server, tmp_path):
    recs = records(1, 3, special={3: "{{fault:huge*}}"}) + records(1, 2, special={2: "{{fault:long*}}"}, pid="l")
    result = judge_records(recs, settings(server, tmp_path, max_reply_bytes=1_000_000), progress=False)
    assert result.stats.failed == {"too_large": 2} and result.stats.judged == 2
    assert server.behaviours["huge"] == 2  # not retried: the same question gets the same reply
    (comparison,) = result.records[1].comparisons  # a long reply with a verdict: read, stored clipped
    assert len(comparison.model_extra["raw"]) < 2100 and "characters cut" in comparison.model_extra["raw"]


def test_an_echoed_key_is_redacted(server, tmp_path):
    key = "sk-test-9876543210zyx"
    recs = records(1, 3, special={2: "{{fault:echo_key*}}", 3: "{{fault:echo_key_400*}}"})
    result = judge_records(recs, settings(server, tmp_path, api_key=key), progress=False)
    texts = [c.model_extra["raw"] for c in result.records[0].comparisons] + [f.detail for f in result.failures]
    assert texts and all("Bearer [API key]" in t and key not in t for t in texts)
    assert key.encode() not in (tmp_path / "judge.sqlite").read_bytes()


def test_key_comes_from_the_named_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "secret-0123456789")
    with FakeJudgeServer(api_key="secret-0123456789") as server:
        cfg = settings(server, tmp_path, api_key=None, api_key_env="MY_JUDGE_KEY")
        judge_records(records(1, 2), cfg, progress=False)
    assert server.total == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "localhost", "[::1]", "0.0.0.0", "[::ffff:127.0.0.1]"])
def test_a_server_on_this_machine_needs_no_key(tmp_path, monkeypatch, host):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeJudgeServer() as server:
        assert settings(server, tmp_path, api_key=None, base_url=f"http://{host}:9/v1").resolve_api_key() == ""
        judge_records(records(1, 2), settings(server, tmp_path, api_key=None), progress=False)
        assert server.total == 1 and server.authorizations == [None]  # no key, no Authorization header


@pytest.mark.parametrize(
    "url",
    [
        "http://judge.example.com/v1",
        "https://10.0.0.5:8000/v1",
        "http://localhost.evil.com/v1",
        "http://[::ffff:10.0.0.5]/v1",
    ],
)
def test_a_remote_server_without_a_key_is_one_line_naming_the_option(tmp_path, monkeypatch, url):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = JudgeSettings("fake-judge", base_url=url, cache=tmp_path / "judge.sqlite")
    with pytest.raises(InputError) as e:
        judge_records(records(1, 2), cfg, progress=False)
    text = str(e.value)
    assert text.startswith("--api-key-env: environment variable OPENAI_API_KEY is not set") and "\n" not in text


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"base_url": "localhost:8000"}, r"not an http\(s\) URL"),
        ({"base_url": None}, "needs a base URL"),
        ({"concurrency": 0}, "at least 1"),
        ({"concurrency": 257}, "at most 256"),
        ({"timeout": float("nan")}, "finite"),
        ({"max_consecutive_failures": 0}, "at least 1"),
        ({"max_reply_bytes": 0}, "at least 1"),
        ({"timeout": 0}, "must be positive"),
        ({"max_requests": -1}, "0 or more"),
        ({"backend": "grpc"}, "unknown backend"),
        ({"judge_model": " "}, "judge model is empty"),
    ],
)
def test_bad_settings(server, tmp_path, change, words):
    with pytest.raises(InputError, match=words):
        judge_records(records(1, 2), settings(server, tmp_path, **change), progress=False)
    assert server.total == 0


def test_server_sees_the_messages_the_cache_is_keyed_by(server, tmp_path):
    judge_records(records(1, 2), settings(server, tmp_path), progress=False)
    body = server.bodies[0]
    assert body["model"] == "fake-judge" and body["max_tokens"] == 64 and body["temperature"] == 0.0
    with JudgeCache(tmp_path / "judge.sqlite") as cache:
        row = cache.connect().execute("SELECT item FROM judgements").fetchone()
    assert row[0] == messages_key(body["messages"])


def test_works_when_called_from_a_running_event_loop(server, tmp_path):
    import asyncio

    async def notebook_cell():  # e.g. Jupyter: an event loop is already running
        return judge_records(records(1, 3), settings(server, tmp_path), progress=False)

    result = asyncio.run(notebook_cell())
    assert result.stats.judged == 3 and server.total == 3


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        ({"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}, (7, 2)),
        ({"prompt_tokens": 2**53 - 1, "completion_tokens": 0}, (2**53 - 1, 0)),
        ({"completion_tokens": 3}, (0, 3)),  # a count left out is 0, as servers without usage
        (None, (0, 0)),
        ({"prompt_tokens": 2**53, "completion_tokens": 1}, None),
        ({"prompt_tokens": 2**64, "completion_tokens": 1}, None),
        ({"prompt_tokens": -1, "completion_tokens": 1}, None),
        ({"prompt_tokens": 3.0, "completion_tokens": 1}, None),
        ({"prompt_tokens": True, "completion_tokens": 1}, None),
        ({"prompt_tokens": "3", "completion_tokens": 1}, None),
        ([3, 1], None),
    ],
)
def test_usage_counts_are_whole_numbers_any_database_holds_or_unknown(usage, tokens):
    assert usage_tokens({"usage": usage}) == tokens
