"""The reward model server an RL reward function calls: ``cheems serve`` or ``vllm serve``, with a finite wait.

Both answer vLLM's ``POST /pooling`` with chat ``messages``, which the server renders in the reward model's own
input format, so the reward functions reach either through :class:`cheems.models.server.VLLMRewardScorer` (the one
HTTP client, its retries and its redacted ``$CHEEMS_RM_API_KEY``). What a trainer needs on top is a bound on the
wait: verl's own reward loop waits for ever on a server that accepts and never answers.
"""

from __future__ import annotations

from cheems.llm.endpoint import ConnectionSettings
from cheems.models.server import VLLMRewardScorer, default_settings

DEFAULT_TIMEOUT = 60.0
"""Seconds without a reply from the server before a reward call fails."""


def is_server_url(model: str) -> bool:
    """Whether ``model`` names a server (``http(s)://``) rather than a model a scorer loads."""
    return model.strip().lower().startswith(("http://", "https://"))


def bounded_connection(timeout: float, retries: int, concurrency: int = 32) -> ConnectionSettings:
    """How a reward call reaches its server: ``timeout`` bounds the whole wait (the call fails once no reply came
    for that long, however many of the ``retries`` on 5xx and resets are left); ``concurrency`` requests in flight,
    which the server gathers into batches. InputError for a non-positive timeout."""
    return ConnectionSettings(timeout=timeout, give_up_after=timeout, max_retries=retries, concurrency=concurrency)


def server_reward_scorer(
    url: str, *, model: str | None = None, timeout: float = DEFAULT_TIMEOUT, retries: int = 2, concurrency: int = 32
) -> VLLMRewardScorer:
    """A scorer of the reward server at ``url`` (its root, ``…/v1`` or ``…/pooling``); ``model``: the served name
    (None: the server's one model); the wait as :func:`bounded_connection` says. InputError for a malformed URL."""
    base = url.strip().rstrip("/").removesuffix("/pooling").removesuffix("/v1")
    connection = bounded_connection(timeout, retries, concurrency)
    return VLLMRewardScorer(base, model or "", default_settings(base, model or "", connection))
