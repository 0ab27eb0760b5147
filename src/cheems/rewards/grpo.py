"""A reward function for TRL's ``GRPOTrainer`` (and any trainer that calls ``reward(prompts, completions, ...)``).

TRL hands an in-process reward model ``prompt + completion`` as one string tokenised with no special tokens (a
chat template in the conversational form). An encoder reward model trained on (prompt, response) text pairs
reads that as a different input: no ``[CLS]``/``[SEP]``, no segment ids, and its rewards move (by up to 0.56 on
a cheems-trained m3e-small). :func:`trl_reward` gives TRL a callable instead, which scores each pair exactly as
the model was trained (:mod:`cheems.models.encoding`, the rule ``cheems score`` and ``cheems train`` share), in
the process or through a reward server.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cheems.errors import InputError
from cheems.models.base import Scorer
from cheems.models.registry import load_scorer
from cheems.models.sharding import scoring_alone
from cheems.rewards.reward_server import DEFAULT_TIMEOUT, bounded_connection, is_server_url, server_reward_scorer
from cheems.rewards.rl_inputs import score_items

# load_scorer's options: a server scores with its own, so none may be set (off its default) with a URL
LOCAL_OPTIONS = ("batch_size", "max_length", "device", "dtype", "shared_prefix")


class RewardFunction:
    """``reward(prompts=..., completions=..., **columns) -> list[float]``, as TRL's GRPO calls a reward function.

    ``__name__`` is what TRL logs the rewards under (``rewards/<name>/mean``). Every keyword TRL adds
    (``completion_ids``, ``trainer_state``, ``log_extra``, ``log_metric``, the dataset's other columns) is
    accepted and unused: the reward depends on the prompt and the completion alone.
    """

    __name__: str

    def __init__(self, scorer: Scorer, name: str) -> None:
        self.scorer = scorer
        self.__name__ = name

    def __repr__(self) -> str:
        return f"RewardFunction({self.scorer.name!r}, name={self.__name__!r})"

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
        """One reward per completion, in order: plain (strings) or conversational (message lists) forms alike."""
        items = score_items(prompts, completions)
        with scoring_alone():  # under a launcher each process scores its own completions
            return self.scorer.score(items)


def trl_reward(
    model: str | Path,
    *,
    name: str = "cheems_reward",
    batch_size: int = 16,
    max_length: int | None = None,
    device: str | None = None,
    dtype: str = "auto",
    shared_prefix: bool = True,
    served_name: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = 2,
) -> RewardFunction:
    """A TRL GRPO reward function scoring with ``model``: ``GRPOTrainer(reward_funcs=[trl_reward("rm/")], ...)``.

    ``model``: a reward model folder or hub id (any spec :func:`cheems.load_scorer` takes; scored in this process
    with ``batch_size``, ``max_length``, ``device``, ``dtype`` and ``shared_prefix`` as there; ``timeout`` and
    ``retries`` bound a ``vllm:URL#MODEL`` or ``openrlhf:URL`` spec's wait as a URL's), or the URL of a
    ``cheems serve`` / ``vllm serve`` reward server (``http://127.0.0.1:8766``; ``served_name``: its model's name,
    default its one model; ``timeout``: seconds without a reply before the call fails, ``retries`` on 5xx and
    resets). Either way each (prompt, completion) is scored in the model's own input format.

    ``name`` is what TRL logs the rewards under. Weights load on the first call. Raises InputError for a bad
    option, and (when called) for a server that does not answer in time.
    """
    model = str(model)
    if not is_server_url(model):
        if served_name is not None:
            raise InputError(
                f"served_name names a model at a server; {model} is no URL", field="served_name", hint="drop it"
            )
        scorer = load_scorer(
            model,
            batch_size=batch_size,
            max_length=max_length,
            device=device,
            dtype=dtype,
            shared_prefix=shared_prefix,
            connection=bounded_connection(timeout, retries),  # bounds a vllm:URL#MODEL or openrlhf:URL spec's wait
        )
        return RewardFunction(scorer, name)
    given = dict(zip(LOCAL_OPTIONS, (batch_size, max_length, device, dtype, shared_prefix)))
    defaults = inspect.signature(trl_reward).parameters
    local = [k for k in LOCAL_OPTIONS if given[k] != defaults[k].default]
    if local:
        raise InputError(
            f"{', '.join(local)} set the scoring of a local model; the server at {model} scores with its own",
            field=local[0],
            hint="give them to the server (e.g. cheems serve MODEL --max-length 1024), or drop them here",
        )
    return RewardFunction(server_reward_scorer(model, model=served_name, timeout=timeout, retries=retries), name)
