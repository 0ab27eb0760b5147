"""Reward-model training: greedy prompt-grouped batching, listwise BT loss (pairs come from cheems.ranking).

Importing the package does not import torch (the CLI reads ``TrainConfig`` at start-up):
``listwise_bt_loss`` is imported when first asked for.
"""

from typing import Any

from cheems.train.batching import (
    EpochPlan,
    Item,
    PromptGroup,
    batch_pairs,
    greedy_batches,
    plan_epoch,
    prompt_groups,
    shard_batches,
)

__all__ = [
    "EpochPlan",
    "Item",
    "PromptGroup",
    "batch_pairs",
    "greedy_batches",
    "listwise_bt_loss",
    "plan_epoch",
    "prompt_groups",
    "shard_batches",
]


def __getattr__(name: str) -> Any:
    if name == "listwise_bt_loss":
        from cheems.train.loss import listwise_bt_loss

        return listwise_bt_loss
    raise AttributeError(f"module 'cheems.train' has no attribute {name!r}")
