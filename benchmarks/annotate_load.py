"""Annotation server under load: N annotators submitting concurrently for a while, against a real server.

Creates a project (synthetic Chinese prompts, 5 responses each, enough tasks that no queue runs
dry), starts ``cheems annotate serve`` on loopback in a subprocess, and runs N simulated annotators
in one asyncio process (plain keep-alive HTTP/1.1 on asyncio streams): each loops GET /api/next ->
POST /api/tasks/{id}/submit as fast as the server answers (a closed loop, no think time: the worst
case for the one SQLite writer). Reports throughput, latency percentiles per request kind, every
non-200, and checks that the database holds exactly the acknowledged submissions. ``--review-rate``
and ``--overlap`` load the review and adjudication paths too.

    python benchmarks/annotate_load.py [--annotators 50] [--seconds 60] [--review-rate 0.3] [--overlap 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from cheems.annotate.people import People, Person, ProjectSettings
from cheems.annotate.store import Project
from cheems.data.schema import Record

CATEGORIES = ["数学", "代码", "理解", "写作", "知识", "推理", "安全", "复杂指令"]


def records(n: int) -> list[Record]:
    """``n`` prompts with five responses of a few hundred characters each."""
    body = "这是一个用于压力测试的回答，包含若干句子。" * 12
    return [
        Record.model_validate(
            {
                "id": f"load-{i:05d}",
                "input": f"第 {i} 个问题：请解释奖励模型的作用。",
                "category": [CATEGORIES[i % len(CATEGORIES)]],
                "responses": [{"id": f"r{j}", "content": f"回答 {j}：{body}"} for j in range(1, 6)],
            }
        )
        for i in range(n)
    ]


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


class Connection:
    """One keep-alive HTTP/1.1 connection on asyncio streams: a load generator much lighter than httpx,
    whose client-side CPU (one process, 50 connections) otherwise caps the numbers before the server does."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        status_line, *headers = (await self.reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        length = next((int(h.split(":")[1]) for h in headers if h.lower().startswith("content-length")), 0)
        return int(status_line.split()[1]), await self.reader.readexactly(length)


async def annotator(port: int, token: str, until: float, log: dict) -> None:
    conn = Connection(port, token)
    await conn.open()
    while time.monotonic() < until:
        t0 = time.monotonic()
        status, body = await conn.request("GET", "/api/next")
        log["next"].append(time.monotonic() - t0)
        if status == 204:
            break
        if status != 200:
            log["errors"].append(f"next {status}")
            continue
        task = json.loads(body)
        keys = [x["key"] for x in task["responses"]]
        answer = {"scores": {k: 5 - i for i, k in enumerate(keys)}, "ranking": ">".join(keys)}
        t0 = time.monotonic()
        status, body = await conn.request("POST", f"/api/tasks/{task['item_id']}/submit", answer)
        log["submit"].append(time.monotonic() - t0)
        if status == 200:
            log["acknowledged"].append(task["item_id"])
        else:
            log["errors"].append(f"submit {status}: {body[:100]!r}")
    conn.writer.close()


async def load(port: int, tokens: list[str], seconds: float) -> dict:
    log: dict = {"next": [], "submit": [], "acknowledged": [], "errors": []}
    until = time.monotonic() + seconds
    start = time.monotonic()
    await asyncio.gather(*(annotator(port, t, until, log) for t in tokens))
    log["wall"] = time.monotonic() - start
    return log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--prompts", type=int, default=4000)
    parser.add_argument("--review-rate", type=float, default=0.3)
    parser.add_argument("--overlap", type=int, default=1)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="cheems-load-")) / "project"
    people = [Person(name=f"ann-{i:02d}", categories=[CATEGORIES[i % 8]]) for i in range(args.annotators)]
    people += [Person(name="rev-01", role="reviewer"), Person(name="lead", role="admin")]
    settings = ProjectSettings(overlap=args.overlap, review_rate=args.review_rate)
    t0 = time.monotonic()
    _, tokens, plan = Project.create(folder, records(args.prompts), People(people=people), (), settings)
    init_s = time.monotonic() - t0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "cheems", "annotate", "serve", str(folder), "--port", str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(url + "/api/me", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        names = [p.name for p in people if p.role == "annotator"]
        log = asyncio.run(load(port, [tokens[n] for n in names], args.seconds))
    finally:
        server.terminate()
        server.wait(timeout=30)
    stored = {a.item_id for a in Project.open(folder).snapshot().answers}
    n = len(log["acknowledged"])
    result = {
        "annotators": args.annotators,
        "seconds": round(log["wall"], 1),
        "init": {"prompts": plan.prompts, "tasks": plan.tasks, "items": plan.items, "seconds": round(init_s, 2)},
        "submissions": n,
        "submissions_per_s": round(n / log["wall"], 1),
        "errors": len(log["errors"]),
        "error_examples": log["errors"][:5],
        "submit_ms": {f"p{q}": round(1000 * percentile(log["submit"], q), 1) for q in (50, 95, 99)},
        "next_ms": {f"p{q}": round(1000 * percentile(log["next"], q), 1) for q in (50, 95, 99)},
        "acknowledged_all_stored": set(log["acknowledged"]) <= stored,
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
