"""``cheems serve`` under faults, on a real server on loopback: a full queue, a timeout, a client that leaves,
bad requests, SIGTERM with requests in flight, the default address, the API key. Each waits on a state of the
server (``GET /stats``, a reply, an exit), never on a clock. The server is the one ``cheems serve`` runs, in a
thread of this process (``ServedApp``; one of its own for a test that counts or holds requests), except where only
a process shows it: the exit on SIGTERM, the key read from the environment, the address the process listens on,
the start-up errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from cheems.models import load_scorer
from helpers import free_port
from serve_server import RewardServer, Served, ServedApp
from tiny_models import build_tiny_bert

ONE = {"query": ["问题 回答"], "prompts": ["问题"]}


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return build_tiny_bert(tmp_path_factory.mktemp("bert"), seed=5)


@pytest.fixture
def server(bert, reward_app):
    return reward_app(bert)


@pytest.fixture(scope="module")
def keyed(bert):
    """``cheems serve`` as a process, with its default address and a key from its environment."""
    with RewardServer(bert, "--api-key-env", "RM_KEY", env={"RM_KEY": "s3cret"}) as s:
        yield s


def post(url: str, body: object = ONE, path: str = "/get_reward", **kw) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60, **kw)


def no_traceback(server: Served) -> None:
    errors = server.errors()
    assert "Traceback" not in errors and "ERROR" not in errors, errors


def test_a_full_queue_gets_503_with_retry_after(bert):
    """The scoring thread holds the first request while it waits for a second (max-batch 2, a long max-wait); with
    --max-queue 1 the next request is refused at once, and the first is still answered."""
    with ServedApp(bert, max_batch=2, max_wait_ms=10000, max_queue=1) as s:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(post, s.url)
            s.wait_for("waiting", 1)
            r = post(s.url)
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            assert "--max-queue 1" in r.json()["detail"]
            assert first.result().status_code == 200  # its batch ran out of wait and scored it alone
        no_traceback(s)


def test_a_request_past_its_timeout_gets_503_and_is_not_scored(bert):
    with ServedApp(bert, max_batch=2, max_wait_ms=10000, request_timeout=0.5) as s:
        r = post(s.url)
        assert r.status_code == 503 and "not scored within 0.5 s" in r.json()["detail"]
        assert r.headers["retry-after"] == "1"
        # the next sample fills the batch the dropped one waits in: only it is scored
        assert post(s.url, {"query": ["问题 回答"], "prompts": ["问题"]}).status_code in (200, 503)
        assert s.stats()["scored"] <= 1
        no_traceback(s)


def test_a_client_that_leaves_costs_nothing(bert):
    """A client sends a request and closes its socket while the request waits for a batch: the server notices,
    drops it before the forward (only the next request's sample is scored), and answers that one correctly."""
    want = load_scorer(str(bert), dtype="fp32", device="cpu").score([("问题", " 回答")])[0]
    with ServedApp(bert, max_batch=2, max_wait_ms=10000) as s:
        body = json.dumps(ONE).encode()
        with socket.create_connection(("127.0.0.1", s.port)) as sock:
            head = (
                f"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
            )
            sock.sendall(head.encode() + b"\r\n\r\n" + body)
            s.wait_for("waiting", 1)
        s.wait_for("left", 1)
        r = post(s.url, {"query": ["问题 回答"], "prompts": ["问题"]})
        assert r.status_code == 200 and r.json()["rewards"][0] == pytest.approx(want, abs=1e-5)
        assert s.stats() == {"waiting": 0, "batches": 1, "scored": 1, "left": 1}
        no_traceback(s)


# (path, case) -> (body, status, what the detail says)
BAD = {
    ("/get_reward", "malformed JSON"): (b'{"query": ["a"', 422, "Invalid JSON"),
    ("/get_reward", "not an object"): (b'["a"]', 422, "object"),
    ("/get_reward", "query not a list"): (b'{"query": "a"}', 422, "query"),
    ("/get_reward", "query of numbers"): (b'{"query": [1, 2]}', 422, "query.0"),
    ("/get_reward", "empty query"): (b'{"query": []}', 422, "query"),
    ("/get_reward", "prompts of another length"): (b'{"query": ["a", "b"], "prompts": ["a"]}', 422, "one per query"),
    ("/get_reward", "a lone surrogate"): (b'{"query": ["\\ud800"]}', 422, "lone surrogate"),
    ("/get_reward", "empty body"): (b"", 422, "Invalid JSON"),
    ("/classify", "empty input list"): (b'{"input": []}', 422, "empty list"),
    ("/classify", "token ids"): (b'{"input": [1, 2, 3]}', 422, "list of texts"),
    ("/classify", "input and messages"): (
        b'{"input": "a", "messages": [{"role": "user", "content": "a"}]}',
        422,
        "exactly one",
    ),
    ("/pooling", "neither input nor messages"): (b'{"model": "x"}', 422, "exactly one"),
    ("/classify", "no user turn"): (
        b'{"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "r"}]}',
        422,
        "no user turn",
    ),
    ("/pooling", "no assistant turn"): (b'{"messages": [{"role": "user", "content": "q"}]}', 422, "assistant"),
    ("/classify", "content not text"): (b'{"messages": [{"role": "user", "content": 5}]}', 422, "content"),
    ("/classify", "unknown model"): (b'{"model": "gpt-9", "input": "a"}', 404, "'gpt-9' is not served"),
    ("/v1/classify", "activation not a bool"): (b'{"input": "a", "use_activation": "yes"}', 422, "use_activation"),
    ("/pooling", "an unserved task"): (b'{"input": "a", "task": "embed"}', 422, "task"),
    ("/pooling", "truncate below the limit"): (b'{"input": "a", "truncate_prompt_tokens": 8}', 400, "--max-length 8"),
}


@pytest.mark.parametrize(("path", "case"), sorted(BAD), ids=[f"{p} {c}" for p, c in sorted(BAD)])
def test_a_bad_request_gets_a_4xx_with_one_line(server, path, case):
    body, status, says = BAD[path, case]
    r = httpx.post(server.url + path, content=body, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and len(detail) < 300 and says in detail, detail
    no_traceback(server)


def test_a_10_mb_body_gets_413_and_the_server_goes_on(server):
    huge = json.dumps({"query": ["x" * (10 << 20)]}).encode()
    r = httpx.post(server.url + "/get_reward", content=huge, headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code == 413 and "MiB" in r.json()["detail"] and "xxxx" not in r.json()["detail"]
    assert post(server.url).status_code == 200
    no_traceback(server)


def test_sigterm_with_requests_in_flight_answers_them_and_exits(bert):
    """Three requests wait in the scoring thread's batch for a fourth: on SIGTERM each is answered (200, or 503 for
    one not yet taken), and the process exits."""
    with RewardServer(bert, "--max-batch", "4", "--max-wait-ms", "10000") as s:
        with ThreadPoolExecutor(3) as pool:
            held = pool.submit(post, s.url)
            s.wait_for("waiting", 1)
            more = [pool.submit(post, s.url), pool.submit(post, s.url)]
            s.wait_for("waiting", 3)  # the batch (max 4) waits for a fourth
            assert s.terminate() == 143  # cheems exits 128 + 15 for SIGTERM, once the shutdown is done
            statuses = sorted(f.result().status_code for f in [held, *more])
        assert statuses[0] == 200 and set(statuses) <= {200, 503}, statuses
        no_traceback(s)


def test_it_listens_on_loopback_unless_told_otherwise(keyed):
    assert keyed.proc is not None
    listening = [c.laddr for c in psutil.Process(keyed.proc.pid).net_connections() if c.status == "LISTEN"]
    assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", keyed.port)]


def test_with_an_api_key_a_request_without_it_gets_401(keyed):
    assert post(keyed.url).status_code == 401
    assert post(keyed.url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = post(keyed.url, headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200 and len(r.json()["rewards"]) == 1
    assert httpx.get(keyed.url + "/v1/models").status_code == 401
    assert httpx.get(keyed.url + "/health").status_code == 200  # a probe needs no key


def test_start_up_errors_are_one_line(bert):
    """A taken port, a model that does not load, an unset key variable: one line, exit 1, no traceback."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        cases = [
            ([str(bert), "--port", str(port)], "--port"),
            (["/no/such/model", "--port", str(free_port())], "/no/such/model"),
            ([str(bert), "--api-key-env", "CHEEMS_NO_SUCH_VAR"], "CHEEMS_NO_SUCH_VAR"),
            ([str(bert), "--truncate", "left"], "--truncate"),
        ]
        for args, says in cases:
            done = subprocess.run(
                [sys.executable, "-m", "cheems", "serve", *args], capture_output=True, text=True, timeout=120
            )
            assert done.returncode != 0 and says in done.stderr, (args, done.stderr)
            assert "Traceback" not in done.stderr and done.stdout == "", (args, done.stderr)


def test_a_scorer_without_tokens_is_served_and_refuses_rendered_texts(reward_app):
    """Any model `cheems score` takes is served (here the length baseline); a text with no prompt split is a 400
    that says what to send, not a 500."""
    want = load_scorer("length").score([("问题", " 回答")])
    s = reward_app("length")
    assert post(s.url).json()["rewards"] == want
    r = post(s.url, {"query": ["问题 回答"]})
    assert r.status_code == 400 and "send prompts" in r.json()["detail"]
    no_traceback(s)
