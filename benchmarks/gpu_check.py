"""The figures of the GPU check: a short ``cheems train`` and ``cheems score`` in bf16 on a random Qwen2 of
Qwen2-0.5B's shapes (hidden 896, 24 layers, 14 heads, 2 KV heads, intermediate 4864, 151,936 vocabulary rows:
494M parameters), with tokens/s and peak GPU memory; then a generative judge from the same rankings (``cheems
export judge-sft``, ``cheems train-judge`` on a random Qwen2 causal LM of the same shapes, ``cheems eval
--judge-model DIR --backend hf --both-orders``) and the joint objective (``cheems train --lm-weight 0.01`` from
that causal LM); then a summary block to paste into BENCHMARKS.md. A failed judge or joint step is reported in the
summary (and the exit status) without losing the other figures.

    python benchmarks/gpu_check.py --out gpu-check [--tests gpu-check/tests.xml]

``benchmarks/gpu_check.sh`` runs it after the ``gpu`` tests, whose JUnit XML (``--tests``) goes into the
summary. The model is random (a reward model's speed and memory do not depend on its weights); its
tokenizer is a small byte-level BPE trained here, so nothing is downloaded. The data is CheemsBench-shaped:
prompts of about 256 tokens with 4 responses of 100-250 tokens.

``CHEEMS_GPU_CHECK_DEVICE=cpu`` runs the same steps on a 2-layer model on the CPU: a smoke run of this
script (the figures mean nothing).
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import platform
import random
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, cast

import torch

DEVICE = os.environ.get("CHEEMS_GPU_CHECK_DEVICE", "cuda")

QWEN2_05B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,  # Qwen2's padded vocabulary: the embedding is a quarter of the parameters
}
SMOKE = {**QWEN2_05B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}

# Prompts to train on and to score, responses per prompt, prompt tokens, response tokens (low, high): 192 x 4
# rows of ~450 tokens to train on (under a minute on an H100 at 20k tokens/s), 256 x 4 to score (enough
# that loading the model is not most of the command's time)
GPU_SIZES = {"train": 192, "score": 256, "responses": 4, "prompt": 256, "response": (100, 250)}
SMOKE_SIZES = {"train": 6, "score": 4, "responses": 3, "prompt": 24, "response": (8, 16)}
# The judge's records (each gives its ranked pairs in both orders: 48 x 5 x 2 = 480 rows of ~800 tokens) and the
# bench it is evaluated on (16 prompts, both orders, replies of at most 8 tokens: a random model never stops)
JUDGE_SIZES = {"train": 48, "bench": 16}
SMOKE_JUDGE_SIZES = {"train": 3, "bench": 2}
BATCH_SIZE = 16
MAX_LENGTH = 1024

ZH = [
    "长城始建于春秋战国时期",
    "故宫是明清两代的皇宫",
    "建议先去人少的地方",
    "这个问题需要分几步回答",
    "首先要看清题目的条件",
    "然后列出已知的数据",
    "最后检查答案是否合理",
    "北京的秋天最适合旅行",
    "学习编程要多写代码",
    "回答应当准确而且清楚",
    "请用简洁的语言说明原因",
    "这道题的关键在于理解概念",
]
EN = [
    "the answer depends on the context",
    "first read the question carefully",
    "a reward model scores each response",
    "the longer answer is not always better",
    "list the steps before computing",
    "check the result against the data",
]


def texts(rng: random.Random, n: int) -> str:
    """``n`` phrases, mostly Chinese, as one text."""
    parts = [rng.choice(ZH) if rng.random() < 0.8 else rng.choice(EN) for _ in range(n)]
    return "，".join(parts) + "。"


def build_tokenizer(folder: Path) -> Any:
    """The tests' Qwen2-style tokenizer (tests/tiny_models.py: byte-level BPE, Qwen's special tokens and chat
    template), saved in ``folder`` and loaded."""
    from transformers import AutoTokenizer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from tiny_models import build_tiny_tokenizer

    return AutoTokenizer.from_pretrained(build_tiny_tokenizer(folder), model_max_length=MAX_LENGTH)


def build_model(folder: Path, tokenizer: Any, shapes: dict[str, int], device: str, causal: bool = False) -> int:
    """A random Qwen2ForSequenceClassification (one label; ``causal``: a Qwen2ForCausalLM, its head tied to the
    embeddings) of ``shapes`` for ``tokenizer``, saved in ``folder``; returns its parameter count. Built on
    ``device`` (seconds on a GPU), saved in bf16 there (fp32 on a CPU)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification

    from cheems.models.quiet import quiet_libraries

    config = Qwen2Config(
        **shapes,
        num_labels=1,
        tie_word_embeddings=True,  # as Qwen2-0.5B (a classification model has no LM head to tie)
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = (Qwen2ForCausalLM if causal else Qwen2ForSequenceClassification)(config)
    params = sum(p.numel() for p in model.parameters())
    with quiet_libraries():  # no progress bar for one file
        model.to(torch.bfloat16 if device == "cuda" else torch.float32).save_pretrained(folder)
    del model
    return params


def write_records(path: Path, tokenizer: Any, n: int, sizes: dict[str, Any], seed: int) -> None:
    """``n`` CheemsBench-shaped records: a long prompt, ``sizes['responses']`` ranked responses (one tie)."""
    rng = random.Random(seed)
    per_phrase = len(tokenizer.encode(texts(random.Random(-1), 200), add_special_tokens=False)) / 200
    k = sizes["responses"]
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            prompt = texts(rng, round(sizes["prompt"] / per_phrase))
            responses = [
                {"id": f"r{j}", "content": texts(rng, round(rng.randint(*sizes["response"]) / per_phrase))}
                for j in range(k)
            ]
            rank = {f"r{j}": min(j, k - 2) + 1 for j in range(k)}  # the last two tie
            record = {"id": f"p{seed}-{i}", "input": prompt, "responses": responses, "rank": rank}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def forwarded_tokens(model: Path, data: Path) -> int:
    """Tokens of every (prompt, response) of ``data`` as cheems encodes them: what one epoch forwards."""
    from cheems.data.stream import read_records
    from cheems.models.backbones import locate_model
    from cheems.models.encoding import RewardEncoder

    encoder = RewardEncoder(locate_model(str(model)), MAX_LENGTH)
    items = [(r.prompt, resp.content) for r in read_records(data).records for resp in r.responses]
    return sum(len(ids) for ids, _ in encoder.features(items))


def cheems(*args: object) -> float:
    """``cheems ARGS`` through the real entry point in this process (so its peak GPU memory is readable);
    returns the seconds it took."""
    from cheems.cli.main import main

    sys.argv = ["cheems", *map(str, args)]
    start = time.perf_counter()
    try:
        main()
    except SystemExit as e:
        if e.code not in (0, None):
            raise SystemExit(f"gpu_check.py: cheems {args[0]} failed (exit {e.code})") from None
    return time.perf_counter() - start


def measured(run: Any) -> tuple[float, float | None]:
    """(seconds, peak GPU memory in GiB above what was allocated before, None on a CPU) of ``run()``."""
    gc.collect()
    base = 0
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()  # what an earlier command may still hold (it counts in the peak)
    seconds = run()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**30 if DEVICE == "cuda" else None
    return seconds, peak


def test_results(path: Path | None) -> list[tuple[str, str]]:
    """(test, outcome) from pytest's JUnit XML: passed, failed (first line), or skipped (reason)."""
    if path is None or not path.is_file():
        return []
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                message = (found.get("message") or "").splitlines()
                word = {"failure": "FAILED", "error": "ERROR"}.get(tag, "skipped")
                outcome = f"{word}: {message[0][:150]}" if message else word
                break
        rows.append((case.get("name", "?"), outcome))
    return rows


def environment() -> list[str]:
    """The machine and the versions, one line each."""
    import accelerate
    import transformers

    lines = []
    if DEVICE == "cuda":
        props = torch.cuda.get_device_properties(0)
        lines.append(f"device: {props.name} ({props.total_memory / 2**30:.0f} GiB) x {torch.cuda.device_count()}")
        lines.append(f"CUDA {torch.version.cuda}, bf16 supported: {torch.cuda.is_bf16_supported()}")
    else:
        lines.append(f"device: CPU ({platform.processor() or platform.machine()}): smoke run, figures mean nothing")
    versions = f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}"
    versions += f", accelerate {accelerate.__version__}"
    for name in ("peft", "flash_attn"):
        try:
            versions += f", {name} {__import__(name).__version__}"
        except ImportError:
            versions += f", no {name}"
    lines.append(versions)
    try:
        git = ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"]
        commit = subprocess.run(git, capture_output=True, text=True, check=True)
        lines.append(f"cheems commit {commit.stdout.strip()}")
    except (OSError, subprocess.CalledProcessError):
        pass  # a copy of the tree without .git
    return lines


def attempt(name: str, failures: list[str], run: Any) -> list[str]:
    """The summary lines of ``run()``, or one line saying it failed (noted in ``failures``): a failed step loses
    no other step's figures."""
    try:
        return cast("list[str]", run())
    except (SystemExit, Exception) as e:  # any failure of the step is its result
        failures.append(f"{name}: {e}")
        return [f"- {name}: FAILED: {e}"]


def memory_note(gib: float | None) -> str:
    """``, peak memory X GiB`` on a GPU (:func:`measured`'s peak), nothing on a CPU."""
    return "" if gib is None else f", peak memory {gib:.1f} GiB"


def log_rows(folder: Path) -> list[dict[str, str]]:
    """The rows of a run's ``train_log.csv``."""
    with (folder / "train_log.csv").open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def judge_steps(
    work: Path, shapes: dict[str, int], sizes: dict[str, Any], judge_sizes: dict[str, int], device_args: list[str]
) -> list[str]:
    """A generative judge from rankings (export, train-judge, eval as a judge) and the joint BT + LM objective, on
    a random Qwen2 causal LM of ``shapes``: their summary lines."""
    gpu = DEVICE == "cuda"
    lm = work / "qwen2-causal"
    tokenizer = build_tokenizer(lm)
    build_model(lm, tokenizer, shapes, DEVICE, causal=True)
    records, bench = work / "judge-records.jsonl", work / "judge-bench.jsonl"
    write_records(records, tokenizer, judge_sizes["train"], sizes, seed=3)
    write_records(bench, tokenizer, judge_sizes["bench"], sizes, seed=4)

    rows, judge = work / "judge-sft.jsonl", work / "judge"
    cheems("export", "judge-sft", records, "-o", rows, "--eval-prompt")
    n_rows = sum(1 for _ in rows.open(encoding="utf-8"))
    train = ["train-judge", "--model", lm, "--data", rows, "--output", judge, "--epochs", 1, "--lr", "1e-5"]
    train += [*f"--batch-size 8 --max-length {2 * MAX_LENGTH} --overwrite --no-progress".split(), *device_args]
    judge_wall, judge_peak = measured(lambda: cheems(*train))
    log = log_rows(judge)
    tokens, trained = sum(int(r["tokens"]) for r in log), sum(int(r["targets"]) for r in log)
    judge_seconds = float(log[-1]["seconds"])

    report = work / "judge-eval.json"
    ask = ["eval", "--bench", bench, "--judge-model", judge, "--backend", "hf", "--device", DEVICE, "--both-orders"]
    ask += [
        "--max-tokens",
        8,
        "--max-retries",
        0,
        "--cache",
        work / "judge.sqlite",
        "--output-json",
        report,
        "--no-progress",
    ]
    eval_wall, eval_peak = measured(lambda: cheems(*ask))
    verdicts = json.loads(report.read_text(encoding="utf-8"))["judge"]

    joint = work / "rm-joint"
    train_joint = ["train", "--model", lm, "--data", records, "--output", joint, "--lm-weight", "0.01"]
    train_joint += [*f"--batch-size {BATCH_SIZE} --max-length {MAX_LENGTH} --epochs 1 --lr 1e-5".split(), *device_args]
    train_joint += "--overwrite --save-every 0 --no-progress".split()
    joint_wall, joint_peak = measured(lambda: cheems(*train_joint))
    joint_log = log_rows(joint)
    joint_tokens = sum(int(r["tokens"]) for r in joint_log)
    lm_losses = [float(r["lm_loss"]) for r in joint_log if r["lm_loss"]]
    precision = "bf16 autocast over fp32 weights" if gpu else "fp32, CPU"
    return [
        f"- `cheems train-judge` ({precision}, random causal Qwen2 of the same shapes, {n_rows} rows of "
        f"`export judge-sft --eval-prompt` from {judge_sizes['train']} records, 1 epoch, loss "
        f"{float(log[0]['loss']):.4f} -> {float(log[-1]['loss']):.4f}): {tokens / judge_seconds:,.0f} tokens/s in "
        f"the loop ({tokens:,} tokens, {trained:,} of them trained; {judge_seconds:.1f} s, {judge_wall:.1f} s with "
        f"loading){memory_note(judge_peak)}",
        f"- `cheems eval --judge-model DIR --backend hf --both-orders` ({judge_sizes['bench']} prompts, "
        f"{verdicts['questions']} questions, {verdicts['requests']} replies of at most 8 tokens; a random model's: "
        f"{verdicts['parse_failures']} unparseable): {eval_wall:.1f} s with loading{memory_note(eval_peak)}",
        f"- `cheems train --lm-weight 0.01` from the causal LM ({precision}, {joint_tokens:,} tokens, LM loss "
        f"{lm_losses[0]:.3f} -> {lm_losses[-1]:.3f}): {joint_tokens / float(joint_log[-1]['seconds']):,.0f} tokens/s "
        f"in the loop ({joint_wall:.1f} s with loading){memory_note(joint_peak)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-check"), help="Folder for the run (replaced).")
    parser.add_argument("--tests", type=Path, help="The gpu tests' JUnit XML, for the summary.")
    args = parser.parse_args()
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_check.py: no CUDA device (set CHEEMS_GPU_CHECK_DEVICE=cpu for a smoke run)")
    gpu = DEVICE == "cuda"
    shapes, sizes = (QWEN2_05B, GPU_SIZES) if gpu else (SMOKE, SMOKE_SIZES)
    work = args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    model = work / "qwen2-random"
    tokenizer = build_tokenizer(model)
    params = build_model(model, tokenizer, shapes, DEVICE)
    train_data, bench = work / "train.jsonl", work / "bench.jsonl"
    write_records(train_data, tokenizer, sizes["train"], sizes, seed=1)
    write_records(bench, tokenizer, sizes["score"], sizes, seed=2)
    device_args = ["--bf16"] if gpu else ["--no-bf16", "--cpu"]

    rm = work / "rm"
    train_tokens = forwarded_tokens(model, train_data)
    options = f"--batch-size {BATCH_SIZE} --max-length {MAX_LENGTH}".split()
    train = ["train", "--model", model, "--data", train_data, "--output", rm, *options, *device_args]
    train += "--overwrite --epochs 1 --lr 1e-5 --save-every 0 --no-progress".split()
    train_wall, train_peak = measured(lambda: cheems(*train))
    log = log_rows(rm)
    loop_seconds = float(log[-1]["seconds"])
    assert sum(int(r["tokens"]) for r in log) == train_tokens, "the log counts other tokens than the data has"

    scores = work / "scores.jsonl"
    score_tokens = forwarded_tokens(rm, bench)
    score = ["score", "--model", rm, "--bench", bench, "--output", scores, "--device", DEVICE, *options]
    score_wall, score_peak = measured(lambda: cheems(*score, "--no-cache"))
    n_scores = sum(1 for _ in scores.open(encoding="utf-8"))

    judge_sizes = JUDGE_SIZES if gpu else SMOKE_JUDGE_SIZES
    failures: list[str] = []
    judge_lines = attempt("judge", failures, lambda: judge_steps(work, shapes, sizes, judge_sizes, device_args))
    total = time.perf_counter() - started

    rows = sizes["responses"]
    lines = [
        f"### GPU check (`make gpu-check`), {time.strftime('%Y-%m-%d')}",
        "",
        *(f"- {line}" for line in environment()),
        "",
        "| gpu test | result |",
        "| --- | --- |",
        *(f"| {name} | {outcome} |" for name, outcome in test_results(args.tests)),
        "",
        f"Random Qwen2 of {'Qwen2-0.5B' if gpu else 'smoke'} shapes ({params / 1e6:.0f}M parameters), "
        f"byte-level BPE tokenizer built here; {sizes['prompt']}-token prompts with {rows} responses of "
        f"{sizes['response'][0]}-{sizes['response'][1]} tokens; batch {BATCH_SIZE} responses, max length {MAX_LENGTH}.",
        "",
        f"- `cheems train` ({'bf16 autocast over fp32 weights' if gpu else 'fp32, CPU'}, 1 epoch, "
        f"{sizes['train']} prompts = {sizes['train'] * rows} responses, {train_tokens:,} tokens "
        f"({train_tokens / (sizes['train'] * rows):.0f} per response with its prompt), loss "
        f"{float(log[0]['loss']):.4f} -> {float(log[-1]['loss']):.4f}): {train_tokens / loop_seconds:,.0f} tokens/s "
        f"in the training loop (one short epoch, warm-up included: {loop_seconds:.1f} s; {train_wall:.1f} s with "
        f"loading){memory_note(train_peak)}",
        f"- `cheems score` ({'bf16 weights' if gpu else 'fp32, CPU'}, shared prompt prefix, {n_scores} responses, "
        f"{score_tokens:,} tokens): {score_tokens / score_wall:,.0f} tokens/s over the whole command "
        f"({score_wall:.1f} s, loading included){memory_note(score_peak)}",
        *judge_lines,
        f"- the whole check: {total:.0f} s after the tests",
    ]
    summary = "\n".join(lines)
    (args.out / "summary.md").write_text(summary + "\n", encoding="utf-8")
    print("\n" + summary)
    if failures:
        raise SystemExit(f"gpu_check.py: failed: {'; '.join(failures)}")


if __name__ == "__main__":
    main()
