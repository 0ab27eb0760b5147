"""Reward models behind an HTTP server as scorers: vLLM's Pooling API and OpenRLHF's ``serve_rm``.

Both reuse the one HTTP transport of :class:`cheems.llm.client.ChatClient` (its workers, retries and
one-line stops) with the judge's connection settings (:class:`cheems.llm.endpoint.ConnectionSettings`,
the same options and defaults); the API key (``$CHEEMS_RM_API_KEY``, sent as a Bearer token when set) is
kept out of every message. Each reply's scores are handed on as it comes
(:func:`cheems.models.base.finished`): ``score_records`` caches them, so a run stopped half-way loses
nothing a rerun would have to ask again.

A reward must be a finite number within a float's range: NaN, infinity, a 400-digit integer or a
non-number is a malformed reply (retried, then one line naming the server and what it sent), never a
stored score.

- ``vllm:URL#MODEL`` (:class:`VLLMRewardScorer`): ``vllm serve MODEL --runner pooling`` (older
  versions: ``--task reward`` or ``classify``). One ``POST URL/pooling`` per (prompt, response) with
  ``{"model", "messages": [...prompt turns, {"role": "assistant", "content": response}],
  "add_generation_prompt": false, "use_activation": false}``: the server applies the model's own chat template
  (``cheems serve``: the model's own input format, a text pair for an encoder) and sends the raw logit, not vLLM's
  default sigmoid of it (``"model"`` is left out when no name is given: the server's one model). The reply is
  ``{"data": [{"index": 0, "data": X}]}``; X is the reward (a number, ``[r]``, or one ``[r]`` per
  token from a ``reward``/``ALL`` pooler, whose last token is the sequence's reward). vLLM batches
  the concurrent requests itself (continuous batching).
- ``openrlhf:URL`` (:class:`OpenRLHFRewardScorer`): ``python -m openrlhf.cli.serve_rm``. ``POST
  URL/get_reward`` with ``{"query": [texts]}`` (``batch_size`` texts per request) answered by
  ``{"rewards": [...]}``, one per text. ``serve_rm`` tokenizes the text as it is and appends EOS, so
  the text is the prompt as plain text (:func:`~cheems.models.base.prompt_text`), a blank line, then
  the response: no chat template is applied on either side.

The score cache keys on the URL, the model name and the text format (``TEXT_FORMAT``), never the key.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from pydantic import Field

from cheems.data.schema import prompt_messages
from cheems.errors import InputError
from cheems.llm.client import ChatClient
from cheems.llm.endpoint import ConnectionSettings, EndpointSettings, Outcome, RequestBudget, normalize_base_url
from cheems.models.base import SCORING_VERSION, ScoreItem, Scorer, finished, prompt_text
from cheems.runtime import content_hash

API_KEY_ENV = "CHEEMS_RM_API_KEY"
# Bumped when what is sent for an item changes (the scores a server gives change with it).
# vllm v2: "use_activation": false (v1 got vLLM's default sigmoid of the reward from vLLM 0.10 on).
TEXT_FORMAT = {"vllm": "pooling-messages-v2", "openrlhf": "prompt-text-blank-line-response-v1"}


class RewardServerSettings(EndpointSettings):
    """Where a reward model server is and how hard to try (:class:`EndpointSettings`' fields)."""

    ROLE: ClassVar[str] = "reward model server"
    MODEL_FIELD: ClassVar[str] = "model"
    URL_OPTION: ClassVar[str | None] = None  # the URL is part of a scorer spec, not an option of its own
    KEY_OPTION: ClassVar[str | None] = None  # the key is $CHEEMS_RM_API_KEY's, no option names it

    model: str = Field("", description="The model's name at the server (vLLM checks it; OpenRLHF has one).")
    api_key_env: str = API_KEY_ENV


def default_settings(base_url: str, model: str, connection: ConnectionSettings | None = None) -> RewardServerSettings:
    """Settings for a server at ``base_url``: ``connection`` (how hard to try; default: the judge's
    defaults), the key from ``$CHEEMS_RM_API_KEY`` if set; InputError for a bad URL."""
    return RewardServerSettings(
        base_url=normalize_base_url(base_url),
        model=model,
        api_key=os.environ.get(API_KEY_ENV, ""),
        **(connection or ConnectionSettings()).model_dump(),
    )


def _number(value: Any) -> float:
    """``value`` as a finite float; ValueError saying what was sent otherwise (a bool is not a reward)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a reward is not a number: {str(value)[:40]}")
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range (json reads any number of digits)
        digits = str(abs(value))
        raise ValueError(f"a reward too large for a number: {str(value)[:12]}… ({len(digits)} digits)") from None
    if not math.isfinite(number):
        raise ValueError(f"a non-finite reward ({value})")
    return number


def pooling_reward(reply: Any) -> float:
    """The reward in a vLLM ``/pooling`` reply for one input; ValueError if the reply is not that."""
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list) or len(data) != 1 or not isinstance(data[0], dict):
        raise ValueError(f"expected 'data' with one entry, got {str(data)[:80]}")
    value = data[0].get("data")
    if isinstance(value, list) and value and all(isinstance(row, list) for row in value):
        value = value[-1]  # one row per token (ALL pooling): the last token's is the sequence's reward
    if isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"expected one reward per input, got {len(value)} numbers (a classifier?)")
        value = value[0]
    return _number(value)


def openrlhf_rewards(reply: Any, n: int) -> list[float]:
    """The ``n`` rewards of a ``serve_rm`` reply; ValueError for a wrong count or a non-number."""
    rewards = reply.get("rewards") if isinstance(reply, dict) else None
    if not isinstance(rewards, list):
        raise ValueError("no 'rewards' list in the reply")
    if len(rewards) != n:
        raise ValueError(f"{len(rewards)} rewards for {n} texts")
    return [_number(r) for r in rewards]


class _ServerScorer:
    """What both server scorers share: settings, the transport, the fingerprint and the request loop."""

    kind: ClassVar[str]

    def __init__(self, base_url: str, model: str, settings: RewardServerSettings | None = None) -> None:
        self.settings = settings if settings is not None else default_settings(base_url, model)
        self.client = ChatClient(self.settings, RequestBudget(None))
        self.url = self.client.base_url
        self.name = f"{self.kind}:{self.url}" + (f"#{self.settings.model}" if self.settings.model else "")

    def fingerprint(self) -> str:
        """Hash of the URL, the model name and the text format (no request is made)."""
        identity = {"v": SCORING_VERSION, "kind": self.kind, "url": self.url, "model": self.settings.model}
        return f"{self.kind}-" + content_hash({**identity, "text": TEXT_FORMAT[self.kind]}, keyed=True)

    def _request_all(
        self, jobs: list[tuple[list[int], dict[str, Any]]], path: str, parse: Callable[..., Any]
    ) -> list[float]:
        """POST each job's body to ``path``; ``parse(reply, n)`` gives its rewards, stored at its indices and
        handed on as they come (:func:`~cheems.models.base.finished`)."""
        scores: list[float] = [math.nan] * sum(len(idx) for idx, _ in jobs)
        url = f"{self.url}{path}"

        async def handle(client: Any, job: tuple[list[int], dict[str, Any]]) -> None:
            indices, body = job
            outcome = Outcome()
            rewards = await self.client.post_json(client, url, body, outcome, lambda reply: parse(reply, len(indices)))
            if rewards is None:
                raise InputError(
                    f"the {self.settings.ROLE} at {url} gave no usable reply: {outcome.detail}",
                    field="model",
                    hint="check the server's log, then rerun the same command",
                )
            for i, r in zip(indices, rewards):
                scores[i] = r
            finished(indices, rewards)

        self.client.run_many(jobs, handle)
        return scores


class VLLMRewardScorer(_ServerScorer):
    """A reward model served by vLLM, through its Pooling API with chat messages (one item per request)."""

    kind = "vllm"

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        """The reward of each (prompt, response); vLLM applies the chat template and batches."""
        named = {"model": self.settings.model} if self.settings.model else {}
        jobs = [
            (
                [i],
                {
                    **named,
                    "messages": [*prompt_messages(prompt), {"role": "assistant", "content": response}],
                    "add_generation_prompt": False,
                    "use_activation": False,  # the raw reward: vLLM applies a sigmoid unless told not to
                },
            )
            for i, (prompt, response) in enumerate(items)
        ]
        return self._request_all(jobs, "/pooling", lambda reply, n: [pooling_reward(reply)])


class OpenRLHFRewardScorer(_ServerScorer):
    """A reward model served by OpenRLHF's ``serve_rm``: batches of plain texts to ``/get_reward``."""

    kind = "openrlhf"

    def __init__(self, base_url: str, *, batch_size: int = 16, settings: RewardServerSettings | None = None) -> None:
        super().__init__(base_url, "", settings)
        self.batch_size = batch_size

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        """The reward of each (prompt, response), ``batch_size`` texts per request."""
        texts = [f"{prompt_text(prompt)}\n\n{response}" for prompt, response in items]
        jobs = [
            (
                list(range(start, min(start + self.batch_size, len(texts)))),
                {"query": texts[start : start + self.batch_size]},
            )
            for start in range(0, len(texts), self.batch_size)
        ]
        return self._request_all(jobs, "/get_reward", openrlhf_rewards)


def server_scorer(spec: str, batch_size: int, connection: ConnectionSettings | None = None) -> Scorer:
    """The scorer of a ``vllm:URL#MODEL`` or ``openrlhf:URL`` spec, trying as hard as ``connection`` says
    (default: the judge's defaults); InputError for a malformed spec."""
    kind, _, rest = spec.partition(":")
    url, _, model = rest.strip().partition("#")
    if kind == "vllm":
        if not model.strip():
            raise InputError(
                f"'{spec}' names no model",
                field="model",
                hint="use vllm:URL#MODEL, e.g. vllm:http://localhost:8000#my-rm",
            )
        # vLLM serves /pooling at the root: a URL copied from an OpenAI client (…/v1) still works.
        url = url.strip().rstrip("/").removesuffix("/v1")
        return VLLMRewardScorer(url, model.strip(), default_settings(url, model.strip(), connection))
    if model:
        raise InputError(f"'{spec}': an OpenRLHF server has one model, give no #MODEL", field="model")
    url = url.strip().rstrip("/").removesuffix("/get_reward")
    return OpenRLHFRewardScorer(url, batch_size=batch_size, settings=default_settings(url, "", connection))
