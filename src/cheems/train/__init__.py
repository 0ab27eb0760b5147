"""Reward-model training: greedy prompt-grouped batching, listwise BT loss (pairs come from cheems.ranking)."""

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
from cheems.train.loss import listwise_bt_loss

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
