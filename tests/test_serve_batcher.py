"""The scoring thread of ``cheems serve`` (:class:`cheems.serve.batcher.RewardBatcher`) over a plain scoring
function: what it gathers, in what order it answers, what it refuses. The server-level behaviour (timeouts,
disconnects, SIGTERM) is tested on a real server in test_serve_faults.py."""

from __future__ import annotations

import asyncio

import pytest

from cheems.serve.batcher import Closing, QueueFull, RewardBatcher, ScoringFailed


def lengths(samples: list[str]) -> list[int | Exception]:
    """A score per sample: its length; a sample "bad" is refused on its own."""
    return [ValueError("bad sample") if s == "bad" else len(s) for s in samples]


async def never() -> None:
    await asyncio.Event().wait()  # a client that never leaves


def run(batcher: RewardBatcher, requests: list[list[str]]) -> list[object]:
    """Send the requests at once; each one's results, or its exception."""

    async def main() -> list[object]:
        batcher.start()
        try:
            return await asyncio.gather(*(batcher.submit(r, 30, never) for r in requests), return_exceptions=True)
        finally:
            batcher.close()

    return asyncio.run(main())


def test_concurrent_requests_are_scored_in_one_call_and_each_gets_its_own():
    calls: list[list[str]] = []

    def score(samples: list[str]) -> list[int | Exception]:
        calls.append(list(samples))
        return lengths(samples)

    requests = [["a"], ["bb", "ccc"], ["dddd"]]
    got = run(RewardBatcher(score, max_batch=4, max_wait=30), requests)  # full at 4 samples: no wait
    assert got == [[1], [2, 3], [4]]
    assert len(calls) == 1 and sorted(calls[0]) == ["a", "bb", "ccc", "dddd"]


def test_a_refused_sample_fails_its_request_only():
    got = run(RewardBatcher(lengths, max_batch=3, max_wait=30), [["ok"], ["bad"], ["fine"]])
    assert got[0] == [2] and got[2] == [4]
    assert isinstance(got[1], ValueError) and str(got[1]) == "bad sample"


def test_a_failing_model_fails_each_request_of_the_batch_and_the_thread_goes_on():
    def broken(samples: list[str]) -> list[int]:
        if "boom" in samples:
            raise RuntimeError("CUDA out of memory")
        return [len(s) for s in samples]

    batcher = RewardBatcher(broken, max_batch=2, max_wait=30)

    async def main() -> tuple[list[object], list[int]]:
        batcher.start()
        try:
            failed = await asyncio.gather(
                batcher.submit(["boom"], 30, never), batcher.submit(["x"], 30, never), return_exceptions=True
            )
            after = await asyncio.gather(batcher.submit(["yy"], 30, never), batcher.submit(["z"], 30, never))
            return list(failed), [r for rs in after for r in rs]
        finally:
            batcher.close()

    failed, after = asyncio.run(main())
    assert all(isinstance(f, ScoringFailed) and "RuntimeError" in str(f) for f in failed)
    assert after == [2, 1]


def test_past_max_queue_a_request_is_refused_at_once_and_after_drain_every_one_is():
    batcher = RewardBatcher(lengths, max_batch=10, max_wait=30, max_queue=2)  # the thread is never started

    async def main() -> None:
        first = asyncio.ensure_future(batcher.submit(["a", "b"], 30, never))
        await asyncio.sleep(0)  # let it queue
        with pytest.raises(QueueFull, match="--max-queue 2"):
            await batcher.submit(["c"], 30, never)
        batcher.drain()
        with pytest.raises(Closing):
            await first  # queued, never taken: refused by the drain
        with pytest.raises(Closing):
            await batcher.submit(["d"], 30, never)

    asyncio.run(main())
