"""Listwise Bradley–Terry loss with the Gaussian reward prior."""

from __future__ import annotations

import math

import pytest
import torch

from cheems.train import listwise_bt_loss


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


REWARDS = [1.0, 0.0, -0.5]
PAIRS = [[0, 1], [0, 2], [2, 1]]  # margins 1.0, 1.5, -0.5


def test_matches_hand_computation():
    rewards = torch.tensor(REWARDS, requires_grad=True)
    loss, stats = listwise_bt_loss(rewards, torch.tensor(PAIRS), reg_coef=0.1)
    bt = (math.log(1 + math.exp(-1.0)) + math.log(1 + math.exp(-1.5)) + math.log(1 + math.exp(0.5))) / 3
    prior = (1.0 + 0.0 + 0.25) / 3
    assert loss.item() == pytest.approx(bt + 0.1 * prior, rel=1e-6)
    assert stats == pytest.approx({"bt_loss": bt, "prior": prior, "accuracy": 2 / 3, "pairs": 3}, rel=1e-6)
    assert stats["pairs"] == 3


def test_gradient_matches_hand_computation():
    rewards = torch.tensor(REWARDS, requires_grad=True)
    loss, _ = listwise_bt_loss(rewards, torch.tensor(PAIRS), reg_coef=0.1)
    loss.backward()
    # d(-log sig(m))/dm = -sig(-m), averaged over 3 pairs; d(0.1 * mean(r^2))/dr = 0.2 r / 3.
    expected = [
        (-sig(-1.0) - sig(-1.5)) / 3 + 0.2 * 1.0 / 3,
        (sig(-1.0) + sig(0.5)) / 3,
        (sig(-1.5) - sig(0.5)) / 3 + 0.2 * -0.5 / 3,
    ]
    assert rewards.grad.tolist() == pytest.approx(expected, rel=1e-5)


def test_zero_pairs_is_the_prior_alone_and_differentiable():
    rewards = torch.tensor([2.0, -1.0], requires_grad=True)
    loss, stats = listwise_bt_loss(rewards, torch.empty((0, 2), dtype=torch.long), reg_coef=0.5)
    assert loss.item() == pytest.approx(0.5 * (4 + 1) / 2)
    assert stats == {"bt_loss": 0.0, "prior": 2.5, "accuracy": 0.0, "pairs": 0}
    loss.backward()
    assert rewards.grad.tolist() == pytest.approx([1.0, -0.5])  # 0.5 * 2r / 2
    assert not any(math.isnan(v) for v in stats.values())


def test_equal_rewards_are_not_counted_as_correct():
    _, stats = listwise_bt_loss(torch.zeros(2), torch.tensor([[0, 1]]))
    assert stats["accuracy"] == 0.0
    assert stats["bt_loss"] == pytest.approx(math.log(2))


def test_bf16_rewards_are_computed_in_fp32():
    values = [3.140625, -2.71875, 0.5]  # exactly representable in bf16
    rewards = torch.tensor(values, dtype=torch.bfloat16, requires_grad=True)
    loss, stats = listwise_bt_loss(rewards, torch.tensor([[0, 1], [2, 1]]))
    reference, _ = listwise_bt_loss(torch.tensor(values, dtype=torch.float64), torch.tensor([[0, 1], [2, 1]]))
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    loss.backward()
    assert rewards.grad.dtype == torch.bfloat16 and rewards.grad.abs().sum() > 0


def test_large_margins_stay_finite():
    loss, _ = listwise_bt_loss(torch.tensor([-200.0, 200.0]), torch.tensor([[0, 1]]), reg_coef=0.0)
    assert loss.item() == pytest.approx(400.0)


@pytest.mark.parametrize(
    "rewards, pairs",
    [
        (torch.zeros(2, 1), torch.tensor([[0, 1]])),  # rewards not 1-D
        (torch.zeros(0), torch.empty((0, 2), dtype=torch.long)),  # empty batch
        (torch.zeros(2), torch.tensor([[0.0, 1.0]])),  # float indices
        (torch.zeros(3), torch.tensor([[0, 1, 2]])),  # not [P, 2]
    ],
)
def test_rejects_bad_shapes(rewards, pairs):
    with pytest.raises(ValueError):
        listwise_bt_loss(rewards, pairs)
