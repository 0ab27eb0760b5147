"""``cheems dedup`` and ``cheems decontaminate`` at the paper's scale (27,861 prompts, CheemsPreference) and 10×,
beside a plain exact-hash baseline (``json.loads`` each line, hash the raw prompt, keep the first): wall time and
peak memory (max RSS of the process) of each, every run a fresh subprocess.

The prompts are synthetic Chinese instructions (short templates × topics × 12–60 random characters; a fixed
seed), with 10 % exact duplicates after normalisation (punctuation, width, spacing changed) and 5 % near duplicates
(one character changed). The bench for ``decontaminate`` is 2,492 prompts (CheemsBench's size), a third of them
from the pool.

The templated pool (issue 31) is what real user logs are full of: 32,000 prompts of one template whose numbers
differ (请计算 A 乘以 B …), all distinct questions. Every one shares its LSH buckets with every other, so a dedup
that compares numbers only after the buckets does quadratic work; ``dedup`` keeps the numbers in the bucket keys.

    python benchmarks/dedup_scale.py [--scales 1 10] [--workers 1] [--pools varied templated]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAPER = 27_861
BENCH = 2_492
TOPICS = "量子计算 区块链 光合作用 唐诗宋词 机器学习 宏观经济 中医理论 气候变化 古代建筑 网络安全".split()
TEMPLATES = ["请解释{t}：{x}。", "关于{t}，{x}？请分{n}点说明。", "写一篇{t}短文，{x}。", "翻译成英文：{x}（{t}）。"]
CHARS = "".join(chr(c) for c in range(0x4E00, 0x5400))  # 1,536 CJK characters
TEMPLATED = 32_000
TEMPLATE = "请计算 {a} 乘以 {b} 等于多少，并写出详细的竖式计算步骤和每一步的理由。"


def synthetic(n: int, seed: int = 0) -> list[str]:
    """``n`` prompts: distinct ones, then copies changed a little (see the module docstring), shuffled."""
    rng = random.Random(seed)
    distinct = [
        rng.choice(TEMPLATES).format(
            t=rng.choice(TOPICS), n=rng.randint(2, 9), x="".join(rng.choices(CHARS, k=rng.randint(12, 60)))
        )
        for _ in range(int(n * 0.85))
    ]
    out = list(distinct)
    for _ in range(int(n * 0.10)):  # exact after normalisation
        text = rng.choice(distinct)
        out.append(text.replace("，", ",").replace("。", " . ").replace("请", "請"))
    while len(out) < n:  # near: one character changed
        text = rng.choice(distinct)
        i = rng.randrange(len(text))
        out.append(text[:i] + rng.choice(CHARS) + text[i + 1 :])
    rng.shuffle(out)
    return out


def templated(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct prompts of one template, only their numbers differ (see the module docstring)."""
    rng = random.Random(seed)
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < n:
        pairs.add((rng.randint(10, 999), rng.randint(10, 999)))
    return [TEMPLATE.format(a=a, b=b) for a, b in sorted(pairs, key=lambda _: rng.random())]


def write(path: Path, prompts: list[str], prefix: str) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, text in enumerate(prompts):
            row = {"id": f"{prefix}{i}", "input": text, "responses": [{"id": "r1", "content": "回答"}]}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def baseline(source: str, output: str) -> None:
    """The plain exact-hash dedup: the first record of each raw prompt text."""
    seen: set[bytes] = set()
    with open(source, encoding="utf-8") as f, open(output, "w", encoding="utf-8") as out:
        for line in f:
            prompt = json.loads(line)["input"]
            key = hashlib.blake2b(json.dumps(prompt, ensure_ascii=False).encode(), digest_size=16).digest()
            if key not in seen:
                seen.add(key)
                out.write(line)


def timed(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of a subprocess."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({status})")
    return seconds, usage.ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    if sys.argv[1:2] == ["--baseline"]:
        baseline(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--pools", nargs="+", choices=["varied", "templated"], default=["varied", "templated"])
    args = parser.parse_args()
    print("| pool | prompts | MB | step | seconds | peak RSS MiB | kept |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        pools = [(f"{scale}×", synthetic(PAPER * scale)) for scale in args.scales] if "varied" in args.pools else []
        if "templated" in args.pools:
            pools.append(("templated", templated(TEMPLATED)))
        for name, pool in pools:
            run_pool(d, name, pool, args.workers)


def run_pool(d: Path, name: str, pool: list[str], workers: int) -> None:
    """Time the baseline, ``dedup`` and ``decontaminate`` on one pool; print their rows."""
    cheems = [sys.executable, "-m", "cheems"]
    source, bench = d / "pool.jsonl", d / "bench.jsonl"
    write(source, pool, "p")
    rng = random.Random(1)
    write(bench, rng.sample(pool, BENCH // 3) + synthetic(BENCH - BENCH // 3, seed=2), "b")
    mb = source.stat().st_size / 1e6
    options = ["--workers", str(workers)]
    runs = {
        "exact-hash baseline": [sys.executable, __file__, "--baseline", str(source), str(d / "base.jsonl")],
        "cheems dedup": [*cheems, "dedup", str(source), "-o", str(d / "dedup.jsonl"), *options],
        "cheems decontaminate": [
            *cheems,
            *("decontaminate", str(source), "--bench", str(bench), "-o", str(d / "clean.jsonl"), *options),
        ],
    }
    outputs = {"exact-hash baseline": "base.jsonl", "cheems dedup": "dedup.jsonl"}
    outputs["cheems decontaminate"] = "clean.jsonl"
    for step, cmd in runs.items():
        seconds, rss = timed(cmd)
        kept = sum(1 for _ in (d / outputs[step]).open(encoding="utf-8"))
        print(f"| {name} | {len(pool):,} | {mb:.0f} | {step} | {seconds:.1f} | {rss:.0f} | {kept:,} |", flush=True)


if __name__ == "__main__":
    main()
