"""Raw-text scoring (``RewardEncoder.encode_texts``, ``HFRewardScorer.score_texts``): a text already rendered by
the caller, as a reward server receives it, tokenised as given and cut from its start."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification

from cheems.models import hf, load_scorer
from tiny_models import build_tiny_bert, build_tiny_qwen2

ITEMS = [
    ("请用一句话解释什么是奖励模型。", "奖励模型给回答打分，分数越高说明回答越符合人类偏好。"),
    ("你好", "你好！"),
    ("请详细介绍一下长城的历史。" * 10, "长城始建于春秋战国时期，" * 30),
]


@pytest.fixture(scope="module")
def qwen(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    return build_tiny_qwen2(tmp_path_factory.mktemp("qwen"), qwen2_tokenizer_dir)


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("bert"))


def rendered(tokenizer, prompt: str, response: str) -> str:
    """The text a policy-side caller sends: the RM's chat template over the conversation, as a string."""
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
    return tokenizer.apply_chat_template(messages, tokenize=False)


@pytest.mark.parametrize("budget", [512, 10**6])
def test_chat_model_scores_the_rendered_text_as_the_item(qwen, monkeypatch, budget):
    monkeypatch.setattr(hf, "CPU_BATCH_TOKENS", budget)  # one row per batch, and all rows in one batch
    scorer = load_scorer(str(qwen), dtype="fp32")
    texts = [rendered(scorer.tokenizer, p, r) for p, r in ITEMS]
    assert scorer.score_texts(texts) == pytest.approx(scorer.score(ITEMS), abs=1e-5)
    assert [scorer.score_texts([t])[0] for t in texts] == pytest.approx(scorer.score(ITEMS), abs=1e-5)
    assert scorer.score_texts([]) == []


def test_chat_text_gets_no_special_tokens_and_is_cut_from_the_start(qwen):
    scorer = load_scorer(str(qwen), max_length=32, dtype="fp32")
    text = rendered(scorer.tokenizer, "很长的问题" * 100, "简短的回答。")
    (enc,) = scorer.encoder.encode_texts([text])
    full = scorer.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert enc.features == (full[-32:], None)
    assert enc.full_length == len(full) > scorer.encoder.limit
    assert enc.response_too_long  # no split known: any cut may reach the response
    assert enc.features == scorer.encode([("很长的问题" * 100, "简短的回答。")])[0]
    (short,) = scorer.encoder.encode_texts(["你好"])
    assert short.features[0] == scorer.tokenizer("你好", add_special_tokens=False)["input_ids"]
    assert not short.response_too_long and short.full_length == len(short.features[0])


def test_pair_encoder_reads_a_text_as_one_segment_with_its_special_tokens(bert):
    scorer = load_scorer(str(bert), dtype="fp32")
    tok = scorer.tokenizer
    (enc,) = scorer.encoder.encode_texts(["中国的首都是北京。"])
    assert enc.features[0] == tok("中国的首都是北京。")["input_ids"]
    assert enc.features[1] == [0] * len(enc.features[0])
    assert enc.full_length == len(enc.features[0])
    model = AutoModelForSequenceClassification.from_pretrained(bert).eval()
    with torch.inference_mode():
        expected = model(**tok("中国的首都是北京。", return_tensors="pt")).logits[0, 0].item()
    assert scorer.score_texts(["中国的首都是北京。"]) == pytest.approx([expected], abs=1e-5)


def test_pair_encoder_text_is_cut_from_its_start_keeping_cls(bert):
    scorer = load_scorer(str(bert), max_length=16, dtype="fp32")
    tok = scorer.tokenizer
    text = "问" * 40 + "答案是四十二。"
    (enc,) = scorer.encoder.encode_texts([text])
    ids = enc.features[0]
    assert len(ids) == 16
    assert tok.convert_ids_to_tokens([ids[0], ids[-1]]) == ["[CLS]", "[SEP]"]
    assert tok.decode(ids[1:-1]).replace(" ", "").endswith("问答案是四十二。")
    assert enc.full_length == 47 + 2 and enc.response_too_long
    batch = scorer.score_texts([text, "你好", "中国的首都是北京。"])
    alone = [scorer.score_texts([t])[0] for t in (text, "你好", "中国的首都是北京。")]
    assert batch == pytest.approx(alone, abs=1e-5)
