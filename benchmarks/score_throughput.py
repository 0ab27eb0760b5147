"""Scoring throughput: ``cheems score`` (load_scorer + score_records) vs the naive loop a user would write.

Scores every oasst1_zh response with m3e-small as a sequence-classification RM (random head,
fixed seed: fine for throughput) two ways, in the same run, on the same weights and max_length:

- cheems: ``load_scorer(MODEL)`` + ``score_records`` (dtype auto = bf16 autocast where the CPU has
  bf16 units, length-grouped batches, inference mode), with a fresh on-disk cache;
- naive: one response at a time, fp32, ``torch.no_grad()``, tokenizer called per pair.

The two are interleaved in rounds (a shard of prompts each, alternating which goes first) so load
from other processes on a shared machine hits both alike. Also reported: the machine's bf16 and
fp32 matmul speed, bf16 autocast forced on a small sample, and a second, fully cached run.

    python benchmarks/score_throughput.py [--limit N] [--batch-size 16] [--max-length 512]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification

from cheems.data.importers import import_file
from cheems.data.schema import Record
from cheems.models import ScoreCache, load_scorer, score_records
from cheems.models.base import prompt_text
from cheems.runtime import compute_dtype, cpu_has_native_bf16, pick_device

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "oasst1_zh" / "oaast_rm_zh.json"


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def matmul_gflops(dtype: torch.dtype, n: int = 1024, reps: int = 3) -> float:
    """GFLOP/s of n x n matmuls in ``dtype`` (one warm-up, then ``reps`` timed)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e9


def load_records(path: Path, limit: int | None) -> list[Record]:
    """oasst1_zh as records (prompt = instruction(+input), history as chat turns); at most ``limit`` responses."""
    records = import_file(path, "ranked", skip_invalid=True).records  # 6 prompts rank one reply twice
    if limit is None:
        return records
    kept, n = [], 0
    for record in records:
        if n >= limit:
            break
        record = record.model_copy(update={"responses": record.responses[: limit - n]})
        kept.append(record)
        n += len(record.responses)
    return kept


def naive_scores(model, tokenizer, records: list[Record], max_length: int) -> dict[tuple[str, str], tuple[float, int]]:
    """The loop a user would write: one pair at a time, fp32, no batching. -> {key: (score, tokens)}."""
    out = {}
    with torch.no_grad():
        for record in records:
            prompt = prompt_text(record.input)
            for response in record.responses:
                inputs = tokenizer(
                    prompt, response.content, truncation=True, max_length=max_length, return_tensors="pt"
                )
                score = model(**inputs).logits[0, 0].item()
                out[(record.id, response.id)] = (score, inputs["input_ids"].shape[1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, default=DATA, help="oasst1_zh ranked JSON (instruction/input/output/history)"
    )
    parser.add_argument("--model", default="m3e-small", help="model spec for load_scorer")
    parser.add_argument("--limit", type=int, default=None, help="score at most N responses")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=4, help="interleaved cheems/naive rounds")
    parser.add_argument(
        "--bf16-sample", type=int, default=24, help="responses scored with bf16 autocast forced (0: skip)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    load_before = os.getloadavg()[0]
    records = load_records(args.data, args.limit)
    n = sum(len(r.responses) for r in records)
    fp32_gflops, bf16_gflops = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)

    scorer = load_scorer(args.model, batch_size=args.batch_size, max_length=args.max_length)
    items = [(r.input, x.content) for r in records for x in r.responses]
    cheems_tokens = sum(len(ids) for ids, _ in scorer.encode(items))  # real (non-pad) tokens
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the same random head as the scorer's
        naive_model = AutoModelForSequenceClassification.from_pretrained(
            scorer.source.location, num_labels=1, dtype=torch.float32
        ).eval()
    scorer.model  # noqa: B018 - load outside the timings, as the naive model is

    cache = ScoreCache(Path(tempfile.mkdtemp(prefix="cheems-bench-")) / "scores.sqlite")
    shards = [records[i :: args.rounds] for i in range(args.rounds)]
    totals = {"cheems": [0.0, 0.0], "naive": [0.0, 0.0]}  # wall and CPU (process) seconds
    cheems: dict = {}
    naive: dict = {}
    naive_lengths: dict = {}
    for i, shard in enumerate(shards):
        runs = {
            "cheems": lambda: score_records(shard, scorer, cache=cache, progress=False),
            "naive": lambda: naive_scores(naive_model, scorer.tokenizer, shard, args.max_length),
        }
        for name in ("naive", "cheems") if i % 2 else ("cheems", "naive"):
            wall, cpu = time.perf_counter(), time.process_time()
            result = runs[name]()
            totals[name][0] += time.perf_counter() - wall
            totals[name][1] += time.process_time() - cpu
            if name == "cheems":
                cheems.update(result)
            else:
                naive.update({k: v[0] for k, v in result.items()})
                naive_lengths.update({k: v[1] for k, v in result.items()})
    (cheems_s, cheems_cpu), (naive_s, naive_cpu) = totals["cheems"], totals["naive"]

    start = time.perf_counter()
    cached = score_records(
        records, load_scorer(args.model, batch_size=args.batch_size, max_length=args.max_length), cache=cache
    )
    cached_s = time.perf_counter() - start
    assert cached == cheems

    bf16_row = None
    if args.bf16_sample:
        sample = load_records(args.data, args.bf16_sample)
        bf16 = load_scorer(args.model, batch_size=args.batch_size, max_length=args.max_length, dtype="bf16")
        sample_items = [(r.input, x.content) for r in sample for x in r.responses]
        sample_tokens = sum(len(ids) for ids, _ in bf16.encode(sample_items))
        bf16.model  # noqa: B018 - load outside the timing
        start = time.perf_counter()
        score_records(sample, bf16, progress=False)
        bf16_row = (len(sample_items), sample_tokens / (time.perf_counter() - start))

    untruncated = [abs(cheems[k] - naive[k]) for k, length in naive_lengths.items() if length < args.max_length]
    naive_tokens = sum(naive_lengths.values())
    device = pick_device(None)
    amp = compute_dtype(device, "auto")
    print(
        f"machine: {os.cpu_count()} cores ({cpu_model()}), torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, "
        f"native bf16: {cpu_has_native_bf16()}"
    )
    print(
        f"data: {len(records)} prompts, {n} responses; model {args.model}, max_length {args.max_length}, "
        f"batch size {args.batch_size}, device {device}, dtype auto -> {amp or torch.float32}\n"
    )
    print(f"load average (1 min) before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f}\n")
    print("| run | responses | tokens | wall s | CPU s | tokens/s (wall) | responses/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| naive loop (batch 1, fp32) | {n} | {naive_tokens} | {naive_s:.1f} | {naive_cpu:.1f} | "
        f"{naive_tokens / naive_s:,.0f} | {n / naive_s:.1f} |"
    )
    print(
        f"| cheems score_records (auto dtype, length-grouped) | {n} | {cheems_tokens} | {cheems_s:.1f} | "
        f"{cheems_cpu:.1f} | "
        f"{cheems_tokens / cheems_s:,.0f} | {n / cheems_s:.1f} |"
    )
    if bf16_row:
        print(f"| cheems, bf16 autocast forced (sample) | {bf16_row[0]} | | | | {bf16_row[1]:,.0f} | |")
    print(f"| cheems, second run (all cache hits) | {n} | | {cached_s:.3f} | | | {n / cached_s:,.0f} |")
    print()
    print(
        f"- speedup (tokens/s, cheems / naive): **{(cheems_tokens / cheems_s) / (naive_tokens / naive_s):.2f}x** wall, "
        f"{(cheems_tokens / cheems_cpu) / (naive_tokens / naive_cpu):.2f}x per CPU second (target >= 2.5x)"
    )
    print(f"- cached second run: **{cached_s * 10_000 / n:.3f} s per 10,000 responses** (target < 1 s)")
    print(
        f"- matmul 1024x1024: fp32 {fp32_gflops:.1f} GFLOP/s, bf16 {bf16_gflops:.1f} GFLOP/s "
        f"(bf16/fp32 = {bf16_gflops / fp32_gflops:.2f})"
    )
    print(
        f"- same scores: max |cheems - naive| = {max(untruncated, default=0):.1e} over the "
        f"{len(untruncated)} responses "
        "neither truncates (truncated ones differ by design: cheems cuts the prompt first)"
    )


if __name__ == "__main__":
    main()
