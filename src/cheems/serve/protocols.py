"""The two wire formats ``cheems serve`` speaks: OpenRLHF's remote reward model and vLLM's pooling API.

Each protocol is a request model (what a client may send; a bad field is one 4xx line), the samples it asks to
score (:class:`~cheems.serve.reward_rows.Sample`), and the reply built from their rewards, in the shape that
protocol's clients read:

- OpenRLHF ``POST /get_reward`` ``{"query": [str], "prompts": [str]?, "labels": [...]?}`` ->
  ``{"rewards", "scores", "extra_logs": {"truncated", "tokens"}}`` (one entry per query). A query is the policy's
  prompt and response as one text; with ``prompts`` it is split at the prompt, the response's trailing end-of-text
  markers are dropped and the pair is encoded as ``cheems score`` encodes it (a ChatML prompt is read back into
  its turns). Without ``prompts`` the query is scored as the text it is.
- vLLM ``POST /classify`` and ``POST /pooling`` ``{"model", "input" | "messages", "use_activation",
  "truncate_prompt_tokens"}``: ``messages`` ending in the assistant's turn are (prompt turns, response) rendered
  with the reward model's own format; ``input`` is text read as given. Rewards are raw unless
  ``use_activation`` (or the older ``activation`` / ``softmax``) is true, then sigmoid: unlike vLLM, whose
  default squashes them.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from cheems.data.schema import Message
from cheems.models.base import ChatError, Prompt, chat_item
from cheems.serve.reward_rows import Sample, Scored

# End-of-text markers a policy's decoded query ends with (OpenRLHF decodes with skip_special_tokens=False).
END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>", "<eos>", "<|end|>")
CHATML_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>\s*", re.DOTALL)
CHATML_OPEN = re.compile(r"<\|im_start\|>assistant\n?$")
# System prompts a policy's chat template writes when the data has none (Qwen2, Qwen2.5): not part of the prompt the
# reward model was trained on, so dropped; a chat RM's own template then writes its own default.
TEMPLATE_SYSTEMS = (
    "You are a helpful assistant.",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
)

NonEmpty = Annotated[list[StrictStr], Field(min_length=1)]


class RequestError(ValueError):
    """A request that is well-formed JSON but asks for what cannot be scored (HTTP ``status``)."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


class RewardRequest(BaseModel):
    """OpenRLHF's ``/get_reward`` body (unknown keys ignored, as its reference server does)."""

    model_config = ConfigDict(extra="ignore")

    query: NonEmpty
    prompts: list[StrictStr] | None = None
    labels: list[Any] | None = None

    @model_validator(mode="after")
    def _same_length(self) -> RewardRequest:
        if self.prompts is not None and len(self.prompts) != len(self.query):
            raise ValueError(f"prompts has {len(self.prompts)} entries and query {len(self.query)}: send one per query")
        return self


class Turn(BaseModel):
    """One chat message of a vLLM request."""

    model_config = ConfigDict(extra="ignore")

    role: StrictStr
    content: StrictStr


class PoolingRequest(BaseModel):
    """The fields of vLLM's ``/classify`` and ``/pooling`` bodies a reward model needs (others are ignored, as
    vLLM ignores them)."""

    model_config = ConfigDict(extra="ignore")

    model: StrictStr | None = None
    input: Any = None  # a text or a non-empty list of texts: checked by _input, whose errors name the field plainly
    messages: Annotated[list[Turn], Field(min_length=1)] | None = None
    truncate_prompt_tokens: Annotated[StrictInt, Field(ge=-1)] | None = None
    use_activation: StrictBool | None = None
    activation: StrictBool | None = None  # vLLM 0.10-0.15's name, still sent by verl
    softmax: StrictBool | None = None  # vLLM <= 0.9's name
    task: Literal["classify", "score", "reward"] | None = None  # /pooling: every task a reward head answers

    @field_validator("input")
    @classmethod
    def _input(cls, value: Any) -> str | list[str] | None:
        if value is None or isinstance(value, str):
            return value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("send a text or a list of texts (token ids are not taken)")
        if not value:
            raise ValueError("an empty list: send at least one text")
        return value

    @model_validator(mode="after")
    def _one_input(self) -> PoolingRequest:
        if (self.input is None) == (self.messages is None):
            raise ValueError("send exactly one of input (text) and messages (a chat ending in the assistant's turn)")
        return self

    def activated(self) -> bool:
        """Whether rewards go through a sigmoid: the first given of softmax, activation, use_activation (vLLM's
        order of precedence); default False, raw rewards."""
        for given in (self.softmax, self.activation, self.use_activation):
            if given is not None:
                return given
        return False

    def samples(self) -> list[Sample]:
        """The inputs to score: each text of ``input``, or the one (prompt turns, response) of ``messages``."""
        if self.messages is not None:
            return [chat_sample(self.messages)]
        texts = [self.input] if isinstance(self.input, str) else list(self.input or [])
        return [Sample(None, t) for t in texts]


def chat_sample(turns: list[Turn]) -> Sample:
    """(prompt turns, response) of a chat whose last turn is the assistant's, after at least one user turn
    (:func:`~cheems.models.base.chat_item`'s rule); a 422 naming ``messages`` else."""
    try:
        prompt, response = chat_item(turns)
    except ChatError as e:
        raise RequestError(f"messages: {e}") from None
    return Sample(prompt, response)


# ---------------------------------------------------------------- OpenRLHF


def reward_samples(request: RewardRequest, ends: tuple[str, ...] = END_MARKERS) -> list[Sample]:
    """The samples of a ``/get_reward`` request: each query split at its prompt when ``prompts`` are sent and the
    query starts with it, else the query as a whole text. ``ends`` are the markers stripped off a response's end."""
    prompts: list[str | None] = list(request.prompts) if request.prompts is not None else [None] * len(request.query)
    return [_split_query(q, p, ends) for q, p in zip(request.query, prompts)]


def _split_query(query: str, prompt: str | None, ends: tuple[str, ...]) -> Sample:
    if prompt is None or not prompt or not query.startswith(prompt):
        return Sample(None, query)
    return Sample(chatml_turns(prompt), strip_ends(query[len(prompt) :], ends))


def strip_ends(response: str, ends: tuple[str, ...]) -> str:
    """``response`` without the end-of-text markers (and whitespace) it ends with."""
    text = response.rstrip()
    while (end := next((e for e in ends if e and text.endswith(e)), None)) is not None:
        text = text[: -len(end)].rstrip()
    return text


def chatml_turns(prompt: str) -> Prompt:
    """A prompt the policy rendered in ChatML (``<|im_start|>role\\n...<|im_end|>``, then the assistant's
    opening) read back into its turns, so the reward model renders it its own way (a system turn that is only the
    policy template's default, :data:`TEMPLATE_SYSTEMS`, is dropped); any other text as it is."""
    opening = CHATML_OPEN.search(prompt)
    body = prompt[: opening.start()] if opening else prompt
    turns = [(m.group(1), m.group(2)) for m in CHATML_TURN.finditer(body)]
    if not opening or not turns or sum(len(m.group(0)) for m in CHATML_TURN.finditer(body)) != len(body):
        return prompt
    if not any(role == "user" for role, _ in turns):
        return prompt
    if turns[0][0] == "system" and turns[0][1].strip() in TEMPLATE_SYSTEMS:
        turns = turns[1:]
    return [Message(role=role, content=content) for role, content in turns]


def reward_reply(scored: list[Scored]) -> dict[str, Any]:
    """OpenRLHF's reply: ``rewards`` and ``scores`` (the same raw rewards) and per-sample ``extra_logs``."""
    rewards = [s.reward for s in scored]
    return {
        "rewards": rewards,
        "scores": rewards,
        "extra_logs": {"truncated": [int(s.truncated) for s in scored], "tokens": [s.tokens for s in scored]},
    }


# ---------------------------------------------------------------- vLLM


def _usage(scored: list[Scored]) -> dict[str, Any]:
    tokens = sum(s.tokens for s in scored)
    return {
        "prompt_tokens": tokens,
        "total_tokens": tokens,
        "completion_tokens": 0,
        "prompt_tokens_details": None,
        "truncated_inputs": sum(s.truncated for s in scored),
    }


def _value(reward: float, activated: bool) -> float:
    """The raw reward, or its sigmoid (written so neither side overflows)."""
    if not activated:
        return reward
    if reward >= 0:
        return 1 / (1 + math.exp(-reward))
    return math.exp(reward) / (1 + math.exp(reward))


def classify_reply(scored: list[Scored], model: str, activated: bool, label: str) -> dict[str, Any]:
    """vLLM's ``ClassificationResponse``: one ``probs`` of one value per input."""
    data = [
        {"index": i, "label": label, "probs": [_value(s.reward, activated)], "num_classes": 1}
        for i, s in enumerate(scored)
    ]
    return _listing("classify", model, data, scored)


def pooling_reply(scored: list[Scored], model: str, activated: bool) -> dict[str, Any]:
    """vLLM's ``PoolingResponse`` as its ``classify`` task gives it: one ``data`` of one value per input."""
    data = [{"index": i, "object": "pooling", "data": [_value(s.reward, activated)]} for i, s in enumerate(scored)]
    return _listing("pool", model, data, scored)


def _listing(kind: str, model: str, data: list[dict[str, Any]], scored: list[Scored]) -> dict[str, Any]:
    return {
        "id": f"{kind}-{uuid.uuid4().hex}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": data,
        "usage": _usage(scored),
    }


def models_reply(names: list[str], root: str, max_len: int | None) -> dict[str, Any]:
    """vLLM's ``GET /v1/models``: one entry per name clients may send."""
    created = int(time.time())
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "cheems",
                "root": root,
                "parent": None,
                "max_model_len": max_len,
            }
            for name in names
        ],
    }
