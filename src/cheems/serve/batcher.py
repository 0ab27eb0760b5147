"""Dynamic batching for ``cheems serve``: concurrent requests' samples scored together by one thread.

A torch forward is not concurrent, and RL trainers send one sample per request, many requests at once: so each
request's samples go into a bounded queue, and one scoring thread takes what is waiting (up to ``max_batch``
samples, waiting at most ``max_wait`` seconds for more once it has some), scores it in one call and hands each
request its own results. A request whose client left or whose time ran out is dropped before the forward. When the
queue holds ``max_queue`` samples a new request is refused at once (:class:`QueueFull`: 503 with Retry-After) rather
than growing memory; once :meth:`RewardBatcher.drain` ran (shutdown), waiting and new requests get
:class:`Closing` while the batch under way finishes.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

S = TypeVar("S")  # what a request sends (a sample)
R = TypeVar("R")  # what it gets back for each

log = logging.getLogger("uvicorn.error")


class Refused(Exception):
    """A request the batcher does not score (the app answers 503 with Retry-After)."""


class QueueFull(Refused):
    """The queue holds ``max_queue`` samples."""


class Closing(Refused):
    """The server is shutting down."""


class TimedOut(Refused):
    """The request's rewards were not ready within its timeout."""


class ScoringFailed(Exception):
    """The model failed on a batch (logged once by the scoring thread; HTTP 500 to each of its requests)."""


class ClientGone(Exception):
    """The client disconnected before its rewards were ready (nothing is sent back)."""


@dataclass(eq=False)
class Job(Generic[S, R]):
    """One request's samples, and where its results go (a future of the event loop)."""

    samples: Sequence[S]
    future: asyncio.Future[list[R]]
    loop: asyncio.AbstractEventLoop
    dropped: bool = field(default=False)  # set on the loop when the caller stops waiting; read by the scorer


class RewardBatcher(Generic[S, R]):
    """One scoring thread over a bounded queue; ``score(samples)`` gives one result per sample, in order
    (a result may be an exception, raised to that sample's request)."""

    def __init__(
        self,
        score: Callable[[list[S]], Sequence[R | Exception]],
        *,
        max_batch: int = 32,
        max_wait: float = 0.005,
        max_queue: int = 1024,
    ) -> None:
        self._score = score
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.max_queue = max_queue
        self._queue: queue.Queue[Job[S, R] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._waiting = 0  # samples queued and not yet taken by the thread
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="cheems-scorer", daemon=True)
        # Counters for GET /stats (ops, and the tests' events): scoring calls made, samples scored, requests whose
        # client left before their rewards were ready.
        self.batches = 0
        self.scored = 0
        self.left = 0

    def start(self) -> RewardBatcher[S, R]:
        """Start the scoring thread."""
        self._thread.start()
        return self

    @property
    def waiting(self) -> int:
        """Samples in the queue now."""
        return self._waiting

    async def submit(
        self, samples: Sequence[S], timeout: float, disconnected: Callable[[], Awaitable[object]]
    ) -> list[R]:
        """The results of ``samples``, once scored; :class:`Refused` when refused or not ready within ``timeout``
        seconds, :class:`ClientGone` when ``disconnected()`` completes first (the samples are then never scored)."""
        loop = asyncio.get_running_loop()
        job: Job[S, R] = Job(samples, loop.create_future(), loop)
        self._put(job)
        watcher: asyncio.Future[Any] = asyncio.ensure_future(disconnected())
        either: set[asyncio.Future[Any]] = {job.future, watcher}
        try:
            done, _ = await asyncio.wait(either, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not job.future.done():
                job.dropped = True  # the thread skips it; a result that comes anyway is ignored
        if job.future.done():
            return job.future.result()
        if watcher in done:
            self.left += 1
            raise ClientGone
        raise TimedOut(f"not scored within {timeout:g} s (the server is busy)")

    def _put(self, job: Job[S, R]) -> None:
        with self._lock:
            if self._closing:
                raise Closing("the server is shutting down")
            if self._waiting + len(job.samples) > self.max_queue:
                raise QueueFull(f"{self._waiting} samples are waiting (--max-queue {self.max_queue})")
            self._waiting += len(job.samples)
            self._queue.put(job)

    def drain(self) -> None:
        """Refuse new requests and those still queued (:class:`Closing`); the batch under way finishes."""
        with self._lock:
            self._closing = True
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                self._taken([job])
                _deliver(job, Closing("the server is shutting down"))
        self._queue.put(None)  # wakes the thread, which then ends

    def close(self, timeout: float = 10.0) -> None:
        """:meth:`drain`, then wait (at most ``timeout`` seconds) for the thread to end."""
        self.drain()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _taken(self, jobs: list[Job[S, R]]) -> None:
        with self._lock:
            self._waiting -= sum(len(j.samples) for j in jobs)

    def _run(self) -> None:
        while (jobs := self._gather()) is not None:
            live = [j for j in jobs if not j.dropped]
            if live:
                self._score_jobs(live)

    def _gather(self) -> list[Job[S, R]] | None:
        """The next batch of jobs: the first to come, then more until ``max_batch`` samples or ``max_wait``
        seconds; None once draining."""
        first = self._queue.get()
        if first is None:
            return None
        jobs, n = [first], len(first.samples)
        deadline = time.monotonic() + self.max_wait
        while n < self.max_batch:
            remaining = deadline - time.monotonic()
            try:
                job = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:
                self._queue.put(None)  # end after this batch
                break
            jobs.append(job)
            n += len(job.samples)
        self._taken(jobs)
        return jobs

    def _score_jobs(self, jobs: list[Job[S, R]]) -> None:
        samples = [s for j in jobs for s in j.samples]
        try:
            results = list(self._score(samples))
        except Exception as e:
            log.error("scoring failed: %s: %s", type(e).__name__, e)
            for j in jobs:
                _deliver(j, ScoringFailed(f"the reward model failed: {type(e).__name__}"))
            return
        self.batches += 1
        self.scored += len(samples)
        start = 0
        for j in jobs:
            part = results[start : start + len(j.samples)]
            start += len(j.samples)
            error = next((r for r in part if isinstance(r, Exception)), None)
            _deliver(j, error if error is not None else [r for r in part if not isinstance(r, Exception)])


def _deliver(job: Job[S, R], outcome: list[R] | Exception) -> None:
    """Hand ``outcome`` to the job's request, on its event loop (a loop already closed has no one waiting)."""

    def settle() -> None:
        if job.future.done():
            return
        if isinstance(outcome, Exception):
            job.future.set_exception(outcome)
        else:
            job.future.set_result(outcome)

    try:
        job.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop closed: the server is gone, nobody waits
        pass
