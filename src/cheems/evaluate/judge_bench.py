"""Generative judges on the bench: every ranked pair asked of an LLM judge, scored like a reward model.

The questions are those of ``cheems judge`` (same client, cache and verdict parser), limited to
the bench's comparisons (pairs with different ranks) and asked with the evaluation prompt
(``EVAL_TEMPLATE``: pick A or B) unless the user gives a template. Each pair is shown once in the
order the seed fixes, or with ``both_orders`` twice. A pair is right only if every verdict names
the chosen response: a tie (C) is wrong, an unparseable reply is wrong (and counted), and with
both orders an inconsistent pair is wrong (as in JudgeBench; stricter than it, a right verdict
beside a tie or a parse failure is wrong too). Accuracy, exact match and overall
then follow the paper exactly as for a reward model.

A question with no verdict for another reason (the server failed after all retries, the request
budget ran out) is not a wrong answer but a missing one: the evaluation stops with an error
rather than print a number that depends on a server's bad minute; the verdicts are cached and a
rerun asks only the missing questions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.evaluate.bench import EvalReport, report_from_outcomes
from cheems.judge import FAILURE_REASONS, JudgeResult, JudgeSettings, judge_records, reason_text
from cheems.judge.prompt import EVAL_TEMPLATE
from cheems.judge.questions import ranked_pairs, shown_order
from cheems.metrics.outcomes import PairOutcome, PromptOutcome, ShownVerdict

PairKey = tuple[str, str, str]  # (prompt id, a, b) in response order


def judge_bench(bench: dict[str, list[Record]], settings: JudgeSettings, progress: bool = True) -> EvalReport:
    """Judge every comparison of the bench; the report carries a ``judge`` block (see :func:`judge_summary`)."""
    ranked = {name: [r for r in records if r.ranked_pairs()] for name, records in bench.items()}
    # Without their comparisons: a bench labelled by this very judge must still be asked, not skipped.
    asked = [r.model_copy(update={"comparisons": []}) for records in ranked.values() for r in records]
    result = judge_records(asked, settings, progress, pairs=ranked_pairs, template=EVAL_TEMPLATE)
    require_complete(result, settings)
    verdicts = _verdicts_by_pair(result, settings.seed)
    outcomes = {
        name: [_prompt_outcome(r, verdicts, settings.both_orders) for r in records]
        for name, records in ranked.items()
        if records
    }
    report = report_from_outcomes(outcomes, [name for name, records in ranked.items() if not records])
    report.scorer = settings.judge_model
    report.judge = judge_summary(result, settings, outcomes)
    return report


def require_complete(result: JudgeResult, settings: JudgeSettings) -> None:
    """Stop when a question has no verdict for a reason other than the judge's reply (missing, not wrong)."""
    missing = Counter(f.reason for f in result.failures if f.reason not in FAILURE_REASONS)
    if result.stats.not_attempted:
        missing["request budget (--max-requests) reached"] = result.stats.not_attempted
    if not missing:
        return
    reasons = ", ".join(f"{n} × {reason_text(code)}" for code, n in missing.most_common())
    raise InputError(
        f"{sum(missing.values())} of {result.stats.pairs} questions to judge {settings.judge_model} have no "
        f"verdict ({reasons}); no metric is computed from an incomplete run",
        path=settings.base_url or settings.judge_model,
        hint="rerun the same command: verdicts so far are cached and only the missing questions are asked",
    )


def _verdicts_by_pair(result: JudgeResult, seed: int) -> dict[PairKey, list[ShownVerdict]]:
    """Every verdict (and parse failure) per pair, the seeded order first."""
    found: dict[PairKey, dict[str, ShownVerdict]] = {}
    for record in result.records:
        for c in record.comparisons:
            shown = (c.model_extra or {})["shown"]
            first, second = (c.a, c.b) if shown == "ab" else (c.b, c.a)
            label = "C" if c.label == "tie" else ("A" if (c.a if c.label == "a" else c.b) == first else "B")
            found.setdefault((record.id, c.a, c.b), {})[shown] = ShownVerdict(first, label)
    for f in result.failures:  # only parse failures are left (require_complete)
        found.setdefault((f.prompt_id, f.a, f.b), {})[f.shown] = ShownVerdict(
            f.a if f.shown == "ab" else f.b, None, f.reason
        )
    return {
        key: [v for shown, v in sorted(by_shown.items(), key=lambda kv: kv[0] != shown_order(seed, *key))]
        for key, by_shown in found.items()
    }


def _prompt_outcome(record: Record, verdicts: dict[PairKey, list[ShownVerdict]], both_orders: bool) -> PromptOutcome:
    """The record's ranked pairs; right iff every verdict (one, or two with both orders) names the chosen one."""
    pairs = []
    for a, b in ranked_pairs(record):  # the order of record.ranked_pairs(), as (a, b) was asked
        assert record.rank is not None  # a record has ranked pairs only when it is ranked
        chosen, rejected = (a, b) if record.rank[a] < record.rank[b] else (b, a)
        got = verdicts.get((record.id, a, b), [])
        pair = PairOutcome(
            chosen,
            rejected,
            False,
            len(record.response(chosen).content),
            len(record.response(rejected).content),
            verdicts=got,
        )
        pair.correct = len(got) == (2 if both_orders else 1) and all(pair.picked(v) == chosen for v in got)
        pairs.append(pair)
    return PromptOutcome(record.id, record.main_category, pairs)


def judge_summary(
    result: JudgeResult, settings: JudgeSettings, outcomes: Mapping[str, Sequence[PromptOutcome]]
) -> dict[str, Any]:
    """The ``judge`` block of the report: what was asked, what came back, and the position statistics.

    ``first_shown_win_share`` is the share of A among A/B verdicts (0.5 = no position preference);
    ``position_consistency`` (with both orders) is the share of pairs whose two verdicts agree.
    """
    stats = result.stats
    parse_failures = Counter(f.reason for f in result.failures)
    out: dict[str, Any] = {
        "judge_model": settings.judge_model,
        "template": stats.template,
        "seed": settings.seed,
        "both_orders": settings.both_orders,
        "questions": stats.pairs,
        "verdicts": {k: stats.shown_labels[k] for k in "ABC"},
        "parse_failures": sum(parse_failures.values()),
        "parse_failure_reasons": dict(sorted(parse_failures.items())),
        "first_shown_win_share": stats.a_share,
        "cached": stats.cached,
        "judged": stats.judged,
        "requests": stats.requests,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "cost": stats.cost,
    }
    if settings.both_orders:
        pairs = [p for prompts in outcomes.values() for o in prompts for p in o.pairs]
        # a parse failure agrees with nothing: None never equals a pick
        consistent = sum(
            p.verdicts is not None
            and len(p.verdicts) == 2
            and p.picked(p.verdicts[0]) == p.picked(p.verdicts[1]) is not None
            for p in pairs
        )
        out["position_consistency"] = {
            "pairs": len(pairs),
            "consistent": consistent,
            "rate": consistent / len(pairs) if pairs else None,
        }
    return out
