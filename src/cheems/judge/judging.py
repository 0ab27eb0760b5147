"""``judge_records``: plan the pairs, reuse the cache, ask the judge for the rest, append comparisons.

Output is a function of the inputs and the cache only: comparisons are appended in record order
and plan order whatever order the answers came back in, so a resumed run writes the same file as
an uninterrupted one. Verdicts about the shown order are mapped back to the record's ``a``/``b``
(C -> ``tie``); failed pairs get no comparison and are listed in ``JudgeResult.failures``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from cheems.data.schema import Comparison, Record
from cheems.errors import InputError
from cheems.judge.judge_settings import JudgeSettings
from cheems.judge.judgements import CachedJudgement, JudgeCache
from cheems.judge.prompt import (
    JUDGE_TEMPLATE,
    CriteriaMap,
    PromptTemplate,
    build_messages,
    load_criteria_map,
    load_template,
)
from cheems.judge.questions import PairTask, plan_pairs
from cheems.judge.verdict import reason_text
from cheems.llm.endpoint import (
    Outcome,
    RequestBudget,
)
from cheems.llm.replies import clip_reply
from cheems.llm.runs import with_saved_note
from cheems.runtime import ProgressBar, content_hash


@dataclass
class FailedPair:
    """A question with no verdict: which pair, why, and the judge's last reply (if any)."""

    prompt_id: str
    a: str
    b: str
    shown: str
    reason: str
    detail: str
    raw: str | None
    from_cache: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able row for the failures file."""
        return {
            "prompt_id": self.prompt_id,
            "a": self.a,
            "b": self.b,
            "shown": self.shown,
            "reason": self.reason,
            "reason_text": reason_text(self.reason),
            "detail": self.detail,
            "raw": self.raw,
            "from_cache": self.from_cache,
        }


@dataclass
class JudgeStats:
    """What a run did. Counts are of questions (a pair in one shown order)."""

    judge_model: str
    template: str = JUDGE_TEMPLATE.name
    pairs: int = 0  # questions planned
    judged: int = 0  # verdicts from the judge in this run
    cached: int = 0  # verdicts taken from the cache
    failed: Counter[str] = field(default_factory=Counter)  # reason code -> questions
    not_attempted: int = 0  # stopped by the request budget
    requests: int = 0  # HTTP requests (or generate rows) sent in this run
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    shown_labels: Counter[str] = field(default_factory=Counter)  # A / B / C about the shown order, all verdicts
    consistency: dict[str, Any] | None = None  # with both orders: pairs, consistent, rate
    budget_exhausted: bool = False

    def add_spend(self, outcome: Outcome) -> None:
        """Count the requests and tokens one question used."""
        self.requests += outcome.requests
        self.prompt_tokens += outcome.prompt_tokens
        self.completion_tokens += outcome.completion_tokens

    @property
    def failed_total(self) -> int:
        """Questions with no verdict, whatever the reason."""
        return sum(self.failed.values())

    @property
    def a_share(self) -> float | None:
        """Share of verdicts naming the first-shown answer (position bias; 0.5 = none, among A/B verdicts)."""
        decisive = self.shown_labels["A"] + self.shown_labels["B"]
        return self.shown_labels["A"] / decisive if decisive else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary."""
        total = sum(self.shown_labels.values())
        return {
            "judge_model": self.judge_model,
            "template": self.template,
            "pairs": self.pairs,
            "judged": self.judged,
            "cached": self.cached,
            "failed": dict(sorted(self.failed.items())),
            "not_attempted": self.not_attempted,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "verdicts": {k: self.shown_labels[k] for k in "ABC"},
            "share_A": self.shown_labels["A"] / total if total else None,
            "share_A_of_A_or_B": self.a_share,
            "consistency": self.consistency,
            "budget_exhausted": self.budget_exhausted,
        }


@dataclass
class JudgeResult:
    """Records with the judge's comparisons appended, the run's statistics and its failed questions."""

    records: list[Record]
    stats: JudgeStats
    failures: list[FailedPair]


def _question(record: Record, task: PairTask, criteria: CriteriaMap, template: PromptTemplate) -> list[dict[str, str]]:
    return build_messages(record, record.response(task.first), record.response(task.second), criteria, template)


def _from_cache(c: CachedJudgement) -> Outcome:
    return Outcome(
        label=c.label,
        failure=c.failure,
        raw=clip_reply(c.raw),
        final=True,
        detail="" if c.label else "cached failure; --retry-failed asks again",
    )


def judge_records(
    records: Sequence[Record],
    settings: JudgeSettings,
    progress: bool = True,
    *,
    pairs: Callable[[Record], Iterable[tuple[str, str]]] | None = None,
    template: PromptTemplate = JUDGE_TEMPLATE,
) -> JudgeResult:
    """Ask the judge about every response pair of every record; return the records with comparisons.

    ``pairs`` chooses the pairs of a record to ask about (default: all of them); ``template`` is
    the prompt when ``settings.template`` names no file. Pairs already judged by this judge
    (cache, or comparisons in the input from the same judge model and shown order) are not asked
    again. Each finished judgement is committed to the
    cache at once, so an interrupted run resumes where it stopped. Raises ``InputError`` for
    conditions that fail every request (bad key, wrong URL); bad settings cannot be built.
    """
    criteria = load_criteria_map(settings.criteria)
    template = load_template(settings.template, template)
    budget = RequestBudget(settings.max_requests)
    from cheems.judge.backends import make_backend  # the backends build on this module's settings

    backend = make_backend(settings, budget)
    judge = content_hash({**backend.identity, "template": template.name}, keyed=True)
    tasks = plan_pairs(records, settings.seed, settings.both_orders, skip_judged_by=settings.judge_model, pairs=pairs)
    items = [content_hash(_question(records[t.index], t, criteria, template)) for t in tasks]

    stats = JudgeStats(settings.judge_model, template.name, pairs=len(tasks))
    new: set[str] = set()
    with JudgeCache(settings.cache) as cache:
        outcomes = _cached_outcomes(cache, judge, items, settings.retry_failed)
        first_task: dict[str, PairTask] = {}
        for task, item in zip(tasks, items):
            if item not in outcomes:
                first_task.setdefault(item, task)  # the same question twice (duplicate records) is asked once

        def jobs() -> Iterator[tuple[str, list[dict[str, str]]]]:
            # Messages are rebuilt on demand: holding them all would cost memory on big sets.
            for item, task in first_task.items():
                yield item, _question(records[task.index], task, criteria, template)

        bar = ProgressBar(
            len(first_task),
            f"judging with {settings.judge_model}",
            enabled=progress,
            terminal_only=True,
            transient=True,
        )

        def on_done(item: str, outcome: Outcome) -> None:
            outcome.raw = clip_reply(outcome.raw)  # what the cache, failures file and output keep
            outcomes[item] = outcome
            new.add(item)
            stats.add_spend(outcome)
            if outcome.final:
                _store(cache, judge, item, outcome, first_task[item], settings.judge_model)
            bar.advance()

        try:
            if first_task:
                backend.judge_many(jobs(), on_done)
        except InputError as e:  # the run stopped (server gone, key refused): say that nothing finished is lost
            saved = sum(outcomes[item].final for item in new)
            if not saved:
                raise
            raise with_saved_note(e, f"{saved} judgement(s) of this run are saved in {cache.path}") from None
        finally:
            bar.close()
    stats.cost = (stats.prompt_tokens * settings.price_in + stats.completion_tokens * settings.price_out) / 1e6
    stats.budget_exhausted = budget.exhausted and any(
        item not in outcomes or outcomes[item].not_attempted for item in first_task
    )
    return _assemble(records, tasks, items, outcomes, new, settings, stats)


def _cached_outcomes(cache: JudgeCache, judge: str, items: list[str], retry_failed: bool) -> dict[str, Outcome]:
    """The questions this judge has answered before (cached verdict failures too, unless asked again)."""
    return {
        item: _from_cache(cached)
        for item, cached in cache.get_many(judge, items).items()
        if cached.label is not None or not retry_failed
    }


def _store(cache: JudgeCache, judge: str, item: str, outcome: Outcome, task: PairTask, judge_model: str) -> None:
    """Commit one final outcome to the cache (at once: an interrupted run resumes from here)."""
    cache.put(
        judge,
        item,
        CachedJudgement(
            outcome.label,
            outcome.failure,
            outcome.raw,
            outcome.prompt_tokens,
            outcome.completion_tokens,
            outcome.requests,
        ),
        judge_model=judge_model,
        pair=(task.prompt_id, task.a, task.b, task.shown),
    )


def _assemble(
    records: Sequence[Record],
    tasks: list[PairTask],
    items: list[str],
    outcomes: dict[str, Outcome],
    new: set[str],
    settings: JudgeSettings,
    stats: JudgeStats,
) -> JudgeResult:
    """Copy the records, append comparisons in plan order, fill the statistics."""
    # New comparison lists, so the caller's records stay as they were (the rest is shared, not copied).
    out = [r.model_copy(update={"comparisons": list(r.comparisons)}) for r in records]
    failures: list[FailedPair] = []
    by_pair: dict[tuple[int, str, str], dict[str, str]] = {}  # (record, a, b) -> shown -> record label
    for task, item in zip(tasks, items):
        outcome = outcomes.get(item)
        if outcome is None or outcome.not_attempted:
            stats.not_attempted += 1
            continue
        if outcome.label is None:
            stats.failed[outcome.failure or "unknown"] += 1
            failures.append(
                FailedPair(
                    task.prompt_id,
                    task.a,
                    task.b,
                    task.shown,
                    outcome.failure or "unknown",
                    outcome.detail,
                    outcome.raw,
                    item not in new,
                )
            )
            continue
        if item in new:
            stats.judged += 1
        else:
            stats.cached += 1
        stats.shown_labels[outcome.label] += 1
        label = task.record_label(outcome.label)
        by_pair.setdefault((task.index, task.a, task.b), {})[task.shown] = label
        out[task.index].comparisons.append(
            Comparison.model_validate(
                {
                    "a": task.a,
                    "b": task.b,
                    "label": label,
                    "annotator": settings.judge_model,
                    "source": "judge",
                    "shown": task.shown,
                    "raw": outcome.raw,
                    "template": stats.template,
                }
            )
        )
    if settings.both_orders:
        both = [v for v in by_pair.values() if len(v) == 2]
        agree = sum(v["ab"] == v["ba"] for v in both)
        stats.consistency = {"pairs": len(both), "consistent": agree, "rate": agree / len(both) if both else None}
    return JudgeResult(out, stats, failures)
