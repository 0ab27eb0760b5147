"""What every client of a chat model or reward server is given: connection and endpoint settings, the outcome of one
request, the request budget of a run."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import Annotated, ClassVar, cast
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from cheems.errors import InputError
from cheems.settings import Settings, invalid, one_of, rule

BACKENDS = ("openai", "hf")
MAX_CONCURRENCY = 256  # more in flight only queues at the server and holds sockets open


# The checks of the numeric settings here and in the judge's and the generator's settings.
AT_LEAST_ONE = rule(lambda n: n >= 1, "must be at least 1, got {value}")
NOT_NEGATIVE = rule(lambda x: x >= 0, "must not be negative, got {value}")
NOT_NEGATIVE_WHOLE = rule(lambda n: n >= 0, "must be 0 or more, got {value}")
POSITIVE = rule(lambda x: x > 0, "must be positive, got {value}")


class ConnectionSettings(Settings):
    """How hard to try with a server over HTTP: the fields every client of one shares.

    The base of :class:`EndpointSettings` (the judge, the generator) and of the reward model servers'
    settings (:class:`cheems.models.server.RewardServerSettings`), so ``judge``, ``generate``, ``score``,
    ``eval`` and ``bon`` take the same options with the same defaults; the one HTTP client
    (:mod:`cheems.llm.client`) reads them.

    - ``max_consecutive_failures``: counted across all workers; no reply = connection refused or
      reset, timeout, HTTP 5xx.
    - ``give_up_after``: no usable reply for this long (never less than ``timeout``: one request may
      take that long) stops the run: a server that accepts and never answers, or keeps answering 429
      or 5xx. A rerun resumes from what is cached.
    - ``backoff_max``: also caps a server's ``Retry-After`` (``Retry-After: 3600`` must not park a run).
    - ``max_reply_bytes``: the most bytes read from one HTTP reply; a longer one is a failed request.
    """

    concurrency: Annotated[
        int,
        AT_LEAST_ONE,
        rule(
            lambda n: n <= MAX_CONCURRENCY,
            f"must be at most {MAX_CONCURRENCY}, got {{value}}",
            "more requests in flight only queue at the server; 8-64 suits most endpoints",
        ),
    ] = Field(8, description="Requests in flight at once (1-256).")
    timeout: Annotated[float, POSITIVE] = Field(60.0, description="Seconds per request.")
    max_retries: Annotated[int, NOT_NEGATIVE_WHOLE] = Field(
        4, description="Retries per request (429, 5xx, timeouts, resets)."
    )
    backoff_base: Annotated[float, NOT_NEGATIVE] = 0.5
    backoff_max: Annotated[float, NOT_NEGATIVE] = 30.0
    max_consecutive_failures: Annotated[int, AT_LEAST_ONE] = Field(
        32, description="Stop after this many requests in a row got no reply (server down); a rerun resumes."
    )
    give_up_after: Annotated[float, POSITIVE] = Field(
        120.0,
        description="Stop when the server has given no usable reply for this many seconds (it hangs, or keeps "
        "answering 429/5xx; never less than --timeout); a rerun resumes.",
    )
    max_reply_bytes: Annotated[int, AT_LEAST_ONE] = 2 * 1024 * 1024


class EndpointSettings(ConnectionSettings):
    """What every client of a chat model needs: where it is, how hard to try, how much to read.

    The base of :class:`JudgeSettings` and of generation's settings
    (:class:`cheems.llm.sampling.GenerateSettings`); the OpenAI-compatible client
    (:mod:`cheems.llm.client`) and the local model (:mod:`cheems.llm.local`) read
    only these fields (with :class:`ConnectionSettings`') and ``model_name``.

    - ``backend``: ``openai`` = any OpenAI-compatible chat-completions endpoint (vLLM, SGLang, Ollama,
      DeepSeek/Qwen/GLM APIs); ``hf`` = a local Hugging Face causal LM (folder or hub id as the model).
    - ``api_key_env``: the environment variable holding the key (``api_key`` overrides it; never
      printed, never in a dump).
    - ``max_requests``: ``None`` = unlimited.
    """

    ROLE: ClassVar[str] = "judge"  # what the model is called in error messages
    MODEL_FIELD: ClassVar[str] = "judge_model"  # the field naming the model
    URL_OPTION: ClassVar[str | None] = "--base-url"  # the option giving ``base_url``: the place of its errors
    KEY_OPTION: ClassVar[str | None] = "--api-key-env"  # the option naming the key's variable: the same

    base_url: str | None = Field(
        None,
        description=(
            "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vLLM, SGLang), "
            "http://localhost:11434/v1 (Ollama)."
        ),
    )
    backend: Annotated[str, one_of(BACKENDS, "backend")] = Field(
        "openai", description="openai (any chat-completions endpoint) or hf (a local Hugging Face causal LM)."
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="Environment variable holding the API key (unset: none sent to a server on this machine).",
    )
    api_key: str | None = Field(None, repr=False, exclude=True)
    max_requests: Annotated[int | None, rule(lambda n: n is None or n >= 0, "must be 0 or more, got {value}")] = Field(
        None, description="Request budget for this run; a rerun resumes where it stopped."
    )
    max_tokens: Annotated[int, AT_LEAST_ONE] = Field(64, description="Most tokens per reply.")
    temperature: Annotated[float, NOT_NEGATIVE] = 0.0
    batch_size: Annotated[int, AT_LEAST_ONE] = Field(8, description="hf backend: prompts per generate call.")
    device: str | None = Field(None, description="hf backend: cpu, cuda, cuda:1, ... (default: cuda if available).")

    @property
    def model_name(self) -> str:
        """The model: its name at the endpoint, or with ``backend: hf`` a folder or hub id."""
        return cast("str", getattr(self, self.MODEL_FIELD))

    @property
    def model_option(self) -> str:
        """The command-line option naming the model (for hints)."""
        return "--" + self.MODEL_FIELD.replace("_", "-")

    @model_validator(mode="after")
    def _endpoint(self) -> EndpointSettings:
        """The openai backend needs a valid base URL."""
        if self.backend == "openai":
            try:
                normalize_base_url(self.base_url)
            except InputError as e:
                raise invalid(e.message, e.hint, at=e.field) from None
        return self

    def check_api_key(self) -> None:
        """A run's first step: with the openai backend a missing or unusable API key is a user error here, before
        any file is read (:meth:`resolve_api_key`)."""
        if self.backend == "openai":
            self.resolve_api_key()

    def resolve_api_key(self) -> str:
        """The API key: ``api_key`` if given, else the environment variable ``api_key_env``.

        Unset is fine for a server on this machine (:func:`is_loopback`): the requests carry no key.
        """
        key = self.api_key if self.api_key is not None else os.environ.get(self.api_key_env)
        if key is None:
            if self.base_url and is_loopback(self.base_url):
                return ""
            raise InputError(
                f"environment variable {self.api_key_env} is not set, and the {self.ROLE} at {self.base_url} "
                "is not on this machine, so it needs an API key",
                path=self.KEY_OPTION,
                hint=f"export {self.api_key_env}=... or name the variable holding the key with --api-key-env",
            )
        key = key.strip()  # a key pasted with its line break is still the key
        if not all(" " < ch < "\x7f" for ch in key):  # it goes into an HTTP header; never echo it
            raise InputError(
                f"the API key in {self.api_key_env} has a space, a control character or a non-ASCII "
                "character, which an HTTP header cannot carry",
                path=self.KEY_OPTION,
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


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine: ``localhost`` (and ``*.localhost``), 127.0.0.0/8, ``::1``,
    or ``0.0.0.0`` / ``::`` (what vLLM prints as its address; a connection to it reaches this machine)."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name: only localhost is known to be this machine without asking DNS
        return False
    address = getattr(address, "ipv4_mapped", None) or address  # ::ffff:127.0.0.1
    return address.is_loopback or address.is_unspecified


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
