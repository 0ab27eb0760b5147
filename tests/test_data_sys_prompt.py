"""The official files' ``sys_prompt`` is the system message when scoring and training (as their loader does).

Real tiny models: a Qwen2 reward model (chat template) and a BERT one (text pair, no template).
A record with ``sys_prompt`` must score exactly as the same prompt written with an explicit system
turn, and differently from the prompt without it; the score cache must not mix them up.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import tiny_models
from cheems.data.schema import Record
from cheems.models import ScoreCache, load_scorer, score_records
from cheems.models.backbones import locate_model
from cheems.models.base import item_digest, prompt_text
from cheems.models.encoding import RewardEncoder
from cheems.train.data import build_training_set
from cheems.train.forward import score_in_memory
from cheems.train.model import load_reward_model

SYSTEM = "你是一位严谨的数学老师，只用一句话回答。"
QUESTION = "1+1等于几？"
RESPONSES = [{"id": "r1", "content": "等于2。"}, {"id": "r2", "content": "等于3，因为我觉得是这样。"}]
RANK = {"r1": 1, "r2": 2}


def record(kind: str) -> Record:
    """The same prompt three ways: ``plain`` (no system), ``sys_prompt`` (official), ``explicit`` (a system turn)."""
    base = {"id": "p1", "responses": RESPONSES, "rank": RANK}
    if kind == "plain":
        return Record.model_validate({**base, "input": QUESTION})
    if kind == "sys_prompt":
        return Record.model_validate({**base, "input": QUESTION, "sys_prompt": SYSTEM})
    return Record.model_validate(
        {**base, "input": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]}
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory, qwen2_tokenizer_dir) -> Iterator[dict[str, Path]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models gain nothing from threads on a shared box
    yield {
        "qwen2 (chat template)": tiny_models.build_tiny_qwen2(tmp_path_factory.mktemp("qwen"), qwen2_tokenizer_dir),
        "bert (text pair)": tiny_models.build_tiny_bert(tmp_path_factory.mktemp("bert")),
    }
    torch.set_num_threads(threads)


@pytest.mark.parametrize("kind", ["qwen2 (chat template)", "bert (text pair)"])
def test_scores_use_the_sys_prompt_as_the_system_message(models, kind, tmp_path):
    scorer = load_scorer(str(models[kind]))
    scores = {k: score_records([record(k)], scorer, progress=False) for k in ("plain", "sys_prompt", "explicit")}
    assert scores["sys_prompt"] == scores["explicit"]
    assert all(scores["sys_prompt"][key] != scores["plain"][key] for key in scores["plain"])
    # the cache keys the item with its system turn: a cached score of the plain prompt is not reused
    cache = ScoreCache(tmp_path / "scores.sqlite")
    assert score_records([record("plain")], scorer, cache=cache, progress=False) == scores["plain"]
    assert score_records([record("sys_prompt")], scorer, cache=cache, progress=False) == scores["explicit"]


def test_cache_key_and_text_pair_rendering_include_the_system_turn():
    plain, official = record("plain"), record("sys_prompt")
    assert item_digest((official.prompt, "等于2。")) == item_digest((record("explicit").prompt, "等于2。"))
    assert item_digest((official.prompt, "等于2。")) != item_digest((plain.prompt, "等于2。"))
    assert prompt_text(official.prompt) == f"{SYSTEM}\n\n{QUESTION}"  # its own paragraph, no role labels
    assert prompt_text(plain.prompt) == QUESTION
    dialogue = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "你好"},
        {"role": "assistant", "content": "你好！"},
        {"role": "user", "content": QUESTION},
    ]
    assert prompt_text(dialogue) == f"{SYSTEM}\n\nuser: 你好\nassistant: 你好！\nuser: {QUESTION}"


@pytest.mark.parametrize("kind", ["qwen2 (chat template)", "bert (text pair)"])
def test_training_sees_the_sys_prompt_as_the_scorer_does(models, kind):
    source = locate_model(str(models[kind]))
    encoder = RewardEncoder(source, 128)
    features = {
        k: build_training_set([record(k)], encoder, "left_prompt").features for k in ("plain", "sys_prompt", "explicit")
    }
    assert features["sys_prompt"] == features["explicit"] != features["plain"]
    model, _ = load_reward_model(source.location)
    scores = {k: score_in_memory(model, encoder, [record(k)]) for k in ("plain", "sys_prompt", "explicit")}
    assert scores["sys_prompt"] == pytest.approx(scores["explicit"]) and scores["sys_prompt"] != scores["plain"]
    scorer = load_scorer(str(models[kind]), dtype="fp32")  # as score_in_memory, on a CPU with bf16 units too
    assert scores["sys_prompt"] == pytest.approx(
        score_records([record("sys_prompt")], scorer, progress=False), abs=1e-5
    )
