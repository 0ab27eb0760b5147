"""What the judge is and how it is asked: :class:`JudgeSettings`, all that :func:`cheems.judge.judge_records` needs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from cheems.llm.endpoint import AT_LEAST_ONE, NOT_NEGATIVE, NOT_NEGATIVE_WHOLE, EndpointSettings
from cheems.settings import Cli, Settings, rule


class _JudgeModel(Settings):
    """The judge's model, a base of its own so that it stays ``JudgeSettings``' first field
    (``JudgeSettings("qwen2.5-72b-instruct", base_url=...)``: a base listed last comes first)."""

    judge_model: Annotated[
        str, rule(lambda name: name.strip(), "the judge model is empty", "e.g. --judge-model qwen2.5-72b-instruct")
    ] = Field(description="Model name at the endpoint; with --backend hf, a causal LM folder or hub id.")


class JudgeSettings(EndpointSettings, _JudgeModel):
    """Everything ``judge_records`` needs. Only ``judge_model`` (and ``base_url`` for ``openai``) is required.

    The endpoint's fields are :class:`EndpointSettings`'. ``max_retries`` counts retries of a failed
    request (429, 5xx, timeout, reset, malformed JSON) and, separately, re-asks after a reply with
    no A/B/C verdict.
    """

    seed: int = Field(0, description="Fixes which response of each pair is shown first.")
    both_orders: Annotated[bool, Cli(flag=True)] = Field(
        False, description="Ask each pair in both orders and report their consistency."
    )
    cache: str | Path | None = Field(
        None, description="Judgement cache (SQLite); default $CHEEMS_CACHE_DIR/judge.sqlite."
    )
    max_retries: Annotated[int, NOT_NEGATIVE_WHOLE] = Field(
        4, description="Retries per request (429, 5xx, timeouts, resets) and re-asks after a reply without A/B/C."
    )
    criteria: str | Path | None = Field(
        None,
        description=(
            "YAML/JSON file mapping category -> criterion groups (language, knowledge, reasoning, "
            "code, safety, complex_instructions)."
        ),
    )
    template: str | Path | None = Field(
        None,
        description=(
            "YAML/JSON prompt template {system, user, name} replacing the built-in one; user uses {question}, "
            "{answer_a}, {answer_b} (and {criteria}, {category}, {reference}, {task}, {nonce})."
        ),
    )
    price_in: Annotated[float, NOT_NEGATIVE] = Field(0.0, description="Price per 1M input tokens, for the cost report.")
    price_out: Annotated[float, NOT_NEGATIVE] = Field(0.0, description="Price per 1M output tokens.")
    max_tokens: Annotated[int, AT_LEAST_ONE] = Field(64, description="Most tokens the judge may reply with.")
    # re-asks sample: a deterministic judge would repeat the same bad reply
    retry_temperature: Annotated[float, NOT_NEGATIVE] = 0.7
    retry_failed: Annotated[bool, Cli(flag=True)] = Field(
        False, description="Ask again pairs whose cached verdict failed."
    )

    def inputs(self) -> list[tuple[str, Path | str | None]]:
        """The files a judge run reads, named by their options (the cache too: an output must not replace it)."""
        from cheems.judge.judgements import JudgeCache

        return [("--template", self.template), ("--criteria", self.criteria), ("--cache", JudgeCache(self.cache).path)]
