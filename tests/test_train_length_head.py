"""Length-disentangled training (``--length-head``, ODIN): the loss terms' signs, the two heads on one hidden
state, a saved model without the length head, and ``cheems train --length-head`` end to end."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.models.backbones import locate_model
from cheems.models.encoding import RewardEncoder, collate
from cheems.train.forward import score_in_memory
from cheems.train.length_head import LengthHeadModel, disentangled_loss, pearson, with_length_head
from cheems.train.loss import listwise_bt_loss
from cheems.train.model import RewardModel, load_reward_model
from cheems.train.trainer import train_reward_model
from test_train_trainer import config, cut_short, write_records

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)

tiny_models = pytest.importorskip("tiny_models")

LENGTHS = torch.tensor([10.0, 20.0, 30.0, 40.0])
PAIRS = torch.tensor([[3, 0], [2, 1], [3, 1]])
WEIGHTS = {"length_corr_weight": 1.0, "quality_corr_weight": 1.0, "orthogonal_weight": 1.0}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return tiny_models.build_tiny_bert(tmp_path_factory.mktemp("bert"))


def loss_of(quality: list[float], length: list[float], cosine: float = 0.0, lengths=LENGTHS, **weights):
    rewards = torch.tensor([quality, length]).T.contiguous().requires_grad_(True)
    loss, stats = disentangled_loss(
        rewards, PAIRS, lengths, torch.tensor(cosine), reg_coef=0.1, **{**WEIGHTS, **weights}
    )
    loss.backward()
    return loss, stats, rewards.grad


def test_correlation_terms_have_the_right_sign_on_a_hand_made_batch():
    # length head following length, quality head uncorrelated with it (centred lengths -15 -5 5 15): both terms 0
    loss, stats, _ = loss_of([1.0, -1.0, -1.0, 1.0], [0.0, 1.0, 2.0, 3.0])
    assert stats["length_corr"] == pytest.approx(1.0) and stats["quality_corr"] == pytest.approx(0.0, abs=1e-7)
    bt, _ = listwise_bt_loss(torch.tensor([1.0, 0.0, 1.0, 4.0]), PAIRS, 0.1)
    assert loss.item() == pytest.approx(bt.item(), abs=1e-6)
    # length head against length, quality head following it: both terms at their worst (2 and 1)
    loss, stats, _ = loss_of([0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 1.0, 0.0], cosine=-0.5)
    assert stats["length_corr"] == pytest.approx(-1.0) and stats["quality_corr"] == pytest.approx(1.0)
    assert stats["head_cosine"] == pytest.approx(-0.5)
    bt, _ = listwise_bt_loss(torch.tensor([3.0, 3.0, 3.0, 3.0]), PAIRS, 0.1)
    assert loss.item() == pytest.approx(bt.item() + 2 + 1 + 0.5, abs=1e-6)


def test_correlation_gradients_push_the_length_head_up_and_the_quality_head_off_length():
    # the correlation terms' own gradient: the loss's with them minus the one without
    quality, length = [0.0, 2.0, 1.0, 3.0], [1.0, 0.0, 3.0, 2.0]  # both partly correlated with length (+0.8, +0.6)
    _, stats, grad = loss_of(quality, length)
    _, _, bt_grad = loss_of(quality, length, length_corr_weight=0.0, quality_corr_weight=0.0)
    corr_grad = grad - bt_grad
    assert stats["length_corr"] == pytest.approx(0.6) and stats["quality_corr"] == pytest.approx(0.8)
    # descent (minus the gradient) raises the length head on the longest response, lowers it on the shortest ...
    assert corr_grad[3, 1] < 0 < corr_grad[0, 1]
    # ... and lowers the quality head on the longest response, raises it on the shortest
    assert corr_grad[3, 0] > 0 > corr_grad[0, 0]


def test_a_batch_without_length_signal_gives_zero_terms_not_nan():
    loss, stats, grad = loss_of([1.0, 0.0, 2.0, 0.5], [0.3, 0.2, 0.1, 0.0], lengths=torch.full((4,), 7.0))
    assert stats["length_corr"] == 0.0 and stats["quality_corr"] == 0.0
    assert torch.isfinite(grad).all() and math.isfinite(loss.item())
    assert pearson(torch.tensor([1.0]), torch.tensor([5.0])).item() == 0.0


def test_both_heads_read_the_same_hidden_state(tiny_bert):
    plain, tokenizer = load_reward_model(tiny_bert)
    model = LengthHeadModel(plain).eval()
    encoder = RewardEncoder(locate_model(str(tiny_bert)), 128)
    inputs = collate(encoder.features([("问题", "短"), ("问题", "一个长得多的回答，有好几句话。")]), 0, "cpu")
    with torch.no_grad():
        both = model(**inputs)
        alone = plain(**inputs)
        pooled = plain.hf.bert(**inputs).pooler_output  # what BERT's classifier reads (dropout is off in eval)
    assert both.shape == (2, 2)
    torch.testing.assert_close(both[:, 0], alone, rtol=0, atol=0)  # column 0: the reward head, untouched
    torch.testing.assert_close(both[:, 1], model.length_head(pooled)[:, 0], rtol=1e-6, atol=1e-6)
    weight_q, weight_l = plain.hf.classifier.weight.flatten(), model.length_head.weight.flatten()
    assert model.head_cosine.item() == pytest.approx(
        (weight_q @ weight_l / (weight_q.norm() * weight_l.norm())).item(), abs=1e-6
    )
    with pytest.raises(InputError, match="DeepSpeed"):
        with_length_head(plain, deepspeed=True)


def test_without_the_option_the_loss_is_the_plain_listwise_loss(tiny_bert, tmp_path):
    data = write_records(tmp_path / "train.jsonl", 6)
    result = train_reward_model(config(tiny_bert, data, tmp_path / "rm", max_length=128))
    assert isinstance(result.model, RewardModel)
    # one batch per step: the logged loss is BT + reg_coef * prior and nothing else, as before the option existed
    for row in result.history:
        assert row["loss"] == pytest.approx(row["bt_loss"] + 0.1 * row["prior"], rel=1e-6)


def test_saved_model_has_no_length_head_and_scores_as_the_reward_head_alone(tiny_bert, tmp_path):
    from cheems.models import load_scorer, score_records

    data = write_records(tmp_path / "train.jsonl", 8)
    plain = train_reward_model(config(tiny_bert, data, tmp_path / "plain", max_length=128))
    result = train_reward_model(config(tiny_bert, data, tmp_path / "rm", max_length=128, length_head=True))
    saved, plain_saved = (
        load_file(str(tmp_path / "rm" / "model.safetensors")),
        load_file(str(tmp_path / "plain" / "model.safetensors")),
    )
    assert saved.keys() == plain_saved.keys() and not any("length" in key for key in saved)
    # the two runs differ (the length head's terms trained the backbone too)
    assert any(not torch.equal(saved[k], plain_saved[k]) for k in saved)
    assert isinstance(result.model, RewardModel) and isinstance(plain.model, RewardModel)
    # with the head, the logged loss holds the correlation and orthogonality terms (>= 0) beyond BT + prior
    extra = [row["loss"] - row["bt_loss"] - 0.1 * row["prior"] for row in result.history]
    assert min(extra) > -1e-6 and max(extra) > 1e-3
    records = read_records(data).records
    theirs = score_records(records, load_scorer(str(tmp_path / "rm"), max_length=128, dtype="fp32"), progress=False)
    ours = score_in_memory(result.model, RewardEncoder(locate_model(str(tmp_path / "rm")), 128), records)
    assert theirs.keys() == ours.keys()
    for key in ours:
        assert ours[key] == pytest.approx(theirs[key], abs=1e-5)


def test_cli_length_head_trains_and_saves_a_plain_reward_model(tiny_bert, tmp_path, cheems_cli):
    data = write_records(tmp_path / "train.jsonl", 4)
    out = tmp_path / "rm"
    run = cheems_cli(
        "train", "--model", tiny_bert, "--data", data, "--output", out,
        "--epochs", "1", "--max-length", "64", "--length-head", "--no-progress", "--cpu",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "length head (ODIN)" in run.stderr
    assert (out / "train_config.yaml").read_text().count("length_head: true") == 1
    assert not any("length" in key for key in load_file(str(out / "model.safetensors")))


def test_resume_restores_the_length_head_and_refuses_a_toggled_option(tiny_bert, tmp_path):
    data = write_records(tmp_path / "train.jsonl", 8)
    done = tmp_path / "done"
    train_reward_model(
        config(tiny_bert, data, done, max_length=128, length_head=True, save_every=1, keep_checkpoints=0)
    )
    first = sorted((done / "checkpoints").iterdir())[0]
    out = tmp_path / "rm"
    cut_short(first, out)
    with pytest.raises(InputError, match="was trained with --length-head"):
        train_reward_model(config(tiny_bert, data, out, max_length=128, resume=True))
    assert not out.exists()
    train_reward_model(config(tiny_bert, data, out, max_length=128, length_head=True, resume=True))
    # the same final weights as the uninterrupted run: the length head's state came back with the rest
    ours, theirs = load_file(str(out / "model.safetensors")), load_file(str(done / "model.safetensors"))
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
