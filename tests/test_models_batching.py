"""Scoring batches by a token budget: the same fp32 scores whatever the batch composition, the budget, the row cap
and the order; bf16 weights where the CPU computes bf16 natively, within the batch_invariance tolerance."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from cheems.evaluate.checks import BATCH_TOLERANCE
from cheems.models import hf, load_scorer
from cheems.runtime import cpu_has_native_bf16, inference_precision
from tiny_models import build_tiny_bert, build_tiny_qwen2

ITEMS = [
    ("请详细介绍一下长城的历史。" * 12, "长城始建于春秋战国时期，" * 40),  # truncated at 128 tokens
    ("请用一句话解释什么是奖励模型。", "奖励模型给回答打分，分数越高说明回答越符合人类偏好。"),
    ("你好", "你好！"),
    ("中国的首都是哪里？", "北京。"),
    ("这道数学题等于几？请一步一步地计算。", "先算括号里的，再算乘法，" * 5 + "答案是四十二。"),
    ("The Great Wall is worth a visit in spring.", "A reward model ranks the responses by quality."),
    ("你好", "你好，请问你是谁？我是代码助手。"),
]


@pytest.fixture(scope="module", params=["bert", "qwen"])
def model_dir(request, tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    root = tmp_path_factory.mktemp(request.param)
    return build_tiny_bert(root) if request.param == "bert" else build_tiny_qwen2(root, qwen2_tokenizer_dir)


def scores_with(model_dir: Path, monkeypatch, budget: int, batch_size: int, order: list[int]) -> list[float]:
    """Scores of ITEMS (in their order) scored in ``order`` with a CPU token budget and a row cap."""
    monkeypatch.setattr(hf, "CPU_BATCH_TOKENS", budget)
    scorer = load_scorer(str(model_dir), batch_size=batch_size, max_length=128, dtype="fp32", shared_prefix=False)
    got = scorer.score([ITEMS[i] for i in order])
    return [got[order.index(i)] for i in range(len(ITEMS))]


def test_fp32_scores_do_not_depend_on_the_batches(model_dir, monkeypatch):
    alone = scores_with(model_dir, monkeypatch, 1, 1, list(range(len(ITEMS))))  # one row per batch
    rng = random.Random(0)
    for budget in (64, 512, 4096, 10**6):
        for batch_size in (1, 3, 16):
            order = rng.sample(range(len(ITEMS)), len(ITEMS))
            assert scores_with(model_dir, monkeypatch, budget, batch_size, order) == pytest.approx(alone, abs=1e-5)


def test_fp32_scores_match_one_unpadded_forward(model_dir, monkeypatch):
    """Rows that fit score as the model does on the tokenizer's own input, one at a time with no padding."""
    monkeypatch.setattr(hf, "CPU_BATCH_TOKENS", 10**6)
    scorer = load_scorer(str(model_dir), max_length=128, dtype="fp32", shared_prefix=False)
    scores = scorer.score(ITEMS[1:])
    for (ids, types), score in zip(scorer.encode(ITEMS[1:]), scores):
        inputs = {"input_ids": torch.tensor([ids])} | ({"token_type_ids": torch.tensor([types])} if types else {})
        model = scorer.model
        with torch.inference_mode():
            if hasattr(model, "score"):  # causal: the head at the last token
                expected = model.score(model.base_model(**inputs)[0][0, -1])[0]
            else:
                expected = model(**inputs).logits[0, 0]
        assert score == pytest.approx(float(expected), abs=1e-5)


def test_inference_precision_rule():
    assert inference_precision("cpu", "fp32") == (torch.float32, None)
    assert inference_precision("cpu", "fp16") == (torch.float32, torch.float16)  # autocast computes fp16 on a CPU
    native = cpu_has_native_bf16()
    assert inference_precision("cpu", "bf16") == ((torch.bfloat16, None) if native else (torch.float32, torch.bfloat16))
    assert inference_precision("cpu", "auto") == ((torch.bfloat16, None) if native else (torch.float32, None))
    assert inference_precision("cuda", "bf16") == (torch.bfloat16, torch.bfloat16)


@pytest.mark.skipif(not cpu_has_native_bf16(), reason="bf16 weights are used only where the CPU computes bf16")
def test_bf16_weights_stay_within_the_batch_invariance_tolerance(model_dir, monkeypatch):
    monkeypatch.setattr(hf, "CPU_BATCH_TOKENS", 10**6)
    fp32 = load_scorer(str(model_dir), max_length=128, dtype="fp32").score(ITEMS)
    bf16 = load_scorer(str(model_dir), max_length=128, dtype="bf16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    batched = bf16.score(ITEMS)
    alone = [bf16.score([item])[0] for item in ITEMS]
    allowed = BATCH_TOLERANCE * max(1.0, *map(abs, fp32))
    assert max(abs(a - b) for a, b in zip(batched, alone)) <= allowed
    assert max(abs(a - b) for a, b in zip(batched, fp32)) <= allowed
