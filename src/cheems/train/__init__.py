"""Reward-model training: greedy prompt-grouped batching, listwise BT loss (pairs come from cheems.ranking).

Names are imported on first use (:func:`cheems.runtime.lazy_exports`): the CLI reads ``TrainConfig``
at start-up, which must not import torch or networkx.
"""

import sys

from cheems.runtime import callable_package, lazy_exports

_EXPORTS = {
    "EpochPlan": "batching",
    "Item": "batching",
    "PromptGroup": "batching",
    "batch_pairs": "batching",
    "greedy_batches": "batching",
    "listwise_bt_loss": "loss",
    "plan_epoch": "batching",
    "prompt_groups": "batching",
    "shard_batches": "batching",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
# cheems.train(...) is cheems.train.trainer.train(...): the package and the public function share the name
callable_package(sys.modules[__name__], "trainer:train")
