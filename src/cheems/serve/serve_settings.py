"""The settings of ``cheems serve`` (where it listens, how it batches, what it refuses); which model scores and how
is :class:`cheems.models.scoring.ScoringSettings`, given beside them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from cheems.settings import Number, Settings, Text, Whole, one_of

TRUNCATE_RULES = ("prompt", "error")


class ServeSettings(Settings):
    """Where ``cheems serve`` listens, how it gathers requests into batches, and what it refuses."""

    host: Annotated[Text, Field(description="Address to listen on (loopback unless you say so).")] = "127.0.0.1"
    port: Annotated[Whole, Field(ge=1, le=65535, description="Port to listen on.")] = 8766
    max_batch: Annotated[
        Whole, Field(ge=1, description="Samples gathered from concurrent requests into one scoring call.")
    ] = 32
    max_wait_ms: Annotated[
        Number,
        Field(ge=0, le=10_000, description="Longest wait for more requests before a batch that is not full runs."),
    ] = 5.0
    max_queue: Annotated[
        Whole,
        Field(ge=1, description="Samples waiting at most; past it a request gets 503 with Retry-After."),
    ] = 1024
    request_timeout: Annotated[
        Number, Field(gt=0, description="Seconds a request may wait for its rewards before it gets 503.")
    ] = 60.0
    truncate: Annotated[Text, one_of(TRUNCATE_RULES, "--truncate rule")] = Field(
        "prompt",
        description="An input over --max-length: prompt (cut tokens from its start, counted in the reply) or "
        "error (refuse it with 400).",
    )
    api_key_env: Annotated[
        Text | None,
        Field(description="Environment variable holding the API key; requests must send Authorization: Bearer KEY."),
    ] = None
    served_model_name: Annotated[
        Text | None, Field(description="Another name clients may send as 'model' (besides MODEL and its path).")
    ] = None
