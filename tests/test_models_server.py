"""Reward model servers as scorers (``vllm:URL#MODEL``, ``openrlhf:URL``) against real loopback HTTP servers.

:class:`RMServer` speaks vLLM's ``/pooling`` (chat messages) and OpenRLHF's ``/get_reward``; its reward is
the length of the response (vLLM: the last message) or of the whole query text (OpenRLHF), so every
expected score is counted by hand. ``faults`` schedules misbehaviour for the first requests, in order.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.models import load_scorer, score_records
from cheems.models.server import OpenRLHFRewardScorer, RewardServerSettings, VLLMRewardScorer
from helpers import assert_user_error, run_main, write_jsonl

MODEL = "qwen-rm"
# (prompt, responses): prompt_text("问题一") + "\n\n" + response is what OpenRLHF gets.
BENCH = [
    {
        "id": "p1",
        "input": "问题一",
        "responses": [{"id": "a", "content": "短"}, {"id": "b", "content": "长一点的回答"}],
    },
    {
        "id": "p2",
        "input": [
            {"role": "user", "content": "你好"},
            {"role": "assistant", "content": "嗨"},
            {"role": "user", "content": "再见"},
        ],
        "responses": [
            {"id": "a", "content": "再见！"},
            {"id": "b", "content": "拜拜"},
            {"id": "c", "content": "x" * 7},
        ],
    },
]
VLLM_SCORES = {("p1", "a"): 1.0, ("p1", "b"): 6.0, ("p2", "a"): 3.0, ("p2", "b"): 2.0, ("p2", "c"): 7.0}
# "user: 你好\nassistant: 嗨\nuser: 再见" is 8 + 1 + 12 + 1 + 8 = 30 characters; "问题一" 3; the blank line 2.
OPENRLHF_SCORES = {("p1", "a"): 6.0, ("p1", "b"): 11.0, ("p2", "a"): 35.0, ("p2", "b"): 34.0, ("p2", "c"): 39.0}


class RMServer:
    """A threading HTTP server on 127.0.0.1 answering ``/pooling`` and ``/get_reward``.

    ``faults``: behaviours of the first requests, in arrival order (then ``ok``): ``429`` (with
    ``Retry-After: retry_after``), ``500``, ``malformed`` (broken JSON), ``count`` (one reward too few), ``nan``
    (a NaN reward), ``inf`` (``Infinity``), ``big`` (a 400-digit integer), ``text`` (``"1.5"``), ``list2``
    (two numbers for one input), ``reset`` (the connection is closed, no reply).
    ``per_token``: vLLM replies one ``[r]`` row per token, the reward on the last (a ``reward`` pooler).
    ``die_after``: answers that many requests, then dies (stops listening; the next request is reset).
    ``port``: 0 = any free one; a server restarted on the port of a dead one has the same URL (the cache key).
    """

    def __init__(
        self,
        faults: list[str] | None = None,
        per_token: bool = False,
        retry_after: str = "0",
        die_after: int | None = None,
        port: int = 0,
    ) -> None:
        self.faults = list(faults or [])
        self.per_token = per_token
        self.retry_after, self.die_after = retry_after, die_after
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # the http.server name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    dies = outer.die_after is not None and len(outer.requests) >= outer.die_after
                    if not dies:
                        outer.requests.append(
                            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                        )
                    fault = "reset" if dies else outer.faults.pop(0) if outer.faults else "ok"
                if dies:  # killed mid-run: nothing listens any more
                    threading.Thread(target=outer.stop, daemon=True).start()
                try:
                    outer.answer(self, body, fault)
                except (BrokenPipeError, ConnectionResetError):
                    # the client gave up on this request (another one told it the server died) and closed the
                    # connection: a real server drops it, it does not print a traceback into the run's stderr
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def rewards(self, path: str, body: dict) -> list[float]:
        if path == "/pooling":
            assert body["model"] == MODEL and body["add_generation_prompt"] is False and body["use_activation"] is False
            return [float(len(body["messages"][-1]["content"]))]
        assert path == "/get_reward", path
        return [float(len(q)) for q in body["query"]]

    def answer(self, handler: BaseHTTPRequestHandler, body: dict, fault: str) -> None:
        if fault == "reset":
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            handler.connection.close()
            return
        status, headers = {"429": (429, {"Retry-After": self.retry_after}), "500": (500, {})}.get(fault, (200, {}))
        rewards = self.rewards(handler.path, body)
        bad = {"nan": float("nan"), "inf": float("inf"), "big": 10**400, "text": "1.5"}
        rewards = [bad[fault]] * len(rewards) if fault in bad else rewards[:-1] if fault == "count" else rewards
        if handler.path == "/pooling":
            value = [[0.5]] * 3 + [[rewards[0]]] if self.per_token else [rewards[0]]
            value = [rewards[0], 1.0] if fault == "list2" else value
            reply = {"id": "pool-1", "object": "list", "data": [{"index": 0, "object": "pooling", "data": value}]}
        else:
            reply = {"rewards": rewards, "scores": rewards}
        data = b'{"data": [' if fault == "malformed" else json.dumps(reply).encode()
        data = b'{"error": "busy"}' if status != 200 else data
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[RMServer]:
    srv = RMServer()
    yield srv
    srv.stop()


def records() -> list[Record]:
    return [Record.model_validate(r) for r in BENCH]


def fast(url: str, model: str = "", **kw: object) -> RewardServerSettings:
    """Settings with millisecond backoff and a short deadline, so fault tests run in well under a second."""
    base = {"backoff_base": 0.001, "backoff_max": 0.01, "timeout": 10.0, "api_key": "", "concurrency": 4}
    return RewardServerSettings(base_url=url, model=model, **{**base, **kw})


def test_vllm_scores_through_pooling_with_chat_messages(server):
    scorer = VLLMRewardScorer(server.url, MODEL, fast(server.url, MODEL))
    assert score_records(records(), scorer, progress=False) == VLLM_SCORES
    sent = {json.dumps(r["body"]["messages"], ensure_ascii=False) for r in server.requests}
    assert len(server.requests) == 5 and {r["path"] for r in server.requests} == {"/pooling"}
    # the whole dialogue goes to the server, which applies the chat template; the response is the assistant turn
    p2c = [*BENCH[1]["input"], {"role": "assistant", "content": "x" * 7}]
    assert json.dumps(p2c, ensure_ascii=False) in sent


def test_vllm_per_token_rewards_take_the_last_token(tmp_path):
    srv = RMServer(per_token=True)
    try:
        assert score_records(records(), VLLMRewardScorer(srv.url, MODEL, fast(srv.url, MODEL)), progress=False) == (
            VLLM_SCORES
        )
    finally:
        srv.stop()


def test_openrlhf_batches_plain_texts(server):
    scorer = OpenRLHFRewardScorer(server.url, batch_size=2, settings=fast(server.url))
    assert score_records(records(), scorer, progress=False) == OPENRLHF_SCORES
    queries = sorted(q for r in server.requests for q in r["body"]["query"])
    assert len(server.requests) == 3 and sorted(len(r["body"]["query"]) for r in server.requests) == [1, 2, 2]
    assert "问题一\n\n短" in queries and "user: 你好\nassistant: 嗨\nuser: 再见\n\n拜拜" in queries


@pytest.mark.parametrize("faults", [["429", "500", "reset"], ["malformed", "count", "nan"]])
def test_transient_faults_are_retried(faults):
    srv = RMServer(faults=faults)
    try:
        scorer = OpenRLHFRewardScorer(srv.url, batch_size=5, settings=fast(srv.url))
        assert scorer.score([(r.prompt, x.content) for r in records() for x in r.responses]) == list(
            OPENRLHF_SCORES.values()
        )
        assert len(srv.requests) == 4  # three failures, then the one good reply
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("fault", "kind", "message"),
    [
        ("count", "openrlhf", "malformed reply: 4 rewards for 5 texts (after 3 attempts)"),
        ("nan", "openrlhf", "malformed reply: a non-finite reward (nan) (after 3 attempts)"),
        ("malformed", "vllm", "malformed reply: Expecting value"),
        ("list2", "vllm", "malformed reply: expected one reward per input, got 2 numbers (a classifier?)"),
        ("500", "vllm", "busy (after 3 attempts)"),
    ],
)
def test_a_server_that_keeps_misbehaving_is_one_line_error(fault, kind, message):
    srv = RMServer(faults=[fault] * 100)
    try:
        if kind == "vllm":
            scorer = VLLMRewardScorer(srv.url, MODEL, fast(srv.url, MODEL, max_retries=2, concurrency=1))
        else:
            scorer = OpenRLHFRewardScorer(srv.url, batch_size=5, settings=fast(srv.url, max_retries=2))
        with pytest.raises(InputError) as e:
            score_records(records(), scorer, progress=False)
        assert f"the reward model server at {srv.url}" in str(e.value) and message in str(e.value)
        assert "\n" not in str(e.value)
    finally:
        srv.stop()


def test_unreachable_and_dying_servers_stop_with_one_line():
    srv = RMServer()
    srv.stop()  # nothing listens on that port now
    with pytest.raises(InputError, match=r"cannot reach the reward model server at .*/get_reward"):
        OpenRLHFRewardScorer(srv.url, settings=fast(srv.url, max_retries=1)).score([("问", "答")])
    dying = RMServer(faults=["ok"] + ["reset"] * 1000)  # one answer, then every connection is cut
    try:
        scorer = VLLMRewardScorer(dying.url, MODEL, fast(dying.url, MODEL, max_consecutive_failures=6))
        with pytest.raises(InputError, match=r"the reward model server at .*/pooling stopped answering: 6 requests"):
            scorer.score([("问", "答" * n) for n in range(1, 40)])
    finally:
        dying.stop()


def test_specs_and_fingerprints(server, monkeypatch):
    monkeypatch.delenv("CHEEMS_RM_API_KEY", raising=False)
    v = load_scorer(f"vllm:{server.url}/v1/#{MODEL}")
    assert isinstance(v, VLLMRewardScorer) and (v.url, v.settings.model, v.name) == (
        server.url,
        MODEL,
        f"vllm:{server.url}#{MODEL}",
    )
    o = load_scorer(f"openrlhf:{server.url}/get_reward", batch_size=3)
    assert isinstance(o, OpenRLHFRewardScorer) and (o.url, o.batch_size) == (server.url, 3)
    # the cache identity: URL + model + text format; not the API key, not the batch size
    monkeypatch.setenv("CHEEMS_RM_API_KEY", "sk-secret-123456")
    assert load_scorer(f"vllm:{server.url}#{MODEL}").fingerprint() == v.fingerprint()
    assert load_scorer(f"openrlhf:{server.url}", batch_size=9).fingerprint() == o.fingerprint()
    assert load_scorer(f"vllm:{server.url}#other").fingerprint() != v.fingerprint()
    assert load_scorer(f"vllm:{server.url}/rm#{MODEL}").fingerprint() != v.fingerprint()
    assert o.fingerprint() != v.fingerprint() and "sk-secret" not in v.fingerprint()
    for spec, text in [
        (f"vllm:{server.url}", "names no model"),
        (f"openrlhf:{server.url}#m", "has one model"),
        ("vllm:ftp://x#m", r"'ftp://x' is not an http\(s\) URL"),
        ("openrlhf:", "needs a base URL"),
    ]:
        with pytest.raises(InputError, match=text):
            load_scorer(spec)


def test_api_key_is_sent_as_bearer(server, monkeypatch):
    monkeypatch.setenv("CHEEMS_RM_API_KEY", "sk-secret-123456")
    load_scorer(f"openrlhf:{server.url}").score([("问", "答")])
    assert server.requests[0]["auth"] == "Bearer sk-secret-123456"


def test_cli_score_end_to_end_and_resume_from_cache(tmp_path, monkeypatch, capsys):
    bench = write_jsonl(tmp_path / "open.jsonl", BENCH)
    cache = tmp_path / "scores.sqlite"
    srv = RMServer(faults=["429", "500"])
    try:
        for spec, expected in [(f"vllm:{srv.url}#{MODEL}", VLLM_SCORES), (f"openrlhf:{srv.url}", OPENRLHF_SCORES)]:
            out = tmp_path / f"{spec.partition(':')[0]}.jsonl"
            result = run_main(
                "score", "--model", spec, "--bench", bench, "-o", out, "--cache", cache, monkeypatch=monkeypatch,
                capsys=capsys,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            rows = [json.loads(line) for line in out.read_text().splitlines()]
            assert {(r["prompt_id"], r["response_id"]): r["score"] for r in rows} == expected
        assert len(srv.requests) == 2 + 5 + 1  # two faults, 5 vLLM items, one OpenRLHF batch of 5
    finally:
        srv.stop()
    # the server is gone: a rerun is answered from the cache alone
    again = tmp_path / "again.jsonl"
    result = run_main(
        "score", "--model", f"vllm:{srv.url}#{MODEL}", "--bench", bench, "-o", again, "--cache", cache,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert again.read_text() == (tmp_path / "vllm.jsonl").read_text()
    # a spec without a model is a one-line user error (exit 2, no traceback)
    result = run_main(
        "score", "--model", f"vllm:{srv.url}", "--bench", bench, "-o", tmp_path / "x.jsonl", "--no-cache",
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert_user_error(result, f"'vllm:{srv.url}' names no model", "use vllm:URL#MODEL")
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize(
    ("fault", "sent"),
    [
        ("big", "a reward too large for a number: 100000000000… (401 digits)"),
        ("inf", "a non-finite reward (inf)"),
        ("nan", "a non-finite reward (nan)"),
        ("text", "a reward is not a number: 1.5"),
    ],
)
@pytest.mark.parametrize("kind", ["vllm", "openrlhf"])
def test_a_reward_past_a_float_is_one_line_naming_the_server_and_never_stored(
    tmp_path, monkeypatch, capsys, kind, fault, sent
):
    bench = write_jsonl(tmp_path / "open.jsonl", BENCH)
    out, cache = tmp_path / "scores.jsonl", tmp_path / "scores.sqlite"
    srv = RMServer(faults=["ok", "ok"] + [fault] * 1000)  # two good replies, then only the bad value
    try:
        spec = f"vllm:{srv.url}#{MODEL}" if kind == "vllm" else f"openrlhf:{srv.url}"
        result = run_main(
            "score", "--model", spec, "--bench", bench, "-o", out, "--cache", cache, "--max-retries", "1",
            "--concurrency", "1", "--batch-size", "1", monkeypatch=monkeypatch, capsys=capsys,
        )  # fmt: skip
    finally:
        srv.stop()
    path = "/pooling" if kind == "vllm" else "/get_reward"
    line = assert_user_error(result, f"the reward model server at {srv.url}{path} gave no usable reply", sent)
    assert "2 score(s) of this run are saved in" in line and not out.exists()
    assert _cached_rows(cache) == 2  # the good replies only: the bad value is never stored


def _cached_rows(path) -> int:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT count(*) FROM scores").fetchone()[0]


@pytest.mark.parametrize("command", ["score", "eval", "bon"])
def test_a_server_that_accepts_and_never_answers_stops_with_one_line(tmp_path, monkeypatch, capsys, command):
    ranked = [{**r, "rank": {x["id"]: i + 1 for i, x in enumerate(r["responses"])}} for r in BENCH]
    bench = write_jsonl(tmp_path / "open.jsonl", ranked)
    out = tmp_path / "out.jsonl"
    inputs = {"score": ["--bench", bench, "-o", out], "eval": ["--bench", bench], "bon": [bench, "-o", out]}[command]
    # A listening socket nobody accepts on: the kernel completes the handshake, the request is never read.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        result = run_main(
            command, *inputs, "--model", f"openrlhf:{url}", "--no-cache", "--timeout", "0.5", "--give-up-after", "1",
            "--batch-size", "2", monkeypatch=monkeypatch, capsys=capsys,
        )  # fmt: skip
    assert_user_error(
        result,
        f"no answer from the reward model server at {url}/get_reward for 1 s (last try: no reply within 0.5 s)",
        "raise --give-up-after",
    )
    assert not out.exists()


def test_retry_after_an_hour_is_capped_and_a_server_that_only_says_429_is_given_up():
    items = [(r.prompt, x.content) for r in records() for x in r.responses]
    srv = RMServer(faults=["429"] * 10_000, retry_after="3600")
    try:
        # Retry-After: 3600 is waited for at most backoff_max (0.01 s here): the retries run out at once.
        scorer = OpenRLHFRewardScorer(srv.url, batch_size=5, settings=fast(srv.url, max_retries=2))
        with pytest.raises(InputError, match=r"gave no usable reply: busy \(after 3 attempts\)"):
            scorer.score(items)
        # Endless retries: the run stops once no usable reply came for give_up_after seconds.
        patient = fast(srv.url, max_retries=10**6, timeout=0.3, give_up_after=0.3)
        with pytest.raises(InputError) as e:
            OpenRLHFRewardScorer(srv.url, batch_size=5, settings=patient).score(items)
        assert f"no answer from the reward model server at {srv.url}/get_reward for 0.3 s" in str(e.value)
        assert "(last try: HTTP 429: busy)" in str(e.value) and "\n" not in str(e.value)
    finally:
        srv.stop()


@pytest.mark.parametrize(("kind", "answered"), [("vllm", 3), ("openrlhf", 2)])
def test_scores_of_a_server_that_dies_mid_run_are_cached_and_a_rerun_asks_only_the_rest(
    tmp_path, monkeypatch, capsys, kind, answered
):
    bench = write_jsonl(tmp_path / "open.jsonl", BENCH)
    cache = tmp_path / "scores.sqlite"
    expected = VLLM_SCORES if kind == "vllm" else OPENRLHF_SCORES

    def score(srv: RMServer, out) -> object:
        spec = f"vllm:{srv.url}#{MODEL}" if kind == "vllm" else f"openrlhf:{srv.url}"
        return run_main(
            "score", "--model", spec, "--bench", bench, "-o", out, "--cache", cache, "--batch-size", "2",
            "--concurrency", "1", "--max-retries", "0", monkeypatch=monkeypatch, capsys=capsys,
        )  # fmt: skip

    dying = RMServer(die_after=answered)  # vLLM: 3 of 5 items; OpenRLHF: 2 batches of 2 of 5 texts
    try:
        result = score(dying, tmp_path / "first.jsonl")
    finally:
        dying.stop()
    saved = answered if kind == "vllm" else 2 * answered
    assert_user_error(result, f"the reward model server at {dying.url}", f"{saved} score(s) of this run are saved in")
    assert not (tmp_path / "first.jsonl").exists()
    healthy = RMServer(port=dying.httpd.server_address[1])  # the server restarted at the same URL
    try:
        result = score(healthy, tmp_path / "again.jsonl")
    finally:
        healthy.stop()
    assert result.returncode == 0, result.stderr
    asked = (
        [r["body"]["messages"][-1]["content"] for r in healthy.requests]
        if kind == "vllm"
        else [q.rpartition("\n\n")[2] for r in healthy.requests for q in r["body"]["query"]]
    )
    answered_before = (
        [r["body"]["messages"][-1]["content"] for r in dying.requests]
        if kind == "vllm"
        else [q.rpartition("\n\n")[2] for r in dying.requests for q in r["body"]["query"]]
    )
    everything = [x["content"] for record in BENCH for x in record["responses"]]
    assert sorted(asked) == sorted(set(everything) - set(answered_before)) and len(asked) == 5 - saved
    rows = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert {(r["prompt_id"], r["response_id"]): r["score"] for r in rows} == expected
