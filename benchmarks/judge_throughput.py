"""Judge throughput: ``judge_records`` against a loopback chat-completions server with a fixed latency.

The server (tests/fault_server.py, a threaded HTTP server with keep-alive and a 1024-deep accept
queue) runs in its own process and answers every request after exactly ``--latency`` seconds, so
the best any client can do with K requests in flight is K / latency judgements per second (the
concurrency-bound limit). For each K the benchmark judges about ``K * rounds`` pairs built from
real prompts (oasst1_zh, all C(N,2) pairs of each prompt's replies; the file holds 1,809) with a
fresh cache, and
reports the share of that bound reached (judgements/s counts HTTP requests: the few questions that
occur twice in the data are asked once). The time covers everything ``judge_records`` does:
planning, prompt rendering, hashing, cache lookups, HTTP, parsing and one SQLite commit per
judgement.

    python benchmarks/judge_throughput.py [--concurrency 8 32 64] [--latency 0.2] [--rounds 50]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from math import comb
from pathlib import Path

from cheems.data.importers import import_file
from cheems.data.schema import Record
from cheems.judge import JudgeSettings, judge_records

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "oasst1_zh" / "oaast_rm_zh.json"


def pick_records(records: list[Record], pairs: int, skip: int = 0) -> list[Record]:
    """Records (after the first ``skip``) whose C(N,2) pairs add up to at least ``pairs``."""
    chosen, total = [], 0
    for record in records[skip:] + records[:skip]:
        if total >= pairs:
            break
        if len(record.responses) >= 2:
            chosen.append(record)
            total += comb(len(record.responses), 2)
    return chosen


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    """The fake judge in its own process (no GIL shared with the client); returns it and its base URL."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fault_server.py"), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit("the fake server did not start")
    return proc, url


def run(records: list[Record], url: str, k: int, cache: Path) -> tuple[int, int, float, float]:
    """Judge ``records`` with concurrency ``k``; (questions judged, requests, wall s, client CPU s)."""
    settings = JudgeSettings(
        judge_model="bench-judge", base_url=url, api_key="bench", concurrency=k, cache=cache, timeout=30
    )
    start, cpu = time.perf_counter(), time.process_time()
    result = judge_records(records, settings, progress=False)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    if result.stats.failed_total or result.stats.judged != result.stats.pairs:
        raise SystemExit(f"run was not clean: {result.stats.to_dict()}")
    return result.stats.judged, result.stats.requests, wall, cpu


def main() -> None:
    """Run the benchmark and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=50, help="pairs per run = concurrency x rounds (at least 200)")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"skipped: real data not found at {args.data} (it sits beside the repository in the team's checkout)")
        return
    records = import_file(args.data, "ranked", skip_invalid=True).records  # 6 prompts rank one reply twice
    server, url = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run(
                pick_records(records, 20, skip=len(records) // 2), url, 4, Path(tmp) / "warmup.sqlite"
            )  # imports, connections
            rows = []
            for i, k in enumerate(args.concurrency):
                chosen = pick_records(records, max(200, k * args.rounds), skip=i * 50)
                n, requests, wall, cpu = run(chosen, url, k, Path(tmp) / f"k{k}.sqlite")
                rate, bound = requests / wall, k / args.latency
                rows.append((k, len(chosen), n, requests, wall, cpu, rate, bound, rate / bound))
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(
        f"judge throughput, loopback server with a fixed {args.latency * 1000:.0f} ms latency, "
        f"{os.cpu_count()} CPU cores, Python {sys.version.split()[0]}\n"
    )
    print(
        "| concurrency K | prompts | pairs | requests | wall s | client CPU s | judgements/s | bound K / latency "
        "| share of bound |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k, prompts, n, requests, wall, cpu, rate, bound, share in rows:
        print(
            f"| {k} | {prompts} | {n} | {requests} | {wall:.2f} | {cpu:.2f} | {rate:.1f} | {bound:.0f} | {share:.1%} |"
        )


if __name__ == "__main__":
    main()
