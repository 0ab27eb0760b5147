"""Listwise Bradley–Terry loss with a Gaussian prior on rewards (paper part 3.2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def listwise_bt_loss(
    rewards: torch.Tensor, pairs: torch.Tensor, reg_coef: float = 0.1
) -> tuple[torch.Tensor, dict[str, float]]:
    """Bradley–Terry loss over a batch's pairs plus ``reg_coef * mean(r^2)`` over all its rewards.

    ``rewards`` is ``[B]`` in any float dtype (computed in fp32); ``pairs`` is an integer
    ``[P, 2]`` tensor of (chosen index, rejected index) into ``rewards``. The loss is
    ``mean(-log sigmoid(r_w - r_l)) + reg_coef * mean(r^2)``; with no pairs the first term
    is 0 and the loss is the prior alone (still differentiable). Stats: ``bt_loss``,
    ``prior`` (the unweighted ``mean(r^2)``), ``accuracy`` (share of pairs with
    ``r_w > r_l`` strictly; 0.0 when ``pairs`` is 0, so weight it by ``pairs`` when averaging)
    and ``pairs``.
    """
    if rewards.ndim != 1 or rewards.numel() == 0:
        raise ValueError(f"rewards must be a non-empty 1-D tensor, got shape {tuple(rewards.shape)}")
    if pairs.is_floating_point() or pairs.is_complex():
        raise ValueError(f"pairs must be an integer tensor, got {pairs.dtype}")
    r = rewards.float()  # bf16 margins and squares lose too much precision
    prior = r.pow(2).mean()
    if pairs.numel() == 0:
        bt = r.new_zeros(())
        correct = r.new_zeros(())
    else:
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must have shape [P, 2], got {tuple(pairs.shape)}")
        pairs = pairs.to(device=r.device, dtype=torch.long)
        margin = r[pairs[:, 0]] - r[pairs[:, 1]]
        bt = -F.logsigmoid(margin).mean()
        correct = (margin > 0).float().sum()
    n_pairs = pairs.shape[0] if pairs.numel() else 0
    loss = bt + reg_coef * prior
    # one device-to-host copy instead of three
    bt_value, prior_value, n_correct = torch.stack([bt, prior, correct]).detach().tolist()
    stats = {
        "bt_loss": bt_value,
        "prior": prior_value,
        "accuracy": n_correct / n_pairs if n_pairs else 0.0,
        "pairs": n_pairs,
    }
    return loss, stats
