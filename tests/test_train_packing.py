"""Shared-prompt packing (``--packing auto``): the packed forward gives the padded forward's rewards, loss and
gradients on a random Qwen2 in fp32, whatever the prompts look like, and a real run trains with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cheems.data.schema import Record
from cheems.models.backbones import locate_model
from cheems.models.encoding import RewardEncoder, collate
from cheems.train.batching import batch_pairs
from cheems.train.config import load_config
from cheems.train.data import build_training_set
from cheems.train.loss import listwise_bt_loss
from cheems.train.model import load_reward_model
from cheems.train.packing import pack_budget, pack_layout, packed_inputs, packed_rewards, packing_active, packing_counts
from cheems.train.trainer import train_reward_model
from helpers import assert_user_error, write_jsonl

tiny_models = pytest.importorskip("tiny_models")
TOL = 1e-5


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    return tiny_models.build_tiny_qwen2(tmp_path_factory.mktemp("qwen"), qwen2_tokenizer_dir)


def records() -> list[Record]:
    """A system prompt, multi-turn prompts, ties, a long prompt (truncated: see :func:`batch`) and a one-pair prompt."""
    rows = [
        {
            "id": "sys",
            "sys_prompt": "你是一个乐于助人的助手。",
            "input": "请解释一下光合作用。",
            "responses": [
                {"id": "a", "content": "光合作用是植物利用光能把二氧化碳和水变成糖和氧气的过程。"},
                {"id": "b", "content": "不知道。"},
                {"id": "c", "content": "植物晒太阳。"},
                {"id": "d", "content": "这是化学反应。"},
            ],
            "rank": {"a": 1, "b": 3, "c": 2, "d": 2},  # c and d tie
        },
        {
            "id": "turns",
            "input": [
                {"role": "user", "content": "北京是哪个国家的首都？"},
                {"role": "assistant", "content": "中国。"},
                {"role": "user", "content": "那上海呢？"},
            ],
            "responses": [
                {"id": "x", "content": "上海不是首都，是中国最大的城市之一。"},
                {"id": "y", "content": "上海是日本的首都。"},
                {"id": "z", "content": "Shanghai is a city."},
            ],
            "rank": {"x": 1, "y": 3, "z": 2},
        },
        {
            "id": "long",
            "input": "这是一个很长的问题，" * 40 + "请简短回答。",
            "responses": [
                {"id": "p", "content": "好的。"},
                {"id": "q", "content": "这个问题的答案需要很多解释，" * 2},
                {"id": "r", "content": "不行。"},
            ],
            "rank": {"p": 1, "q": 2, "r": 2},
        },
        {
            "id": "one",
            "input": "1+1=?",
            "responses": [{"id": "u", "content": "2"}, {"id": "v", "content": "3"}],
            "rank": {"u": 1, "v": 2},
        },
    ]
    return [Record.model_validate(r) for r in rows]


def batch(tiny_qwen):
    """The records as one batch, at a ``max_length`` that cuts the long prompt's rows only (the tokenizer's count)."""
    source = locate_model(str(tiny_qwen))
    lengths = [e.full_length for e in RewardEncoder(source, 10**6).encode([(r.prompt, "") for r in records()])]
    encoder = RewardEncoder(source, max(lengths[:2] + lengths[3:]) + 40)
    assert lengths[2] > encoder.limit
    data = build_training_set(records(), encoder, "left_prompt")
    items = [(g.prompt, rid) for g in data.groups for rid in g.responses]
    pairs = torch.tensor(batch_pairs(items, data.groups)).reshape(-1, 2)
    return data, items, [data.features[i] for i in items], pairs


def loss_and_grads(model, inputs, pairs) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    rewards = model(**inputs)
    loss, _ = listwise_bt_loss(rewards, pairs, 0.1)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return rewards.detach(), loss.detach(), grads


@pytest.mark.parametrize("budget", [4096, 48])  # one row for everything; rows smaller than every group
def test_packed_forward_gives_the_padded_rewards_loss_and_gradients(tiny_qwen, budget):
    data, items, rows, pairs = batch(tiny_qwen)
    assert data.summary.truncated > 0  # the long prompt is cut, differently per response
    model, tokenizer = load_reward_model(tiny_qwen)
    model.train()
    model.hf.config.attention_dropout = 0.0
    padded = collate(rows, tokenizer.pad_token_id, "cpu")
    layout = pack_layout(rows, [p for p, _ in items], budget)
    packed = packed_inputs(layout, tokenizer.pad_token_id, "cpu", model.config._attn_implementation)
    if budget == 48:
        assert len(layout.tokens) == 4 and layout.width > budget  # each group its own row, longer than the budget
    else:
        assert len(layout.tokens) == 1
    r_pad, l_pad, g_pad = loss_and_grads(model, padded, pairs)
    r_pack, l_pack, g_pack = loss_and_grads(model, packed, pairs)
    torch.testing.assert_close(r_pack, r_pad, atol=TOL, rtol=TOL)
    torch.testing.assert_close(l_pack, l_pad, atol=TOL, rtol=TOL)
    assert g_pack.keys() == g_pad.keys() and len(g_pad) == len(list(model.parameters()))
    for name in g_pad:
        torch.testing.assert_close(g_pack[name], g_pad[name], atol=TOL, rtol=1e-4, msg=name)


def test_eager_attention_takes_the_additive_mask(tiny_qwen):
    _, items, rows, _ = batch(tiny_qwen)
    model, tokenizer = load_reward_model(tiny_qwen)
    model.eval()
    with torch.no_grad():
        expected = model(**collate(rows, tokenizer.pad_token_id, "cpu"))
        model.hf.set_attn_implementation("eager")
        got = packed_rewards(model, rows, [p for p, _ in items], tokenizer.pad_token_id, "cpu", 200, "eager")
    torch.testing.assert_close(got, expected, atol=TOL, rtol=TOL)


def test_layout_shares_the_prompt_once_and_masks_other_responses():
    rows = [([1, 2, 3, 4, 10], None), ([1, 2, 3, 4, 11, 12], None), ([7, 8], None), ([1, 2, 3, 5], None)]
    # prompt 0: rows 0, 1 and 3 share [1, 2, 3]; prompt 1: row 2 alone
    layout = pack_layout(rows, [0, 0, 1, 0], budget=100)
    assert layout.tokens == [[1, 2, 3, 4, 10, 4, 11, 12, 5, 7, 8]]  # no padding between the groups
    assert layout.positions == [[0, 1, 2, 3, 4, 3, 4, 5, 3, 0, 1]]
    assert layout.read_at == [(0, 4), (0, 7), (0, 10), (0, 8)]
    mask = packed_inputs(layout, 0, "cpu", "sdpa")["attention_mask"][0, 0]
    seen = {q: [k for k in range(11) if mask[q, k]] for q in range(11)}
    assert seen[2] == [0, 1, 2]  # the prompt is causal among itself
    assert seen[7] == [0, 1, 2, 5, 6, 7]  # row 1's last token: the prompt and its own tokens only
    assert seen[8] == [0, 1, 2, 8]
    assert seen[10] == [9, 10]  # another group: nothing of the first


def test_a_group_longer_than_a_row_gets_its_own_and_small_groups_fill_rows():
    rows = [([1] * 30 + [i], None) for i in range(3)] + [([5, i], None) for i in range(4)] + [([6, 6, 6], None)]
    keys = [0, 0, 0, 1, 1, 1, 1, 2]
    layout = pack_layout(rows, keys, budget=10)
    assert [len(t) for t in layout.tokens] == [33, 8]  # 30 + 3 alone; 1 + 4 and 3 together
    counts = packing_counts(rows, keys, budget=10)
    assert counts == {"real": 41, "padded": 8 * 31, "packed": 2 * 33}


def test_row_budget_auto_is_small_where_the_mask_is_dense():
    assert pack_budget(-1, torch.device("cpu")) == 1024 and pack_budget(-1, torch.device("cuda")) == 4096
    assert pack_budget(300, torch.device("cpu")) == 300


def test_encoders_pack_whole_sequences_with_the_padded_rewards_and_gradients(tmp_path):
    folder = tiny_models.build_tiny_bert(tmp_path / "bert")
    encoder = RewardEncoder(locate_model(str(folder)), 48)  # the long prompt is cut
    data = build_training_set(records(), encoder, "left_prompt")
    assert data.summary.truncated > 0
    items = [(g.prompt, rid) for g in data.groups for rid in g.responses]
    rows, pairs = [data.features[i] for i in items], torch.tensor(batch_pairs(items, data.groups)).reshape(-1, 2)
    model, tokenizer = load_reward_model(folder)
    model.eval()  # dropout off: the same numbers both ways (gradients flow all the same)
    layout = pack_layout(rows, [p for p, _ in items], 150, causal=False)
    assert len(layout.tokens) > 1 and all(t[0] == tokenizer.cls_token_id for t in layout.tokens)
    assert sum(map(len, layout.tokens)) == sum(len(ids) for ids, _ in rows)  # nothing shared, no padding inside
    packed = packed_inputs(layout, tokenizer.pad_token_id, "cpu", model.config._attn_implementation)
    assert packed["token_type_ids"].sum() > 0 and packed["position_ids"].max() < 48
    r_pad, l_pad, g_pad = loss_and_grads(model, collate(rows, tokenizer.pad_token_id, "cpu"), pairs)
    r_pack, l_pack, g_pack = loss_and_grads(model, packed, pairs)
    torch.testing.assert_close(r_pack, r_pad, atol=TOL, rtol=TOL)
    torch.testing.assert_close(l_pack, l_pad, atol=TOL, rtol=TOL)
    assert g_pack.keys() == g_pad.keys()
    for name in g_pad:
        torch.testing.assert_close(g_pack[name], g_pad[name], atol=TOL, rtol=1e-4, msg=name)


def test_auto_packs_causal_models_and_cls_encoders(tiny_qwen, tmp_path):
    qwen, _ = load_reward_model(tiny_qwen)
    bert_dir = tiny_models.build_tiny_bert(tmp_path / "bert")
    assert packing_active("auto", qwen) and not packing_active("none", qwen)
    assert packing_active("auto", load_reward_model(bert_dir)[0])
    assert not packing_active("auto", load_reward_model(bert_dir, pooling="mean")[0])  # stays padded


def test_training_packed_matches_padded(tiny_qwen, tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", [r.model_dump(exclude_none=True) for r in records()] * 1)
    base = {
        "model": str(tiny_qwen),
        "data": [str(data)],
        "epochs": 2,
        "batch_size": 7,
        "max_length": batch(tiny_qwen)[0].summary.max_length,
        "lr": 1e-3,
        "progress": False,
        "bf16": False,
        "cpu": True,
        "chunk_tokens": 0,
    }
    runs = {
        mode: train_reward_model(load_config(None, {**base, "output": str(tmp_path / mode), "packing": mode}))
        for mode in ("auto", "none")
    }
    losses = {mode: [row["loss"] for row in run.history] for mode, run in runs.items()}
    assert len(losses["auto"]) == len(losses["none"]) > 2
    assert losses["auto"] == pytest.approx(losses["none"], abs=1e-5)


def test_cheems_train_packing_auto_end_to_end(tiny_qwen, tmp_path, cheems_cli):
    data = write_jsonl(tmp_path / "train.jsonl", [r.model_dump(exclude_none=True) for r in records()])
    out = tmp_path / "rm"
    done = cheems_cli(
        "train", "-d", data, "-o", out, "-m", tiny_qwen, "--packing", "auto", "--epochs", "1", "--cpu",
        "--no-bf16", "--batch-size", "8", "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "packing: each prompt forwarded once per batch" in done.stderr
    assert json.loads((out / "metrics.json").read_text())["global_step"] >= 1
    bad = cheems_cli("train", "-d", data, "-o", tmp_path / "rm2", "-m", tiny_qwen, "--packing", "always")
    assert_user_error(bad, "packing", "auto")
    assert not (tmp_path / "rm2").exists()


@pytest.mark.parametrize(("key", "value", "said"), [("packing", "always", "auto"), ("pack_tokens", 0, "-1 (auto)")])
def test_bad_packing_settings_are_one_clear_error(key, value, said):
    from cheems.errors import InputError

    with pytest.raises(InputError) as caught:
        load_config(None, {key: value})
    assert key in str(caught.value) and said in str(caught.value)
