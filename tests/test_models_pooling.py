"""The pooling rule (cheems.models.pooling) is shared by scoring and training: a mean-pooled folder written by
training scores mean-pooled through ``load_scorer`` (``cheems score``, ``eval --model``, ``bon``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cheems.errors import InputError
from cheems.models import hf, load_scorer
from cheems.models.encoding import collate
from cheems.models.pooling import model_pooling, recorded_pooling
from cheems.train.model import load_reward_model, save_reward_model
from tiny_models import build_tiny_bert, build_tiny_qwen2

ITEMS = [
    ("中国的首都是哪里？", "北京。"),
    ("请用一句话解释什么是奖励模型。", "奖励模型给回答打分，分数越高说明回答越符合人类偏好。"),
    ("你好", "你好！"),
]


@pytest.fixture(scope="module")
def mean_folder(tmp_path_factory) -> Path:
    """A mean-pooled encoder RM saved as training saves it."""
    root = tmp_path_factory.mktemp("mean")
    model, tok = load_reward_model(build_tiny_bert(root / "bert"), pooling="mean")
    save_reward_model(model, tok, root / "rm")
    return root / "rm"


@pytest.mark.parametrize("budget", [512, 10**6])
def test_mean_pooled_folder_scores_as_the_training_forward(mean_folder, monkeypatch, budget):
    monkeypatch.setattr(hf, "CPU_BATCH_TOKENS", budget)
    scorer = load_scorer(str(mean_folder), dtype="fp32")
    scores = scorer.score(ITEMS)
    model, _ = load_reward_model(mean_folder)
    assert model.pooling == "mean"
    rows = scorer.encode(ITEMS)
    inputs = collate(rows, scorer.tokenizer.pad_token_id, "cpu")
    with torch.inference_mode():
        trained = model.eval()(**inputs).tolist()
        cls = model.hf(**inputs).logits[:, 0].tolist()
    assert scores == pytest.approx(trained, abs=1e-5)
    assert max(abs(a - b) for a, b in zip(scores, cls)) > 1e-3  # the [CLS] reading (the old bug) differs


def test_pooling_is_read_from_the_folder(mean_folder, tmp_path, qwen2_tokenizer_dir):
    assert recorded_pooling({"cheems_pooling": "mean"}) == "mean" and recorded_pooling({}) == "auto"
    assert model_pooling(load_scorer(str(mean_folder)).model) == "mean"
    assert model_pooling(load_scorer(str(build_tiny_bert(tmp_path / "bert"))).model) == "cls"
    qwen = build_tiny_qwen2(tmp_path / "qwen", qwen2_tokenizer_dir)
    model = load_scorer(str(qwen)).model
    assert model_pooling(model) == "last"
    model.config.cheems_pooling = "mean"  # a causal LM cannot be mean-pooled: one clear error
    with pytest.raises(InputError, match="encoders"):
        model_pooling(model)
