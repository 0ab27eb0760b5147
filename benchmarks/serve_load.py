"""Reward server under RL load: ``cheems serve`` against a per-request server, N clients sending one sample each.

OpenRLHF's rollout sends one sample per POST, all rollouts at once; its reference server (``serve_rm.py``) runs
one forward per request inside its ``async`` handler, so requests are scored strictly one after another. This
starts both on loopback with the same model (m3e-small by default) and precision (cheems' ``--dtype``, default
auto: bf16 where the CPU has bf16 units): ``cheems serve`` (dynamic batching) and the baseline written below in the
reference server's shape. For each client count (1, 8, 32, 64), alternating the servers, N asyncio clients on
keep-alive connections each send ``{"query": [prompt + response], "prompts": [prompt]}`` in a closed loop over
the same synthetic Chinese RL samples (prompts of 20-60 characters, responses of 40-400). Reported per server and
client count: requests/s, p50/p95 latency, errors (any non-200). Then a flood: ``--flood`` requests sent at once
to ``cheems serve`` (one connection each), the server's RSS before and at its peak, and how many got 200 / 503
(the queue is bounded by ``--max-queue``: past it, 503 at once, never unbounded memory).

    python benchmarks/serve_load.py [--model m3e-small] [--rounds 3] [--requests 20] [--flood 10000]
    python benchmarks/serve_load.py --quick     # 1 round, few requests, a 2,000-request flood
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
from annotate_load import Connection  # keep-alive HTTP/1.1 on asyncio streams: lighter than httpx
from fastapi import Request  # at module level: FastAPI reads the route's annotation by name

LEVELS = (1, 8, 32, 64)
ROOT = Path(__file__).resolve().parents[1]


def samples(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (prompt, response) pairs of varied length, the same every run."""
    rng = random.Random(seed)
    words = "奖励模型 强化学习 策略 回答 问题 数据 训练 评估 长度 偏好 人类 标注 模型 推理 数学 代码".split()
    out = []
    for i in range(n):
        prompt = f"第{i}题：" + "".join(rng.choice(words) for _ in range(rng.randint(4, 15))) + "？"
        response = "。".join(
            "".join(rng.choice(words) for _ in range(rng.randint(5, 12))) for _ in range(rng.randint(1, 8))
        )
        out.append((prompt, response + "。"))
    return out


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


# ---------------------------------------------------------------- the baseline: one forward per request


def baseline_server(model: str, port: int, dtype: str, max_length: int) -> None:
    """OpenRLHF's reference server in miniature: an ``async`` route that tokenises the request's queries and runs
    the forward right there (blocking the event loop), nothing gathered across requests."""
    import torch
    import uvicorn
    from fastapi import FastAPI
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from cheems.http_serving import listening_socket
    from cheems.models.backbones import resolve_backbone
    from cheems.runtime import autocast, compute_dtype

    path = resolve_backbone(model) if not os.path.exists(model) else model
    tokenizer = AutoTokenizer.from_pretrained(path)
    net = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1).eval()
    amp = compute_dtype("cpu", dtype)
    app = FastAPI()

    @app.post("/get_reward")
    async def get_reward(request: Request) -> dict:
        queries = (await request.json())["query"]
        inputs = tokenizer(queries, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        with torch.inference_mode(), autocast("cpu", amp):
            rewards = net(**inputs).logits[:, 0].float().tolist()
        return {"rewards": rewards, "scores": rewards, "extra_logs": {"dummy_scores": rewards}}

    sock = listening_socket("127.0.0.1", port)
    print("serving", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])


# ---------------------------------------------------------------- clients


def body_of(sample: tuple[str, str]) -> dict:
    prompt, response = sample
    return {"query": [prompt + response], "prompts": [prompt], "labels": [""]}


async def closed_loop(port: int, clients: int, work: list[tuple[str, str]]) -> dict:
    """``clients`` connections sending the samples of ``work`` one per request until all are answered."""
    latencies: list[float] = []
    errors: list[str] = []
    todo = iter(work)

    async def client() -> None:
        conn = Connection(port, token="")
        await conn.open()
        for sample in todo:
            t0 = time.perf_counter()
            status, reply = await conn.request("POST", "/get_reward", body_of(sample))
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                errors.append(f"{status}: {reply[:80]!r}")
        conn.writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - start
    return {
        "requests_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(1000 * percentile(latencies, 50), 1),
        "p95_ms": round(1000 * percentile(latencies, 95), 1),
        "errors": len(errors),
        "error_examples": errors[:3],
    }


async def flood(port: int, n: int, pid: int, work: list[tuple[str, str]]) -> dict:
    """``n`` requests at once, one connection each; the server's RSS sampled while they are in flight."""
    server = psutil.Process(pid)
    before = server.memory_info().rss
    peak = before
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, server.memory_info().rss)
            await asyncio.sleep(0.05)

    async def one(i: int) -> int:
        conn = Connection(port, token="")
        await conn.open()
        status, _ = await conn.request("POST", "/get_reward", body_of(work[i % len(work)]))
        conn.writer.close()
        return status

    watcher = asyncio.create_task(watch())
    statuses = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    done.set()
    await watcher
    counts: dict[str, int] = {}
    for s in statuses:
        key = str(s) if isinstance(s, int) else type(s).__name__
        counts[key] = counts.get(key, 0) + 1
    return {"requests": n, "rss_before_mb": before >> 20, "rss_peak_mb": peak >> 20, "statuses": counts}


# ---------------------------------------------------------------- the run


def start(args: list[str]) -> subprocess.Popen:
    """A server subprocess, once it has printed its ready line (it listens by then)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True, env=env)
    if not (proc.stdout and proc.stdout.readline().startswith("serving")):
        raise RuntimeError(f"server {args} did not start (exit {proc.wait()})")
    return proc


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="m3e-small")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3, help="Alternated rounds per client count.")
    parser.add_argument("--requests", type=int, default=20, help="Requests per client per round (at least 64).")
    parser.add_argument("--flood", type=int, default=10_000, help="Requests sent at once for the RSS check.")
    parser.add_argument("--request-timeout", type=float, default=60, help="cheems serve's --request-timeout.")
    parser.add_argument("--quick", action="store_true", help="1 round, 3 requests per client, a 2,000 flood.")
    parser.add_argument("--baseline", type=int, help=argparse.SUPPRESS)  # internal: run the baseline on this port
    args = parser.parse_args()
    if args.baseline:
        baseline_server(args.model, args.baseline, args.dtype, args.max_length)
        return
    if args.quick:
        args.rounds, args.requests, args.flood, args.request_timeout = 1, 3, 2000, 15
    work = samples(4096)
    ours_port, base_port = free_port(), free_port()
    common = ["--dtype", args.dtype, "--max-length", str(args.max_length)]
    timeout = ["--request-timeout", str(args.request_timeout)]
    ours = start(["-m", "cheems", "serve", args.model, "--port", str(ours_port), *common, *timeout])
    base = start([__file__, "--baseline", str(base_port), "--model", args.model, *common])
    results: dict[str, dict[int, list[dict]]] = {"cheems": {}, "baseline": {}}
    try:
        for port in (ours_port, base_port):  # warm-up: first forwards allocate
            asyncio.run(closed_loop(port, 4, work[:16]))
        for level in LEVELS:
            n = max(64, level * args.requests)
            for r in range(args.rounds):
                order = [("baseline", base_port), ("cheems", ours_port)]
                for name, port in order if r % 2 == 0 else order[::-1]:
                    got = asyncio.run(closed_loop(port, level, work[:n]))
                    results[name].setdefault(level, []).append(got)
                    print(json.dumps({"server": name, "clients": level, "round": r, **got}), flush=True)
        flooded = asyncio.run(flood(ours_port, args.flood, ours.pid, work))
    finally:
        for proc in (ours, base):
            proc.terminate()
            proc.wait(timeout=30)
    table = {
        name: {
            level: {
                "requests_per_s": statistics.median(x["requests_per_s"] for x in runs),
                "p50_ms": statistics.median(x["p50_ms"] for x in runs),
                "p95_ms": statistics.median(x["p95_ms"] for x in runs),
                "errors": sum(x["errors"] for x in runs),
            }
            for level, runs in by_level.items()
        }
        for name, by_level in results.items()
    }
    speedup = {
        level: round(table["cheems"][level]["requests_per_s"] / table["baseline"][level]["requests_per_s"], 2)
        for level in LEVELS
    }
    summary = {"model": args.model, "dtype": args.dtype, "rounds": args.rounds, "cpu_count": os.cpu_count()}
    print(json.dumps({**summary, "table": table, "speedup": speedup, "flood": flooded}, indent=2))


if __name__ == "__main__":
    main()
