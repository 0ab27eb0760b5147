"""The judge on a backend: an OpenAI-compatible endpoint (:class:`OpenAIJudge`) or a local causal LM
(:class:`LocalJudge`).

Both ask until a reply holds a verdict; re-asks sample at ``retry_temperature`` (a deterministic
judge would repeat the same bad reply).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cheems.judge.judge_settings import JudgeSettings
from cheems.judge.verdict import parse_verdict
from cheems.llm.client import ChatClient
from cheems.llm.endpoint import Outcome, RequestBudget
from cheems.llm.local import LocalLM

Job = tuple[str, list[dict[str, str]]]  # (cache item key, messages)
OnDone = Callable[[str, Outcome], None]


def make_backend(settings: JudgeSettings, budget: RequestBudget) -> Any:
    """The backend ``settings.backend`` names (its imports happen here, not at CLI start)."""
    if settings.backend == "hf":
        from cheems.judge.backends import LocalJudge

        return LocalJudge(settings, budget)
    from cheems.judge.backends import OpenAIJudge

    return OpenAIJudge(settings, budget)


class OpenAIJudge(ChatClient):
    """A judge behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    settings: JudgeSettings

    def judge_many(self, jobs: Iterable[Job], on_done: OnDone) -> None:
        """Judge every job, calling ``on_done(item, outcome)`` as each finishes (in completion order)."""

        async def handle(client: Any, job: Job) -> None:
            item, messages = job
            on_done(item, await self._judge(client, messages))

        self.run_many(jobs, handle)

    async def _judge(self, client: Any, messages: list[dict[str, str]]) -> Outcome:
        """Ask until the reply has a verdict (at most ``max_retries`` re-asks)."""
        s = self.settings
        outcome = Outcome()
        for ask in range(s.max_retries + 1):
            temperature = s.temperature if ask == 0 else max(s.temperature, s.retry_temperature)
            reply = await self.complete(client, messages, outcome, temperature)
            if reply is None:  # transport failure or budget: outcome says which; not final
                return outcome
            verdict = parse_verdict(reply.text, reasoning=reply.reasoning)
            outcome.raw = reply.text  # redacted already; clipped where it is stored
            outcome.label, outcome.failure = verdict.label, verdict.failure
            outcome.detail = "" if verdict.ok else f"after {ask + 1} ask(s)"
            if verdict.ok:
                break
        outcome.final = True  # a verdict, or the judge kept answering without one
        return outcome


class LocalJudge(LocalLM):
    """A causal LM on this machine as the judge."""

    settings: JudgeSettings

    def __init__(self, settings: JudgeSettings, budget: RequestBudget) -> None:
        super().__init__(settings, budget)
        self._identity["decoding"] = "greedy"

    def judge_many(self, jobs: Iterable[Job], on_done: OnDone) -> None:
        """Judge every job in batches, calling ``on_done(item, outcome)`` after each batch."""
        jobs = list(jobs)
        if not jobs:
            return
        self.load()
        s = self.settings
        pending = [(item, self.render(messages)) for item, messages in jobs]
        outcomes = {item: Outcome() for item, _ in pending}
        lengths = {item: len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) for item, text in pending}
        for ask in range(s.max_retries + 1):
            pending.sort(key=lambda job: -lengths[job[0]])  # similar lengths together: little padding
            retry: list[tuple[str, str]] = []
            for start in range(0, len(pending), s.batch_size):
                batch = []
                for item, text in pending[start : start + s.batch_size]:
                    if self.budget.take():
                        batch.append((item, text))
                    else:  # budget used up: never guessed, resumed by a rerun
                        o = outcomes[item]
                        o.not_attempted, o.failure, o.detail = True, "budget", "request budget used up"
                        on_done(item, o)
                if not batch:
                    continue
                temperature = s.retry_temperature if ask > 0 else 0.0
                replies = self.generate([t for _, t in batch], temperature, [s.seed + ask] * len(batch))
                for (item, text), (reply, pt, ct) in zip(batch, replies):
                    o = outcomes[item]
                    verdict = parse_verdict(reply)
                    o.requests += 1
                    o.prompt_tokens += pt
                    o.completion_tokens += ct
                    o.raw, o.label, o.failure = reply, verdict.label, verdict.failure
                    if verdict.ok or ask == s.max_retries:
                        o.final, o.detail = True, "" if verdict.ok else f"after {ask + 1} ask(s)"
                        on_done(item, o)
                    else:
                        retry.append((item, text))
            pending = retry
            if not pending:
                break
