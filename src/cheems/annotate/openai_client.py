"""Judge over any OpenAI-compatible chat-completions endpoint: async HTTP, bounded concurrency.

``concurrency`` workers, each with its own ``httpx.AsyncClient`` holding one keep-alive
connection, take the next question when done with the last, so at most ``concurrency``
questions are in flight and memory does not grow with the number of pairs. Per request: a total deadline
(``timeout``); retries with exponential backoff and jitter on 429, 5xx, timeouts, connection
errors and malformed JSON, honouring ``Retry-After``. A reply without a clear A/B/C verdict is
re-asked (sampled at ``retry_temperature``), then recorded as failed. 401/403/404 stop the run
with a one-line error: every later request would fail the same way.
"""

from __future__ import annotations

import asyncio
import random
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from email.utils import parsedate_to_datetime
from typing import Any

from cheems.annotate.settings import JudgeSettings, Outcome, RequestBudget, normalize_base_url
from cheems.annotate.verdict import parse_verdict
from cheems.errors import InputError

Job = tuple[str, list[dict[str, str]]]  # (cache item key, messages)
OnDone = Callable[[str, Outcome], None]

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 524, 529}
FATAL_STATUS = {401: "the server refused the API key", 403: "the API key is not allowed to use this model or endpoint",
                404: "not found (wrong base URL or model name?)"}
RETRY_AFTER_MAX = 120.0  # never sleep longer than this on a server's say-so


class _Fatal(Exception):
    """A condition that makes every request fail: stop the run with this one-line error."""

    def __init__(self, message: str, field: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.error = InputError(message, field=field, hint=hint)


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


def _error_text(response: Any) -> str:
    """The server's error message (OpenAI shape ``{"error": {"message"}}``) or the start of the body."""
    try:
        data = response.json()
        if isinstance(data, dict):
            err = data.get("error")
            msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else data.get("message")
            if isinstance(msg, str) and msg:
                return msg[:300]
    except ValueError:
        pass
    return response.text[:300].strip()


def reply_text(data: Any) -> tuple[str, int, int]:
    """(content, prompt tokens, completion tokens) from a chat-completions body; ValueError if malformed.

    Only ``message.content`` counts: a separate ``reasoning_content`` (DeepSeek-style) is reasoning
    and never a verdict.
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
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    tokens = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    pt, ct = (t if isinstance(t, int) and not isinstance(t, bool) else 0 for t in tokens)
    return content or "", pt, ct


class OpenAIJudge:
    """A judge behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(self, settings: JudgeSettings, budget: RequestBudget) -> None:
        self.base_url = normalize_base_url(settings.base_url)
        self.api_key = settings.resolve_api_key()
        self.settings = settings
        self.budget = budget
        self._rng = random.Random()  # jitter only: needs no seed
        self._any_response = False  # a server that never answered + connection refused = wrong URL
        self._fatal: InputError | None = None

    @property
    def identity(self) -> dict[str, Any]:
        """What makes this judge's verdicts this judge's (part of the cache key); no secrets."""
        s = self.settings
        return {"backend": "openai", "base_url": self.base_url, "model": s.judge_model,
                "temperature": s.temperature, "max_tokens": s.max_tokens}

    def judge_many(self, jobs: Iterable[Job], on_done: OnDone) -> None:
        """Judge every job, calling ``on_done(item, outcome)`` as each finishes (in completion order)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self._run(jobs, on_done))
            return
        # Called from inside an event loop (a notebook): run ours in a thread of its own.
        errors: list[BaseException] = []

        def target() -> None:
            try:
                asyncio.run(self._run(jobs, on_done))
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(e)

        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]

    async def _run(self, jobs: Iterable[Job], on_done: OnDone) -> None:
        import httpx

        k = self.settings.concurrency
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        timeout = httpx.Timeout(self.settings.timeout)
        ssl_context = httpx.create_ssl_context()  # built once, shared by every worker's client
        queue: Iterator[Job] = iter(jobs)  # shared by the workers; safe: one thread, no await inside next()

        async def worker() -> None:
            # One client with one keep-alive connection per worker: httpcore scans every connection
            # of a pool on each request, which costs more than the request itself at K = 64.
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            async with httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout, verify=ssl_context) as client:
                for item, messages in queue:
                    if self._fatal is not None or self.budget.exhausted:
                        return
                    try:
                        outcome = await self._judge(client, messages)
                    except _Fatal as e:
                        self._fatal = self._fatal or e.error
                        return
                    on_done(item, outcome)

        await asyncio.gather(*(worker() for _ in range(k)))
        if self._fatal is not None:
            raise self._fatal

    async def _judge(self, client: Any, messages: list[dict[str, str]]) -> Outcome:
        """Ask until the reply has a verdict (at most ``max_retries`` re-asks)."""
        s = self.settings
        outcome = Outcome()
        for ask in range(s.max_retries + 1):
            temperature = s.temperature if ask == 0 else max(s.temperature, s.retry_temperature)
            reply = await self._complete(client, messages, temperature, outcome)
            if reply is None:  # transport failure or budget: outcome says which; not final
                return outcome
            verdict = parse_verdict(reply)
            outcome.raw = reply
            outcome.label, outcome.failure = verdict.label, verdict.failure
            outcome.detail = "" if verdict.ok else f"after {ask + 1} ask(s)"
            if verdict.ok:
                break
        outcome.final = True  # a verdict, or the judge kept answering without one
        return outcome

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_MAX)
        s = self.settings
        return min(s.backoff_max, s.backoff_base * 2 ** attempt) * (0.5 + 0.5 * self._rng.random())

    async def _complete(self, client: Any, messages: list[dict[str, str]], temperature: float,
                        outcome: Outcome) -> str | None:
        """One chat completion with retries; the reply text, or None with ``outcome`` saying why."""
        import httpx

        s = self.settings
        url = f"{self.base_url}/chat/completions"
        body = {"model": s.judge_model, "messages": messages, "temperature": temperature, "max_tokens": s.max_tokens}
        for attempt in range(s.max_retries + 1):
            if not self.budget.take():
                outcome.not_attempted, outcome.failure, outcome.detail = True, "budget", "request budget used up"
                return None
            outcome.requests += 1
            retry_after, refused = None, False
            try:
                response = await _deadline(client.post(url, json=body), s.timeout)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                outcome.failure, outcome.detail = "timeout", f"no reply within {s.timeout:g} s"
            except httpx.ConnectError as e:
                outcome.failure, outcome.detail, refused = "connection", f"cannot connect: {e}", True
            except httpx.TransportError as e:  # reset, server hung up, protocol error
                outcome.failure, outcome.detail = "connection", f"{type(e).__name__}: {e}"
            else:
                self._any_response = True
                status = response.status_code
                if status in FATAL_STATUS:
                    raise _Fatal(f"HTTP {status} from {url}: {FATAL_STATUS[status]}: {_error_text(response)}",
                                 hint=f"check --base-url, --judge-model and ${s.api_key_env}")
                if status == 200:
                    try:
                        text, pt, ct = reply_text(response.json())
                    except ValueError as e:  # JSONDecodeError is a ValueError
                        outcome.failure, outcome.detail = "malformed", f"malformed reply: {str(e)[:120]}"
                    else:
                        outcome.prompt_tokens += pt
                        outcome.completion_tokens += ct
                        return text
                elif status in RETRY_STATUS or status >= 500:
                    outcome.failure, outcome.detail = f"http_{status}", _error_text(response)
                    retry_after = retry_after_seconds(response.headers.get("retry-after"))
                else:  # e.g. 400 for a prompt longer than the model's context: this pair only, no retry
                    outcome.failure, outcome.detail = f"http_{status}", _error_text(response)
                    return None
            if refused and not self._any_response and attempt == s.max_retries:
                raise _Fatal(f"cannot reach the judge at {url} ({outcome.detail})", field="base_url",
                             hint="is the server running, and is the URL right?")
            if attempt < s.max_retries:
                await asyncio.sleep(self._backoff(attempt, retry_after))
        outcome.detail = f"{outcome.detail} (after {s.max_retries + 1} attempts)"
        return None
