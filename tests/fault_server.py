"""A real HTTP server on 127.0.0.1 that speaks OpenAI chat-completions and misbehaves on purpose.

The fake judge is deterministic from the request: of the two answers in the prompt (between the
``[回答A开始 #nonce]``/``[回答A结束 #nonce]`` fences), one containing ``★`` wins; otherwise the longer one
wins; equal lengths give C. Replies come in varied but valid verdict styles (``A``, ``**A**``, ``答案：A``...).

Misbehaviour is scheduled per question, from directives written in the answers' text:
``{{fault:429,500}}`` makes the first request for that question get 429, the second 500, later
ones are fine; a trailing ``*`` repeats the last one forever (``{{fault:bad*}}``). A ``faults``
callable ``(body, attempt) -> behaviour`` overrides the directives. Behaviours:

ok, slow (``slow_s`` extra), hang (``hang_s``: longer than the client timeout), 429 (with
``Retry-After``), 500, 503, 400, 401, malformed (broken JSON), nochoices (JSON without choices),
bad (a reply without A/B/C), think (a verdict only inside ``<think>``), reset (the socket is
closed with RST, no reply), 502, huge (a ``huge_bytes`` reply with Content-Length), huge_chunked (the
same, chunked, no length), long (a 60,000-character reply that ends with the verdict), html (a 200 with
an HTML page), null (``content: null``), reasoning (empty ``content``, the text in ``reasoning_content``),
echo_key (the verdict after the request's Authorization header), echo_key_500 / echo_key_400 /
echo_key_401 (an error whose message holds that header).

``die_after=N`` answers N requests, then the server dies: it stops listening and resets every open
connection (a judge server killed mid-run); ``kill()`` does that at once. ``usage=`` replaces the
``usage`` object of every reply (a server reporting broken token counts). ``reply=`` is a callable
``(body) -> text`` whose text is the content of every ok reply (a categoriser's answer, say).

Every request is counted per question: the key is the sha256 of the messages as the client's
cache computes it, so tests can check that nothing was asked twice.

A request with a ``seed`` (``cheems generate`` sends one; the judge never does) is a generation
request: the reply is :func:`fake_sample` of the last user turn and the seed, and the question key
is :func:`sample_key` (messages and seed), so each sample has its own count and its own fault schedule.

Run alone (for benchmarks): ``python tests/fault_server.py --latency 0.2`` prints the base URL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = re.compile(r"\[回答([AB])开始 #(\w+)\]\n(.*?)\n\[回答\1结束 #\2\]", re.DOTALL)
DIRECTIVE = re.compile(r"\{\{fault:([^}]*)\}\}")
STYLES = ("{}", "**{}**", "答案：{}", "[[{}]]", "最终答案：{}", "{}。")


def messages_key(messages: Any) -> str:
    """sha256 of the messages, computed exactly as ``cheems.runtime.content_hash``."""
    data = json.dumps(messages, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def fake_verdict(user_text: str) -> str:
    """The fake judge's label for a prompt: ★ wins, else the longer answer, else C."""
    answers = {label: text for label, _, text in ANSWER.findall(user_text)}
    a, b = answers.get("A", ""), answers.get("B", "")
    if ("★" in a) != ("★" in b):
        return "A" if "★" in a else "B"
    if len(a) != len(b):
        return "A" if len(a) > len(b) else "B"
    return "C"


def sample_key(messages: Any, seed: Any) -> str:
    """The question key of a generation request: its messages and its seed (each sample is its own question)."""
    return f"{messages_key(messages)}#{seed}"


def fake_sample(user_text: str, seed: Any) -> str:
    """The fake generator's reply to a generation request: a function of the last user turn and the seed."""
    return f"回答「{user_text}」#{seed}"


def scheduled(user_text: str, attempt: int) -> str:
    """The behaviour the answers' ``{{fault:...}}`` directives schedule for this attempt."""
    plan: list[str] = []
    for found in DIRECTIVE.findall(user_text):
        plan += [x.strip() for x in found.split(",") if x.strip()]
    if attempt < len(plan):
        return plan[attempt].rstrip("*")
    if plan and plan[-1].endswith("*"):
        return plan[-1].rstrip("*")
    return "ok"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # a burst of new connections must not be refused

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up (it stopped a run) is normal
            super().handle_error(request, client_address)


class FakeJudgeServer:
    """The server, run in a background thread: ``with FakeJudgeServer() as s: ... s.url``."""

    def __init__(
        self,
        latency: float = 0.0,
        slow_s: float = 0.3,
        hang_s: float = 5.0,
        retry_after: str | None = "0",
        api_key: str | None = None,
        faults: Callable[[dict, int], str] | None = None,
        port: int = 0,
        always: str | None = None,
        die_after: int | None = None,
        huge_bytes: int = 3 * 1024 * 1024,
        usage: Any = None,
        reply: Callable[[dict], str] | None = None,
    ) -> None:
        self.usage, self.reply = usage, reply
        self.die_after, self.dead, self.huge_bytes = die_after, False, huge_bytes
        self.latency, self.slow_s, self.hang_s, self.retry_after = latency, slow_s, hang_s, retry_after
        self.always = always  # a judge with total position bias: this label whatever the answers
        self.api_key = api_key
        self.faults = faults
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()  # question key -> requests
        self.behaviours: Counter[str] = Counter()
        self.request_times: list[float] = []
        self.bodies: list[dict] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self.in_flight = 0
        self.max_in_flight = 0  # most requests being handled at once
        self.httpd = _Server(("127.0.0.1", port), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        """The base URL to give the client (``.../v1``)."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def total(self) -> int:
        """Requests received."""
        return sum(self.counts.values())

    def start(self) -> "FakeJudgeServer":
        """Serve in the background."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def kill(self) -> None:
        """Die as a killed server does: refuse new connections, reset the open ones at their next request."""
        self.dead = True
        self.stop()

    def __enter__(self) -> "FakeJudgeServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers
            # Headers and body go out in two writes; with Nagle on, the second waits for the client's
            # delayed ACK (~40 ms). Real servers (uvicorn, vLLM) set TCP_NODELAY too.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def finish(self) -> None:
                try:
                    super().finish()
                except (OSError, ValueError):  # the socket was reset on purpose
                    pass

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                self._send(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"), headers)

            def _reset(self) -> None:
                # RST instead of FIN: the client sees a connection reset, no reply at all.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True

            def do_POST(self) -> None:  # http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if server.dead:
                    self._reset()
                    return
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(raw)
                    messages = body["messages"]
                    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
                except (ValueError, KeyError, StopIteration, TypeError):
                    self._json(400, {"error": {"message": "bad request body"}})
                    return
                key = messages_key(messages) if "seed" not in body else sample_key(messages, body["seed"])
                with server.lock:
                    attempt = server.counts[key]
                    server.counts[key] += 1
                    server.request_times.append(time.monotonic())
                    server.bodies.append(body)
                    server.authorizations.append(self.headers.get("Authorization"))
                    dies = server.die_after is not None and server.total > server.die_after
                if dies:
                    if not server.dead:
                        server.dead = True
                        threading.Thread(target=server.stop, daemon=True).start()
                    self._reset()
                    return
                if server.api_key is not None and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    behaviour = "401"
                else:
                    behaviour = server.faults(body, attempt) if server.faults else scheduled(user, attempt)
                with server.lock:
                    server.behaviours[behaviour] += 1
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.latency:
                        time.sleep(server.latency)
                    self._behave(behaviour, body, user, key)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _behave(self, behaviour: str, body: dict, user: str, key: str) -> None:
                if behaviour == "reset":
                    self._reset()
                    return
                auth = self.headers.get("Authorization") or ""
                if behaviour.startswith("echo_key_"):
                    status = int(behaviour.rsplit("_", 1)[1])
                    self._json(status, {"error": {"message": f"invalid request with header {auth}", "type": "fault"}})
                    return
                if behaviour in ("huge", "huge_chunked"):
                    self._huge(chunked=behaviour == "huge_chunked")
                    return
                if behaviour == "html":
                    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                if behaviour == "hang":
                    time.sleep(server.hang_s)
                elif behaviour == "slow":
                    time.sleep(server.slow_s)
                if behaviour in ("400", "429", "500", "502", "503", "401"):
                    headers = {"Retry-After": server.retry_after} if behaviour == "429" and server.retry_after else None
                    self._json(int(behaviour), {"error": {"message": f"fault {behaviour}", "type": "fault"}}, headers)
                    return
                if behaviour == "malformed":
                    self._send(200, b'{"id": "x", "choices": [{"message": {"content": "A"')
                    return
                if behaviour == "nochoices":
                    self._json(200, {"id": "x", "object": "chat.completion"})
                    return
                label = server.always or fake_verdict(user)
                if behaviour == "bad":
                    content = "两个回答各有千秋，难以取舍。"
                elif behaviour == "think":
                    content = f"<think>我觉得回答{label}更好。最终答案：{label}</think>"
                elif behaviour == "long":
                    content = "分析：" + "两个回答都讨论了问题的要点。" * 4000 + f"\n最终答案：{label}"
                elif behaviour == "echo_key":
                    content = f"收到的请求头：{auth}\n{label}"
                elif behaviour == "null":
                    content = None
                elif behaviour == "reasoning":
                    content = ""
                elif server.reply is not None:
                    content = server.reply(body)
                elif "seed" in body:  # a generation request (the judge sends no seed)
                    content = fake_sample(user, body["seed"])
                else:
                    content = STYLES[int(key[:2], 16) % len(STYLES)].format(label)
                message = {"role": "assistant", "content": content}
                if behaviour == "reasoning":
                    message["reasoning_content"] = f"先想一想……{label}"
                self._json(
                    200,
                    {
                        "id": "chatcmpl-" + key[:12],
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": server.usage
                        if server.usage is not None
                        else {
                            "prompt_tokens": len(user) // 2,
                            "completion_tokens": len(content or ""),
                            "total_tokens": len(user) // 2 + len(content or ""),
                        },
                    },
                )

            def _huge(self, chunked: bool) -> None:
                # A reply a broken or hostile server might send: far more than any verdict needs.
                head, tail = b'{"choices": [{"message": {"content": "', b'A"}}]}'
                filler = server.huge_bytes - len(head) - len(tail)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(server.huge_bytes))
                self.end_headers()
                block = b"x" * 65536
                parts = [
                    part
                    for part in (head, *[block] * (filler // len(block)), b"x" * (filler % len(block)), tail)
                    if part
                ]  # an empty chunk would end a chunked body
                try:
                    for part in parts:
                        if chunked:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                        else:
                            self.wfile.write(part)
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client stopped reading, as it should
                    self.close_connection = True

        return Handler


def main() -> None:
    """Serve until killed; print the base URL on the first line of stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = FakeJudgeServer(latency=args.latency, port=args.port)
    print(server.url, flush=True)
    try:
        server.httpd.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
