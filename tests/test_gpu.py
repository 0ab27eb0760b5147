"""The causal path on a GPU: bf16 autocast over fp32 weights, shared-prefix scoring, the attention backends,
bf16 batch-size invariance and a 2-process DDP step, on tiny random Qwen2 reward models.

Marked ``gpu``; ``benchmarks/gpu_check.sh`` runs them (``pytest -m gpu tests/test_gpu.py``). Each skips with
the reason "no CUDA device" on a machine without one. ``CHEEMS_GPU_CHECK_DEVICE=cpu`` runs the same checks on
the CPU (what the GPU check's smoke run does). The normal suite's 2-process CPU run (gloo) is in
test_train_trainer.py (``accelerate launch``).

Tolerances (why each is what it is):
- fp32: :data:`FP32_TOL` (the same arithmetic in another order; TF32 stays off for matmuls by default).
- bf16: :data:`BF16_TOL` on rewards within +-0.3 (bf16 keeps 8 bits of mantissa, ~0.4% per rounding; these
  2-layer models differed by at most 1.2e-3 between fp32 and bf16 autocast, and 1e-3 between batch sizes, on a
  CPU); :data:`LOSS_TOL` on the loss (3e-4 there).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
import torch

from cheems.models import load_scorer
from cheems.models.hf import batched_rewards
from cheems.runtime import autocast
from cheems.train.forward import forward_rewards
from cheems.train.loss import listwise_bt_loss
from cheems.train.model import RewardModel

DEVICE = os.environ.get("CHEEMS_GPU_CHECK_DEVICE", "cuda")
"""Where the ``gpu`` tests run: ``cuda`` (the default) or ``cpu`` (a smoke run of the same code on a CPU)."""

FP32_TOL = {"rtol": 1e-4, "atol": 1e-4}
BF16_TOL = {"rtol": 2e-2, "atol": 1e-2}
LOSS_TOL = 5e-3

gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="no CUDA device")

VOCAB, PAD = 512, 0
LENGTHS = [5, 17, 33, 64, 9, 40, 23, 12, 48, 7, 30, 19, 56, 11, 26, 38]


def token_rows(lengths: list[int], seed: int = 0) -> list[tuple[list[int], None]]:
    """Random token ids (never the pad id) of the given lengths, as encoded rows."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(1, VOCAB, (n,), generator=g).tolist(), None) for n in lengths]


ROWS = token_rows(LENGTHS)
# Two prompt groups of 4 responses (rows 0-3, 4-7): the first response of each beats the others, one tie.
GROUPS = [(ROWS[0:4], [(0, 1), (0, 2), (0, 3), (1, 3)]), (ROWS[4:8], [(0, 1), (0, 2), (0, 3), (2, 3)])]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    """A random 2-layer Qwen2ForSequenceClassification (one label, no tokenizer: the tests feed token ids)."""
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    from tiny_models import TINY

    config = Qwen2Config(
        vocab_size=VOCAB,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_labels=1,
        pad_token_id=PAD,
        tie_word_embeddings=False,
        **TINY,
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("qwen2-ids")
    Qwen2ForSequenceClassification(config).save_pretrained(folder)
    return folder


def reward_model(folder: Path, device: str, dtype: torch.dtype = torch.float32, attn: str = "sdpa") -> RewardModel:
    """The folder's model as cheems trains it (last-token pooling), in eval mode (no dropout) on ``device``."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=dtype, attn_implementation=attn)
    return RewardModel(model, "last").to(device).eval()


def step(model: RewardModel, device: str, amp: torch.dtype | None, groups=GROUPS) -> tuple[torch.Tensor, ...]:
    """One listwise training step over ``groups`` (rewards under ``amp`` autocast, fp32 loss, AdamW):
    the rewards, the loss and the flat gradient before the update."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rows = [row for group, _ in groups for row in group]
    offsets = [sum(len(g) for g, _ in groups[:i]) for i in range(len(groups))]
    pairs = torch.tensor([(o + w, o + l) for o, (_, ps) in zip(offsets, groups) for w, l in ps])
    with autocast(device, amp):
        rewards = forward_rewards(model, rows, PAD, device, 0)
    loss, _ = listwise_bt_loss(rewards, pairs)
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()]).detach().cpu()
    optimizer.step()
    return rewards.detach().cpu(), loss.detach().cpu(), grads


# ---------------------------------------------------------------- precision


@gpu
@needs_cuda
def test_bf16_autocast_step_keeps_fp32_master_weights(tiny_folder):
    """The trainer's precision (accelerate's bf16 = torch.autocast over fp32 parameters): the step updates
    fp32 weights, its loss is finite and within LOSS_TOL of the fp32 step's, its rewards within BF16_TOL."""
    fp32 = step(reward_model(tiny_folder, DEVICE), DEVICE, None)
    model = reward_model(tiny_folder, DEVICE)
    before = [p.detach().clone() for p in model.parameters()]
    rewards, loss, grads = step(model, DEVICE, torch.bfloat16)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))  # the step moved the weights
    assert rewards.dtype == torch.float32 and torch.isfinite(loss) and torch.isfinite(grads).all()
    assert not torch.equal(rewards, fp32[0])  # autocast did compute in bf16
    torch.testing.assert_close(rewards, fp32[0], **BF16_TOL)
    assert abs(loss.item() - fp32[1].item()) <= LOSS_TOL


@gpu
@needs_cuda
def test_bf16_scores_do_not_depend_on_the_batch_size(tiny_folder):
    """bf16 weights (the scorer's precision on a GPU): 16 responses scored one at a time and 8 at a time
    (right-padded to each batch's longest) agree within BF16_TOL."""
    model = reward_model(tiny_folder, DEVICE, torch.bfloat16)
    with torch.inference_mode():
        ones = batched_rewards(lambda x: model(**x), ROWS, [[i] for i in range(len(ROWS))], PAD, DEVICE)
        eights = batched_rewards(lambda x: model(**x), ROWS, [list(range(8)), list(range(8, 16))], PAD, DEVICE)
    torch.testing.assert_close(torch.tensor(eights), torch.tensor(ones), **BF16_TOL)


# ---------------------------------------------------------------- attention backends


def backend_available(attn: str) -> str | None:
    """Why ``attn`` cannot run on :data:`DEVICE` here, or None."""
    if attn == "flash_attention_2":
        if DEVICE != "cuda":
            return "flash-attention runs on CUDA only"
        if importlib.util.find_spec("flash_attn") is None:
            return "flash-attn is not installed"
    if attn == "flex_attention":
        if DEVICE != "cuda":
            return "flex attention is checked on CUDA only (on a CPU it compiles with a C++ toolchain)"
        if not any(shutil.which(cc) for cc in (os.environ.get("CC") or "cc", "gcc", "clang")):
            return "flex attention compiles Triton kernels, whose launcher needs a C compiler (none on PATH)"
    return None


@gpu
@needs_cuda
@pytest.mark.parametrize("attn", ["eager", "sdpa", "flex_attention", "flash_attention_2"])
def test_attention_backends_give_the_same_rewards(tiny_folder, attn):
    """Each attention implementation transformers offers, in bf16 on a right-padded batch, gives the rewards
    of fp32 eager attention within BF16_TOL: padding is masked the same way by every backend."""
    if reason := backend_available(attn):
        pytest.skip(reason)
    reference = reward_model(tiny_folder, DEVICE, attn="eager")
    model = reward_model(tiny_folder, DEVICE, torch.bfloat16, attn)
    batches = [list(range(8)), list(range(8, 16))]
    with torch.inference_mode():
        want = batched_rewards(lambda x: reference(**x), ROWS, batches, PAD, DEVICE)
        got = batched_rewards(lambda x: model(**x), ROWS, batches, PAD, DEVICE)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), **BF16_TOL)


# ---------------------------------------------------------------- shared-prefix scoring

PROMPT = "请比较长城和故宫的历史、建筑风格与文化意义，并说明你更推荐游客先去哪里。"
RESPONSES = ["长城始建于春秋战国时期，" * 4 + "建议先去长城。", "故宫是明清两代的皇宫。" * 3, "都值得一去。"]
HISTORY = [
    {"role": "system", "content": "你是一位耐心的旅行顾问。"},
    {"role": "user", "content": "我下个月去北京，玩五天。"},
    {"role": "assistant", "content": "好的，五天可以看很多地方。"},
    {"role": "user", "content": "那第一天去哪里？"},
]


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_shared_prefix_scores_equal_plain_scores(tmp_path, qwen2_tokenizer_dir, dtype):
    """``cheems score``'s scorer on the device: each prompt's KV cache once (models/prefix.py) gives the plain
    scores within FP32_TOL in fp32 and BF16_TOL in bf16 (bf16 weights, as the scorer keeps them on a GPU)."""
    from tiny_models import build_tiny_qwen2

    scorer = load_scorer(str(build_tiny_qwen2(tmp_path / "qwen", qwen2_tokenizer_dir)), device=DEVICE, dtype=dtype)
    items = [(PROMPT, r) for r in RESPONSES] + [(HISTORY, r) for r in ("第一天去故宫。", "先去长城吧。")]
    scorer.shared_prefix = False
    plain = scorer.score(items)
    scorer.shared_prefix = True
    shared = scorer.score(items)
    assert scorer.prefix_counts["shared"] == len(items)  # both prompts ran from their cache
    torch.testing.assert_close(torch.tensor(shared), torch.tensor(plain), **(FP32_TOL if dtype == "fp32" else BF16_TOL))


@gpu
@needs_cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("attn", ["sdpa", "eager", "flex_attention"])
def test_packed_rewards_and_gradients_equal_the_padded_forward(tiny_folder, attn, precision):
    """Shared-prompt packing on the device (train/packing.py): two prompts of 64 and 48 ids with 4 responses
    each, packed into one row, give the padded forward's rewards and gradients (fp32: FP32_TOL; bf16 autocast:
    BF16_TOL), with each attention implementation packed_inputs supports."""
    from cheems.train.packing import packed_rewards

    if reason := backend_available(attn):
        pytest.skip(reason)
    amp = torch.bfloat16 if precision == "bf16" else None
    rows = [(ROWS[3][0] + ids, None) for ids, _ in ROWS[:4]] + [(ROWS[8][0] + ids, None) for ids, _ in ROWS[4:8]]
    keys = [0] * 4 + [1] * 4
    results = []
    for packed in (False, True):
        model = reward_model(tiny_folder, DEVICE, attn=attn)
        with autocast(DEVICE, amp):
            if packed:
                rewards = packed_rewards(model, rows, keys, PAD, DEVICE, 4096, attn)
            else:
                rewards = forward_rewards(model, rows, PAD, DEVICE, 0)
        (rewards * torch.arange(1.0, len(rows) + 1, device=rewards.device)).sum().backward()  # order-sensitive
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        results.append((rewards.detach().cpu(), grads.cpu()))
    (want, want_grads), (got, got_grads) = results
    torch.testing.assert_close(got, want, **(BF16_TOL if amp else FP32_TOL))
    if amp:  # bf16 gradients element by element are noise-level numbers: compare the whole vector (2%)
        assert torch.linalg.vector_norm(got_grads - want_grads) <= 0.02 * torch.linalg.vector_norm(want_grads)
    else:
        torch.testing.assert_close(got_grads, want_grads, rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------- data parallel


def _ddp_worker(rank: int, world: int, folder: str, device_kind: str, init: str, out: str) -> None:
    """One DDP process: the tiny model, its share of the groups, forward, loss, backward; saves its gradient.

    nccl where every process has its own GPU; gloo otherwise (the CPU, or both processes on one GPU).
    """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    gpus = torch.cuda.device_count() if device_kind == "cuda" else 0
    backend = "nccl" if gpus >= world else "gloo"
    device = f"cuda:{rank % gpus}" if gpus else "cpu"
    if gpus:
        torch.cuda.set_device(device)
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"file://{init}", rank=rank, world_size=world)
    try:
        model = reward_model(Path(folder), device)
        ddp = DistributedDataParallel(model, device_ids=[device] if gpus else None)
        _, _, grads = step(ddp, device, None, GROUPS[rank::world])
        torch.save(grads, Path(out) / f"grads-{rank}.pt")
    finally:
        dist.destroy_process_group()


def ddp_step_matches_one_process(folder: Path, device: str, tmp_path: Path) -> None:
    """2 DDP processes, one prompt group each: both end with the mean of the two groups' gradients, which one
    process computes group by group (the same fp32 arithmetic: FP32_TOL)."""
    import torch.multiprocessing as mp

    # spawned, not forked: CUDA cannot be forked, and a forked child can hang on the parent's thread-pool locks
    mp.spawn(_ddp_worker, args=(2, str(folder), device, str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    dev = "cuda:0" if device == "cuda" else "cpu"
    want = sum(step(reward_model(folder, dev), dev, None, [group])[2] for group in GROUPS) / 2
    for rank in range(2):
        torch.testing.assert_close(torch.load(tmp_path / f"grads-{rank}.pt"), want, **FP32_TOL)


# ---------------------------------------------------------------- issue 34: the judge's and the joint LM loss, packed
JUDGE_CHATS = [
    [
        {"role": "system", "content": "你是一位公正的评审。"},
        {"role": "user", "content": f"问题：{q}\n回答A：{a}\n回答B：{b}\n哪个更好？"},
        {"role": "assistant", "content": verdict},
    ]
    for q, a, b, verdict in [
        ("长城有多长？", "两万多公里。", "不知道。", "[[A]]"),
        ("故宫建于哪个朝代？", "清朝。", "明朝永乐年间。", "[[B]]"),
        ("北京的秋天怎么样？", "天高气爽，很适合旅行。", "冷。", "[[A]]"),
        ("一加一等于几？", "三。", "二。", "[[B]]"),
    ]
]


@gpu
@needs_cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("attn", ["sdpa", "flex_attention"])
def test_packed_judge_rows_give_the_padded_loss(tmp_path, qwen2_tokenizer_dir, attn, precision):
    """``cheems train-judge``'s packed batch (rows side by side, each attending to itself, positions restarting)
    gives the loss of the padded batch on the device, with each attention the packed path may use."""
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cheems.train.judge_data import encode_rows, packed_batch, padded_batch, read_judge_rows, token_loss
    from tiny_models import build_tiny_qwen2

    if reason := backend_available(attn):
        pytest.skip(reason)
    folder = build_tiny_qwen2(tmp_path / "lm", qwen2_tokenizer_dir, causal_lm=True)
    data = tmp_path / "judge.jsonl"
    data.write_text("".join(json.dumps({"messages": m}, ensure_ascii=False) + "\n" for m in JUDGE_CHATS), "utf-8")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attn).to(DEVICE).eval()
    rows, _ = encode_rows(tokenizer, read_judge_rows([str(data)]), 4096, "drop")
    budget = sum(len(r.ids) for r in rows) // 2 + 1  # two packed sequences for four rows
    losses = []
    with torch.no_grad():
        for batch in (padded_batch(rows, tokenizer.pad_token_id, DEVICE),
                      packed_batch(rows, tokenizer.pad_token_id, DEVICE, budget, attn)):  # fmt: skip
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            losses.append(token_loss(model(**inputs).logits, batch["labels"]))
    (padded, n_padded), (packed, n_packed) = losses
    assert n_padded == n_packed == sum(r.targets for r in rows)
    tol = LOSS_TOL if precision == "bf16" else 1e-4
    assert float(packed) == pytest.approx(float(padded), abs=tol)


@gpu
@needs_cuda
@pytest.mark.parametrize("attn", ["sdpa", "flex_attention"])
def test_lm_weight_packed_gives_the_padded_rewards_and_lm_loss(tmp_path, qwen2_tokenizer_dir, attn):
    """``cheems train --lm-weight``: the packed forward's rewards and next-token loss equal the padded forward's on
    the device (bf16 autocast over fp32 weights, as training runs), the LM head read from the causal checkpoint."""
    from transformers import AutoModelForSequenceClassification

    from cheems.train.forward import forward_rewards_lm
    from cheems.train.lm_objective import load_lm_head
    from cheems.train.packing import packed_rewards_lm
    from tiny_models import build_tiny_qwen2

    if reason := backend_available(attn):
        pytest.skip(reason)
    folder = build_tiny_qwen2(tmp_path / "lm", qwen2_tokenizer_dir, causal_lm=True)
    hf = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1, attn_implementation=attn)
    model = RewardModel(hf, "last", new_head=True)
    model.attach_lm_head(load_lm_head(str(folder), None, model, str(folder), "--lm-weight"))
    model = model.to(DEVICE).eval()
    rows = token_rows(LENGTHS[:8], seed=3)
    starts = [len(ids) // 2 if i % 2 == 0 else None for i, (ids, _) in enumerate(rows)]  # every other row trains
    keys = list(range(len(rows)))  # no shared prompts: each row a unit of its own
    with torch.no_grad(), autocast(DEVICE, torch.bfloat16 if DEVICE == "cuda" else None):
        padded = forward_rewards_lm(model, rows, starts, PAD, DEVICE, 0)
        packed = packed_rewards_lm(model, rows, keys, starts, PAD, DEVICE, 128, attn)
    assert padded[2] == packed[2] == sum(len(ids) - s for (ids, _), s in zip(rows, starts) if s is not None)
    torch.testing.assert_close(packed[0].float(), padded[0].float(), **BF16_TOL)
    assert float(packed[1]) / packed[2] == pytest.approx(float(padded[1]) / padded[2], abs=LOSS_TOL)


@gpu
@needs_cuda
def test_two_process_ddp_step(tiny_folder, tmp_path):
    """nccl with a GPU per process; on a one-GPU machine both processes share it over gloo."""
    ddp_step_matches_one_process(tiny_folder, DEVICE, tmp_path)


# ---------------------------------------------------------------- the check's script without a GPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here: the script would run the whole check")
def test_gpu_check_without_a_cuda_device_stops_with_one_line():
    """``bash benchmarks/gpu_check.sh`` on a machine without CUDA: one line saying so, exit 1, nothing installed
    or written (it stops before pip and before its results folder)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "CHEEMS_GPU_CHECK_DEVICE"}
    results = repo / "gpu-check"  # a smoke run may have left one: it must stay as it was
    before = results.stat().st_mtime_ns if results.exists() else None
    run = subprocess.run(
        ["bash", str(repo / "benchmarks" / "gpu_check.sh")],
        capture_output=True,
        text=True,
        env={**env, "PYTHON": sys.executable},
        timeout=120,
    )
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.startswith("gpu_check.sh: no CUDA device (torch ") and run.stderr.count("\n") == 1
    assert (results.stat().st_mtime_ns if results.exists() else None) == before
