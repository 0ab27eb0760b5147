"""Scoring throughput: ``cheems score`` (load_scorer + score_records) beside the loops a user would write.

Scores oasst1_zh responses (or a bench file, ``--bench``) with m3e-small as a sequence-classification RM
(random head, fixed seed: fine for throughput), four ways, each a whole process (start-up, imports, model
load and scoring, as a user runs it), the four alternated in rounds so load from other processes hits all alike:

- cheems: ``load_scorer(MODEL)`` + ``score_records`` (dtype auto: bf16 weights where the CPU computes bf16,
  token-budget batches), no cache;
- per-response: one (prompt, response) at a time, fp32, ``torch.no_grad()``;
- batched fp32: length-sorted, 32 pairs per batch, the tokenizer pads;
- batched bf16: the same under bf16 autocast (the ten-line loop of issue 33).

Also measured in the same run: 2-thread matmul GFLOP/s in fp32 and bf16, and from them the matmul limit: the
forward's FLOPs (from the model's shape and the real tokens) at the best matmul speed (measured before and after
the runs, the better kept). Each run's fraction of
that limit is printed, for the whole process and for the scoring alone (timed from the end of the model
load). ``--budgets 512,4096,8192`` adds cheems at those CPU token budgets (``CPU_BATCH_TOKENS``).

    python benchmarks/score_throughput.py [--quick] [--limit N] [--rounds 2] [--threads 2] [--budgets ...]
    python benchmarks/score_throughput.py --bench BENCH.jsonl   # e.g. the 1,200 hidden-bench responses
    python benchmarks/score_throughput.py --in-process --limit 60 --rounds 4 --budgets 512,4096,8192
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "oasst1_zh" / "oaast_rm_zh.json"
RUNS = ("cheems", "per-response", "batched-fp32", "batched-bf16")
LOOP_BATCH = 32
LOADED: list[float] = []  # when the worker's model finished loading: the scoring is timed from there


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def matmul_gflops(dtype, n: int = 1024, reps: int = 5) -> float:
    """GFLOP/s of n x n matmuls in ``dtype`` (one warm-up, then ``reps`` timed; the best of 3)."""
    import torch

    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 * reps / best / 1e9


def load_records(args: argparse.Namespace) -> list:
    """The records to score: ``--bench`` (a cheems bench) or oasst1_zh; at most ``--limit`` responses."""
    from cheems.data.importers import import_file

    if args.bench:
        from cheems.evaluate import load_bench

        records = [r for rs in load_bench([args.bench], require_pairs=False).values() for r in rs]
    else:
        records = import_file(args.data, "ranked", skip_invalid=True).records  # 6 prompts rank one reply twice
    if args.limit is None:
        return records
    kept, n = [], 0
    for record in records:
        if n >= args.limit:
            break
        kept.append(record.model_copy(update={"responses": record.responses[: args.limit - n]}))
        n += len(kept[-1].responses)
    return kept


# ---------------------------------------------------------------- one run, in its own process


def loop_model(args: argparse.Namespace) -> tuple:
    """(tokenizer, model) as a user loads them: fp32 weights, the same random head as cheems' scorer."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from cheems.models.backbones import locate_model

    location = locate_model(args.model).location
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(location, num_labels=1, dtype=torch.float32).eval()
    return AutoTokenizer.from_pretrained(location), model


def loop_scores(args: argparse.Namespace, records: list, name: str, loaded: tuple | None = None) -> dict[str, float]:
    """The loops a user writes: per-response fp32, or length-sorted batches of 32 in fp32 or bf16 autocast."""
    import torch

    from cheems.models.base import prompt_text

    tokenizer, model = loaded or loop_model(args)
    LOADED.append(time.perf_counter())
    pairs = [(f"{r.id}/{x.id}", prompt_text(r.input), x.content) for r in records for x in r.responses]
    size = 1 if name == "per-response" else LOOP_BATCH
    if size > 1:
        pairs.sort(key=lambda p: len(p[1]) + len(p[2]), reverse=True)  # by characters, as a user would
    amp = torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "batched-bf16")
    out = {}
    with torch.no_grad(), amp:
        for i in range(0, len(pairs), size):
            chunk = pairs[i : i + size]
            inputs = tokenizer(
                [p for _, p, _ in chunk],
                [r for _, _, r in chunk],
                padding=True,
                truncation=True,
                max_length=args.max_length,
                return_tensors="pt",
            )
            for (key, _, _), value in zip(chunk, model(**inputs).logits[:, 0].float().tolist()):
                out[key] = value
    return out


def in_process(args: argparse.Namespace, records: list, budgets: list[int]) -> None:
    """Scoring alone, models loaded once in this process: cheems at each CPU budget beside the batched bf16 loop,
    alternated for ``--rounds`` rounds; every round's seconds are printed (a shared machine's noise shows)."""
    from cheems.models import hf, load_scorer

    scorer, loaded = load_scorer(args.model, max_length=args.max_length), loop_model(args)
    scorer.model  # noqa: B018 - loaded before the timings
    items = [(r.input, x.content) for r in records for x in r.responses]

    def cheems(budget: int) -> None:
        hf.CPU_BATCH_TOKENS = budget
        scorer.score(items)

    runs = {"batched-bf16 loop": lambda: loop_scores(args, records, "batched-bf16", loaded)}
    runs |= {f"cheems, CPU budget {b}": (lambda b=b: cheems(b)) for b in budgets}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(args.rounds):
        for name in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
            start = time.perf_counter()
            runs[name]()
            seconds[name].append(time.perf_counter() - start)
    print(f"\nin one process, {len(items)} responses, {args.rounds} rounds (scoring seconds per round):\n")
    print("| run | seconds per round | median |\n|---|---|---:|")
    for name, values in seconds.items():
        print(f"| {name} | {', '.join(f'{v:.2f}' for v in values)} | {sorted(values)[len(values) // 2]:.2f} |")


def cheems_scores(args: argparse.Namespace, records: list, budget: int | None) -> dict[str, float]:
    """``cheems score``: load_scorer + score_records, no cache (at a CPU token budget when given)."""
    from cheems.models import hf, load_scorer, score_records

    if budget:
        hf.CPU_BATCH_TOKENS = budget
    scorer = load_scorer(args.model, max_length=args.max_length)
    scorer.model  # noqa: B018 - loaded here so the model load is timed apart from the scoring
    LOADED.append(time.perf_counter())
    return {f"{p}/{r}": s for (p, r), s in score_records(records, scorer, progress=False).items()}


def worker(args: argparse.Namespace) -> None:
    """One run in this process: print {"score_s", "scores"} as one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    records = load_records(args)
    start = time.perf_counter()  # model load, then scoring; the parent times the whole process
    if args.worker == "cheems":
        scores = cheems_scores(args, records, args.budget)
    else:
        scores = loop_scores(args, records, args.worker)
    end = time.perf_counter()
    print(json.dumps({"load_s": LOADED[0] - start, "score_s": end - LOADED[0], "scores": scores}))


# ---------------------------------------------------------------- the parent: runs, limit, table


def run_process(args: argparse.Namespace, name: str, budget: int | None) -> dict:
    """One whole process of run ``name``: its wall time, and what it printed."""
    command = [sys.executable, __file__, "--worker", name, "--threads", str(args.threads)]
    command += ["--model", args.model, "--max-length", str(args.max_length), "--data", str(args.data)]
    command += (["--limit", str(args.limit)] if args.limit else []) + (["--bench", args.bench] if args.bench else [])
    command += ["--budget", str(budget)] if budget else []
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall_s": wall, **result}


def forward_flops(args: argparse.Namespace, records: list) -> tuple[dict[str, int], float]:
    """({response key: its untruncated tokens}, FLOPs of the forward over the real tokens): every layer's
    matmuls plus attention's n^2 terms."""
    from cheems.models import load_scorer

    scorer = load_scorer(args.model, max_length=args.max_length)
    keys = [f"{r.id}/{x.id}" for r in records for x in r.responses]
    encoded = scorer.encoder.encode([(r.input, x.content) for r in records for x in r.responses])
    lengths = [len(e.features[0]) for e in encoded]
    config = scorer.source.config
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    per_token = 2 * layers * (4 * hidden * hidden + 2 * hidden * config["intermediate_size"])
    attention = 4 * layers * hidden * sum(n * n for n in lengths)
    return {k: e.full_length for k, e in zip(keys, encoded)}, per_token * sum(lengths) + attention


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="oasst1_zh ranked JSON (instruction/output/...)")
    parser.add_argument("--bench", default=None, help="a cheems bench file to score instead of --data")
    parser.add_argument("--model", default="m3e-small", help="model spec for load_scorer")
    parser.add_argument("--limit", type=int, default=None, help="score at most N responses")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the alternated runs")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in every run and the matmuls")
    parser.add_argument("--budgets", default="", help="also run cheems at these CPU token budgets (comma list)")
    parser.add_argument("--quick", action="store_true", help="40 responses, 2 rounds: a smoke run")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="scoring alone, models loaded once: cheems at --budgets, the bf16 loop",
    )
    parser.add_argument("--worker", choices=RUNS, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.quick:
        args.limit, args.rounds = args.limit or 40, 2  # two rounds: each run goes first once
    if not args.bench:
        print("hidden bench: no --bench given (the 1,200-response bench is not in ../shared/data): oasst1_zh instead")
    import torch

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    fp32_rate, bf16_rate = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    records = load_records(args)
    full, flops = forward_flops(args, records)
    budgets = [int(b) for b in args.budgets.split(",") if b]
    if args.in_process:
        in_process(args, records, budgets or [4096])
        return
    runs = [(name, None) for name in RUNS] + [("cheems", b) for b in budgets]
    results: dict[tuple[str, int | None], list[dict]] = {run: [] for run in runs}
    for round_ in range(args.rounds):
        for run in runs if round_ % 2 == 0 else runs[::-1]:
            results[run].append(run_process(args, *run))
    # The matmuls again after the runs, the better of the two: a busy moment of a shared machine is no limit.
    fp32_rate, bf16_rate = max(fp32_rate, matmul_gflops(torch.float32)), max(bf16_rate, matmul_gflops(torch.bfloat16))
    print_table(args, results, full, flops, (fp32_rate, bf16_rate), load_before)


def print_table(args, results, full: dict[str, int], flops: float, rates: tuple[float, float], load: float) -> None:
    """The Markdown table and the notes under it (``full``: each response's untruncated tokens)."""
    import torch

    from cheems.runtime import cpu_has_native_bf16

    tokens = sum(min(n, args.max_length) for n in full.values())
    limit_s = flops / (max(rates) * 1e9)
    print(f"machine: {os.cpu_count()} cores ({cpu_model()}), torch {torch.__version__}, {args.threads} threads")
    print(f"native bf16: {cpu_has_native_bf16()}; load average (1 min) before / after: {load:.2f} / ", end="")
    print(f"{os.getloadavg()[0]:.2f}")
    print(f"data: {len(full)} responses, {tokens:,} real tokens, {flops / 1e12:.2f} TFLOP of forward")
    print(f"model {args.model}, max_length {args.max_length}, {args.rounds} round(s), the best round shown\n")
    print("| run | whole process s | model load s | scoring s | tokens/s (scoring) | of the limit (whole / scoring) |")
    print("|---|---:|---:|---:|---:|---:|")
    best = {run: min(rows, key=lambda r: r["wall_s"]) for run, rows in results.items()}
    for (name, budget), row in best.items():
        label = name + (f" (CPU budget {budget} tokens)" if budget else "")
        print(
            f"| {label} | {row['wall_s']:.1f} | {row['load_s']:.1f} | {row['score_s']:.1f} | "
            f"{tokens / row['score_s']:,.0f} | {limit_s / row['wall_s']:.2f} / {limit_s / row['score_s']:.2f} |"
        )
    print(
        f"\n- matmul 1024x1024, {args.threads} threads: fp32 {rates[0]:.0f} GFLOP/s, bf16 {rates[1]:.0f} GFLOP/s; "
        f"the limit = {flops / 1e12:.2f} TFLOP at {max(rates):.0f} GFLOP/s = {limit_s:.1f} s"
    )
    fits = [k for k, n in full.items() if n <= args.max_length]  # truncated rows differ by design
    fp32 = best["batched-fp32", None]["scores"]
    for name in ("cheems", "batched-bf16"):
        other = best[name, None]["scores"]
        gap = max((abs(other[k] - fp32[k]) for k in fits), default=0.0)
        print(f"- max |{name} - batched fp32| over the {len(fits)} responses that fit: {gap:.1e}")
    loop, ours = best["batched-bf16", None], best["cheems", None]
    print(
        f"- cheems vs the batched bf16 loop: **{loop['score_s'] / ours['score_s']:.2f}x** the speed scoring, "
        f"{loop['wall_s'] / ours['wall_s']:.2f}x whole processes"
    )


if __name__ == "__main__":
    main()
