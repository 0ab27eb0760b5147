"""Judge settings, the outcome of one judged pair, and the request budget shared by the backends."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from cheems.errors import InputError

BACKENDS = ("openai", "hf")
MAX_CONCURRENCY = 256  # more in flight only queues at the server and holds sockets open
RAW_KEEP_CHARS = 2000  # of a judge's reply, what is stored (cache, failures file, output): head and tail


@dataclass
class JudgeSettings:
    """Everything ``judge_records`` needs. Only ``judge_model`` (and ``base_url`` for ``openai``) is required.

    - ``backend``: ``openai`` = any OpenAI-compatible chat-completions endpoint (vLLM, SGLang, Ollama,
      DeepSeek/Qwen/GLM APIs); ``hf`` = a local Hugging Face causal LM (folder or hub id in ``judge_model``).
    - ``api_key_env``: the environment variable holding the key (``api_key`` overrides it; never printed).
    - ``concurrency``: requests in flight at once (``openai``); ``batch_size``: prompts per generate call (``hf``).
    - ``seed``: fixes the shown order of each pair; ``both_orders``: ask each pair in both orders.
    - ``cache``: the SQLite judgement cache (default ``$CHEEMS_CACHE_DIR/judge.sqlite``).
    - ``timeout``: seconds per HTTP request; ``max_retries``: retries of a failed request (429, 5xx,
      timeout, reset, malformed JSON) and, separately, re-asks after a reply with no A/B/C verdict.
    - ``max_requests``: request budget for this run (``None`` = unlimited); a rerun resumes.
    - ``criteria``: YAML/JSON file mapping category -> criterion groups, consulted before the defaults.
    - ``price_in`` / ``price_out``: price per 1M input / output tokens, for the cost report.
    - ``retry_failed``: ask again pairs whose cached outcome is a verdict failure.
    - ``max_consecutive_failures``: stop the run after this many requests in a row (across all
      workers) got no reply (connection refused or reset, timeout, HTTP 5xx): the server is down.
    - ``max_reply_bytes``: the most bytes read from one HTTP reply; a longer one is a failed request.
    """

    judge_model: str
    base_url: str | None = None
    backend: Literal["openai", "hf"] = "openai"
    api_key_env: str = "OPENAI_API_KEY"
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = 8
    seed: int = 0
    both_orders: bool = False
    cache: str | Path | None = None
    timeout: float = 60.0
    max_retries: int = 4
    max_requests: int | None = None
    criteria: str | Path | None = None
    price_in: float = 0.0
    price_out: float = 0.0
    max_tokens: int = 64
    temperature: float = 0.0
    retry_temperature: float = 0.7  # re-asks sample: a deterministic judge would repeat the same bad reply
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    retry_failed: bool = False
    batch_size: int = 8
    device: str | None = None
    max_consecutive_failures: int = 32
    max_reply_bytes: int = 2 * 1024 * 1024

    def check(self) -> None:
        """Raise ``InputError`` for a setting that cannot work."""
        if not self.judge_model or not self.judge_model.strip():
            raise InputError(
                "the judge model is empty", field="judge_model", hint="e.g. --judge-model qwen2.5-72b-instruct"
            )
        if self.backend not in BACKENDS:
            raise InputError(
                f"unknown backend '{self.backend}'", field="backend", hint=f"use one of {', '.join(BACKENDS)}"
            )
        if self.backend == "openai":
            normalize_base_url(self.base_url)
        positive = {
            "concurrency": self.concurrency,
            "batch_size": self.batch_size,
            "max_tokens": self.max_tokens,
            "max_consecutive_failures": self.max_consecutive_failures,
            "max_reply_bytes": self.max_reply_bytes,
        }
        for name, value in positive.items():
            if value < 1:
                raise InputError(f"must be at least 1, got {value}", field=name)
        if self.concurrency > MAX_CONCURRENCY:
            raise InputError(
                f"must be at most {MAX_CONCURRENCY}, got {self.concurrency}",
                field="concurrency",
                hint="more requests in flight only queue at the server; 8-64 suits most endpoints",
            )
        for name in (
            "timeout",
            "price_in",
            "price_out",
            "temperature",
            "retry_temperature",
            "backoff_base",
            "backoff_max",
        ):
            if not math.isfinite(getattr(self, name)):
                raise InputError(f"must be a finite number, got {getattr(self, name)}", field=name)
        if self.timeout <= 0:
            raise InputError(f"must be positive, got {self.timeout}", field="timeout")
        if self.max_retries < 0:
            raise InputError(f"must be 0 or more, got {self.max_retries}", field="max_retries")
        if self.max_requests is not None and self.max_requests < 0:
            raise InputError(f"must be 0 or more, got {self.max_requests}", field="max_requests")
        for name in ("price_in", "price_out", "temperature", "retry_temperature", "backoff_base", "backoff_max"):
            if getattr(self, name) < 0:
                raise InputError(f"must not be negative, got {getattr(self, name)}", field=name)

    def resolve_api_key(self) -> str:
        """The API key: ``api_key`` if given, else the environment variable ``api_key_env``."""
        key = self.api_key if self.api_key is not None else os.environ.get(self.api_key_env)
        if key is None:
            raise InputError(
                f"environment variable {self.api_key_env} is not set",
                field="api_key_env",
                hint=f"export {self.api_key_env}=... (any value, e.g. EMPTY, for a local server without "
                "auth) or name another variable with --api-key-env",
            )
        key = key.strip()  # a key pasted with its line break is still the key
        if not all(" " < ch < "\x7f" for ch in key):  # it goes into an HTTP header; never echo it
            raise InputError(
                f"the API key in {self.api_key_env} has a space, a control character or a non-ASCII "
                "character, which an HTTP header cannot carry",
                field="api_key_env",
                hint="copy the key again without quotes or spaces",
            )
        return key


def normalize_base_url(url: str | None) -> str:
    """``http(s)://host[:port]/path`` without a trailing ``/`` or ``/chat/completions``; InputError otherwise."""
    hint = (
        "e.g. http://localhost:8000/v1 (vLLM, SGLang), http://localhost:11434/v1 (Ollama), https://api.deepseek.com/v1"
    )
    if not url or not url.strip():
        raise InputError("the openai backend needs a base URL", field="base_url", hint=hint)
    url = url.strip().rstrip("/")
    url = url.removesuffix("/chat/completions").rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as e:
        raise InputError(f"'{url}' is not a valid URL: {e}", field="base_url", hint=hint) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"'{url}' is not an http(s) URL", field="base_url", hint=hint)
    return url


def clip_reply(text: str | None) -> str | None:
    """A judge's reply as stored: its head and tail when longer than ``RAW_KEEP_CHARS`` (the verdict is at one end)."""
    if text is None or len(text) <= RAW_KEEP_CHARS:
        return text
    half = RAW_KEEP_CHARS // 2
    return f"{text[:half]}\n…[{len(text) - 2 * half} characters cut]…\n{text[-half:]}"


@dataclass
class Outcome:
    """What happened to one question: a label (A/B/C), or a failure reason; tokens and requests spent.

    ``final``: the outcome belongs in the cache (a verdict, or a verdict failure after all re-asks);
    transport failures are not final, so a rerun asks again. ``not_attempted``: stopped by the
    request budget before a verdict (never cached).
    """

    label: str | None = None
    failure: str | None = None
    detail: str = ""
    raw: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    final: bool = False
    not_attempted: bool = False


class RequestBudget:
    """At most ``limit`` requests for the whole run (``None`` = no limit)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> bool:
        """Spend one request; False (and nothing spent) when the budget is used up."""
        if self.limit is not None and self.used >= self.limit:
            return False
        self.used += 1
        return True

    @property
    def exhausted(self) -> bool:
        """Whether no request is left."""
        return self.limit is not None and self.used >= self.limit
