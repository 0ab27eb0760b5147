"""verl's custom reward function over a reward model server: point ``custom_reward_function.path`` at this file.

verl calls ``compute_score(data_source=..., solution_str=<the response>, ground_truth=..., extra_info=...)`` with
``custom_reward_function.reward_kwargs`` merged in (they win). The prompt is not among them: it is read from
``extra_info[prompt_key]``, where the dataset's preprocessing put it (verl's examples store ``question``). The
server is ``cheems serve`` or ``vllm serve`` (``reward_kwargs.url``); the wait is bounded (``timeout``), unlike
verl's own reward loop, which waits for ever on a server that never answers.

verl loads this file by path as a module of its own, so it imports only absolute ``cheems`` names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cheems.errors import InputError
from cheems.rewards.reward_server import DEFAULT_TIMEOUT, server_reward_scorer
from cheems.rewards.rl_inputs import as_prompt

URL_HINT = "set custom_reward_function.reward_kwargs.url=http://127.0.0.1:8766 (where `cheems serve` listens)"


def verl_prompt(extra_info: Mapping[str, Any] | None, prompt_key: str) -> Any:
    """The prompt stored at ``extra_info[prompt_key]``; InputError naming the key (and those present) when absent."""
    if not isinstance(extra_info, Mapping) or extra_info.get(prompt_key) is None:
        present = sorted(str(k) for k in extra_info) if isinstance(extra_info, Mapping) else []
        raise InputError(
            f"no prompt at extra_info['{prompt_key}'] (extra_info has: {', '.join(present) or 'nothing'})",
            field="prompt_key",
            hint="store the prompt in each row's extra_info when preprocessing, or set "
            "custom_reward_function.reward_kwargs.prompt_key to the key that holds it",
        )
    return extra_info[prompt_key]


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    url: str | None = None,
    prompt_key: str = "question",
    model: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = 2,
    **kwargs: Any,
) -> float:
    """The reward of ``solution_str`` for the prompt at ``extra_info[prompt_key]``, from the server at ``url``.

    ``url``, ``prompt_key`` (a string or a list of chat messages is stored there), ``model`` (the served name;
    default the server's one model), ``timeout`` (seconds without a reply before the call fails) and ``retries``
    come from ``reward_kwargs``; ``data_source``, ``ground_truth`` and verl's other keywords are not used.
    Raises InputError for a missing URL or prompt, or a server that does not answer in time.
    """
    if not url:
        raise InputError("compute_score needs the reward server's URL", field="url", hint=URL_HINT)
    prompt = as_prompt(verl_prompt(extra_info, prompt_key), f"extra_info[{prompt_key!r}]")
    scorer = server_reward_scorer(url, model=model, timeout=timeout, retries=retries, concurrency=1)
    return scorer.score([(prompt, solution_str)])[0]
