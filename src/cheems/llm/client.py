"""Judge (and generator) over any OpenAI-compatible chat-completions endpoint: async HTTP, bounded concurrency.

``concurrency`` workers, each with its own ``httpx.AsyncClient`` holding one keep-alive
connection, take the next question when done with the last, so at most ``concurrency``
questions are in flight and memory does not grow with the number of pairs. Per request: a total deadline
(``timeout``); retries with exponential backoff and jitter on 429, 5xx, timeouts, connection
errors and malformed JSON, honouring ``Retry-After`` up to ``backoff_max`` (a server asking for an
hour must not park the run). A reply without a clear A/B/C verdict is re-asked (sampled at
``retry_temperature``), then recorded as failed.

The run stops with a one-line error when every later request would fail the same way: 401/403/404,
``max_consecutive_failures`` requests in a row (across workers) without a usable reply: refused,
reset, timed out or HTTP 5xx (the server went away; workers asleep in a backoff are stopped too), or
no usable reply at all for ``give_up_after`` seconds (a server that accepts and never answers, or
answers only 429 or 5xx).
At most ``max_reply_bytes`` of a reply are read. The API key never leaves this module: text from the
server (replies, error bodies, exception messages) is stored with it redacted.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar, cast

from cheems.errors import CheemsWarning, InputError
from cheems.llm.endpoint import EndpointSettings, Outcome, RequestBudget, normalize_base_url
from cheems.outputs import interruptible

J = TypeVar("J")
R = TypeVar("R")
Handler = Callable[[Any, Any], Awaitable[None]]  # (httpx client, job) -> handled

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 524, 529}
FATAL_STATUS = {
    401: "the server refused the API key",
    403: "the API key is not allowed to use this model or endpoint",
    404: "not found (wrong base URL or model name?)",
}
REDACTED = "[API key]"
MIN_SECRET = 8  # shorter "keys" (EMPTY, x) are placeholders; replacing them would rewrite ordinary text
# The most tokens the replies to one item may report together: exact in JSON, inside SQLite's 64-bit
# integers (a count over 2^63 once crashed the cache's INSERT), and summed over a whole run still a number.
MAX_USAGE_TOKENS = 2**53 - 1


class _Fatal(Exception):
    """A condition that makes every request fail: stop the run with this one-line error."""

    def __init__(
        self, message: str, field: str | None = None, hint: str | None = None, path: str | None = None
    ) -> None:
        super().__init__(message)
        self.error = InputError(message, path=path, field=field, hint=hint)


async def _deadline(awaitable: Any, seconds: float) -> Any:
    """``awaitable`` with a total deadline (httpx's own timeouts are per read/write, not per request)."""
    if sys.version_info >= (3, 11):  # asyncio.timeout runs in the current task: no extra task per request
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (a number or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from datetime import datetime, timezone

        return max(0.0, (parsedate_to_datetime(value) - datetime.now(timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return None


def redact(text: str, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` replaced (servers may echo the Authorization header)."""
    return text.replace(secret, REDACTED) if len(secret) >= MIN_SECRET else text


def _error_text(body: bytes | None) -> str:
    """The server's error message (OpenAI shape ``{"error": {"message"}}``) or the start of the body."""
    if body is None:
        return "(reply body over the size limit)"
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            err = data.get("error")
            msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else data.get("message")
            if isinstance(msg, str) and msg:
                return msg[:300]
    except ValueError:  # not JSON, or not UTF-8
        pass
    return body[:300].decode("utf-8", errors="replace").strip()


async def _read_capped(response: Any, limit: int) -> bytes | None:
    """The reply body, or None when it is longer than ``limit`` bytes (reading stops there)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in response.aiter_bytes():  # decoded: a gzip bomb counts by what it expands to
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def usage_tokens(data: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt tokens, completion tokens) from a reply's ``usage``; 0 for a count the server leaves out.

    None when a count is there but is not a whole number from 0 to ``MAX_USAGE_TOKENS`` (a float, a
    string, a negative or huge number): the server's counts are then unknown, never stored.
    """
    usage = data.get("usage")
    if usage is None:
        return 0, 0
    if not isinstance(usage, dict):
        return None
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        count = usage.get(name)
        if count is None:
            count = 0
        elif isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_USAGE_TOKENS:
            return None
        counts.append(count)
    return counts[0], counts[1]


@dataclass(frozen=True)
class Reply:
    """A chat model's answer: ``message.content`` (``""`` for null) and whether reasoning came beside it."""

    text: str
    reasoning: bool = False  # a non-empty ``reasoning_content`` or ``reasoning`` (DeepSeek, vLLM, Ollama)


def reply_text(data: Any) -> tuple[Reply, tuple[int, int] | None]:
    """(the :class:`Reply`, :func:`usage_tokens`) from a chat-completions body; ValueError if malformed.

    Only ``message.content`` counts: a separate ``reasoning_content`` is reasoning, never a verdict
    nor a sample; only whether there was one is kept (a reply of reasoning only is a failure of its own).
    """
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ValueError("no 'choices' in the reply")
    message = data["choices"][0].get("message") if isinstance(data["choices"][0], dict) else None
    if not isinstance(message, dict):
        raise ValueError("no 'message' in choices[0]")
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        raise ValueError("'content' is not text")
    reasoning = any(isinstance(message.get(k), str) and message[k].strip() for k in ("reasoning_content", "reasoning"))
    return Reply(content or "", reasoning), usage_tokens(data)


class ChatClient:
    """The transport to an OpenAI-compatible ``/chat/completions`` endpoint: workers, retries, fatal stops.

    What is asked and what a reply means is the subclass's: :class:`OpenAIJudge` (verdicts) and
    :class:`cheems.llm.sampling.OpenAIGenerator` (free text) call :meth:`run_many` with a
    coroutine that handles one job, using :meth:`complete` for each request; the reward model server
    scorers (:mod:`cheems.models.server`) use :meth:`post_json`, the same retries for any JSON endpoint.
    """

    def __init__(self, settings: EndpointSettings, budget: RequestBudget) -> None:
        self.base_url = normalize_base_url(settings.base_url)
        self.api_key = settings.resolve_api_key()
        self.settings = settings
        self.budget = budget
        self._rng = random.Random()  # jitter only: needs no seed
        self._any_response = False  # a server that never answered + connection refused = wrong URL
        self._down_streak = 0  # requests in a row, across workers, with no usable reply (one event loop: no lock)
        self._usage_warned = False  # a server's broken token counts are reported once per run
        self._answered_at = 0.0  # monotonic time of the last usable reply (or of the run's start)
        self._last_failure = ("", "")  # (URL, what went wrong) of the latest failed request

    @property
    def identity(self) -> dict[str, Any]:
        """What makes this model's replies this model's (part of the cache key); no secrets."""
        s = self.settings
        return {
            "backend": "openai",
            "base_url": self.base_url,
            "model": s.model_name,
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
        }

    def run_many(self, jobs: Iterable[J], handle: Handler) -> None:
        """Run ``handle(client, job)`` for every job, ``concurrency`` at a time (in completion order)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(interruptible(self._run(jobs, handle)))
            return
        # Called from inside an event loop (a notebook): run ours in a thread of its own, with the
        # caller's context (a score cache's hook, a progress bar) as asyncio.run would have it.
        errors: list[BaseException] = []
        context = contextvars.copy_context()

        def target() -> None:
            try:
                context.run(asyncio.run, self._run(jobs, handle))
            except BaseException as e:  # re-raised in the caller's thread
                errors.append(e)

        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]

    async def _run(self, jobs: Iterable[J], handle: Handler) -> None:
        import httpx

        k = self.settings.concurrency
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        timeout = httpx.Timeout(self.settings.timeout)
        ssl_context = httpx.create_ssl_context()  # built once, shared by every worker's client
        queue: Iterator[J] = iter(jobs)  # shared by the workers; safe: one thread, no await inside next()

        async def worker() -> None:
            # One client with one keep-alive connection per worker: httpcore scans every connection
            # of a pool on each request, which costs more than the request itself at K = 64.
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            async with httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout, verify=ssl_context) as client:
                for job in queue:
                    if self.budget.exhausted:
                        return
                    await handle(client, job)

        workers = [asyncio.create_task(worker()) for _ in range(k)]
        running = asyncio.gather(*workers)
        stalled: list[_Fatal] = []
        self._answered_at = time.monotonic()
        watchdog = asyncio.create_task(self._watch(running, stalled))
        try:
            await running
        except BaseException as e:
            # The others may be sleeping in a backoff: stop them now (what they hold is not final, not cached).
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if stalled:
                raise stalled[0].error from None
            if isinstance(e, _Fatal):
                raise e.error from None
            raise
        finally:
            watchdog.cancel()

    async def _watch(self, running: asyncio.Future[Any], stalled: list[_Fatal]) -> None:
        """Stop the run (``running``, into ``stalled``) once no usable reply came for ``give_up_after`` s.

        A worker waits at most ``timeout`` for one request, but retries and backoffs (honouring the
        server's ``Retry-After``) can keep a run going for many minutes on a server that accepts and
        never answers, or answers only 429: this bounds the whole wait without progress.
        """
        s = self.settings
        limit = max(s.give_up_after, s.timeout)  # one request may take ``timeout``: never stop it sooner
        while (left := self._answered_at + limit - time.monotonic()) > 0:
            await asyncio.sleep(left)
        url, last = self._last_failure
        stalled.append(
            _Fatal(
                f"no answer from the {s.ROLE} at {url or self.base_url} for {limit:g} s (last try: "
                f"{last or 'no reply yet'})",
                field="base_url",
                hint="is the server overloaded or stuck? check its log and rerun the same command; for a server "
                "this slow raise --give-up-after (and --timeout)",
            )
        )
        running.cancel()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After``, or exponential backoff
        with jitter; never more than ``backoff_max``."""
        s = self.settings
        if retry_after is not None:
            return min(retry_after, s.backoff_max)
        return cast("float", min(s.backoff_max, s.backoff_base * 2**attempt) * (0.5 + 0.5 * self._rng.random()))

    async def _post(self, client: Any, url: str, body: dict[str, Any]) -> tuple[int, Any, bytes | None]:
        """One POST: (status, headers, body or None when over ``max_reply_bytes``)."""
        async with client.stream("POST", url, json=body) as response:
            data = await _read_capped(response, self.settings.max_reply_bytes)
            return response.status_code, response.headers, data

    def _failed(self, outcome: Outcome, url: str, failure: str, detail: str, *, down: bool = False) -> None:
        """Record a failed request; ``down``: it got no usable reply (no reply at all, or a 5xx).

        Such requests are counted across workers; ``max_consecutive_failures`` in a row stop the run.
        """
        outcome.failure, outcome.detail = failure, self._redact(detail)
        shown = f"HTTP {failure[5:]}: {outcome.detail}" if failure.startswith("http_") else outcome.detail
        self._last_failure = (url, shown)
        if not down:
            return
        self._down_streak += 1
        if self._down_streak < self.settings.max_consecutive_failures:
            return
        last = f"{self._down_streak} requests in a row failed (last: {outcome.detail})"
        role = self.settings.ROLE
        if self._any_response:
            raise _Fatal(
                f"the {role} at {url} stopped answering: {last}",
                field="base_url",
                path=self.settings.URL_OPTION,
                hint="is the server still up? start it again (or fix --base-url) and rerun the same command",
            )
        raise _Fatal(
            f"cannot reach the {role} at {url}: {last}",
            field="base_url",
            path=self.settings.URL_OPTION,
            hint="is the server running, and is the URL right?",
        )

    async def complete(
        self, client: Any, messages: list[dict[str, str]], outcome: Outcome, temperature: float, **extra: Any
    ) -> Reply | None:
        """One chat completion with retries; the reply (its text redacted), or None with ``outcome`` saying why.

        ``extra`` goes into the request body as it is (e.g. ``seed``).
        """
        s = self.settings
        body = {
            "model": s.model_name,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": s.max_tokens,
            **extra,
        }
        reply = await self.post_json(client, f"{self.base_url}/chat/completions", body, outcome, reply_text)
        if reply is None:
            return None
        answer, usage = reply
        if usage is not None:
            usage = (outcome.prompt_tokens + usage[0], outcome.completion_tokens + usage[1])
        if usage is not None and max(usage) <= MAX_USAGE_TOKENS:  # the item's total must fit as well
            outcome.prompt_tokens, outcome.completion_tokens = usage
        elif not self._usage_warned:
            self._usage_warned = True
            warnings.warn(
                f"the {s.ROLE} at {self.base_url} reports token counts ('usage') that are not whole numbers "
                "from 0 to 2^53 - 1: its counts are left out of the token totals and the cost",
                CheemsWarning,
                stacklevel=2,
            )
        return Reply(self._redact(answer.text), answer.reasoning)

    async def post_json(
        self, client: Any, url: str, body: dict[str, Any], outcome: Outcome, parse: Callable[[Any], R]
    ) -> R | None:
        """POST ``body`` to ``url`` with retries; ``parse`` of the JSON reply, or None with ``outcome`` saying why.

        ``parse`` raises ValueError for a reply it cannot use (retried like malformed JSON). Fatal
        statuses and a server that stays down stop the run (see the module docstring).
        """
        import httpx

        s = self.settings
        for attempt in range(s.max_retries + 1):
            if not self.budget.take():
                outcome.not_attempted, outcome.failure, outcome.detail = True, "budget", "request budget used up"
                return None
            outcome.requests += 1
            retry_after = None
            try:
                status, headers, data = await _deadline(self._post(client, url, body), s.timeout)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                self._failed(outcome, url, "timeout", f"no reply within {s.timeout:g} s", down=True)
            except httpx.ConnectError as e:
                self._failed(outcome, url, "connection", f"cannot connect: {e}", down=True)
                if not self._any_response and attempt == s.max_retries:
                    raise _Fatal(
                        f"cannot reach the {s.ROLE} at {url} ({outcome.detail})",
                        field="base_url",
                        path=s.URL_OPTION,
                        hint="is the server running, and is the URL right?",
                    ) from None
            except httpx.TransportError as e:  # reset, server hung up, protocol error
                self._failed(outcome, url, "connection", f"{type(e).__name__}: {e}", down=True)
            else:
                self._any_response = True
                self._down_streak = 0 if status < 500 else self._down_streak
                if status in FATAL_STATUS:
                    raise _Fatal(
                        self._redact(f"HTTP {status} from {url}: {FATAL_STATUS[status]}: {_error_text(data)}"),
                        hint=f"check --base-url, {s.model_option} and ${s.api_key_env}",
                        path=s.URL_OPTION if status == 404 else s.KEY_OPTION,
                    )
                if status == 200 and data is None:  # not retried: the same question gets the same huge reply
                    self._failed(outcome, url, "too_large", f"reply over {s.max_reply_bytes} bytes, not read")
                    self._answered_at = time.monotonic()  # an answer, if a useless one: the run moves on
                    return None
                if status == 200:
                    try:
                        result = parse(json.loads(data))
                    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                        self._failed(outcome, url, "malformed", f"malformed reply: {str(e)[:120]}")
                    else:
                        self._answered_at = time.monotonic()
                        return result
                elif status in RETRY_STATUS or status >= 500:
                    self._failed(outcome, url, f"http_{status}", _error_text(data), down=status >= 500)
                    retry_after = retry_after_seconds(headers.get("retry-after"))
                else:  # e.g. 400 for a prompt longer than the model's context: this question only, no retry
                    self._failed(outcome, url, f"http_{status}", _error_text(data))
                    self._answered_at = time.monotonic()
                    return None
            if attempt < s.max_retries:
                await asyncio.sleep(self._backoff(attempt, retry_after))
        outcome.detail = f"{outcome.detail} (after {s.max_retries + 1} attempts)"
        return None

    def _redact(self, text: str) -> str:
        return redact(text, self.api_key)
