"""Annotation: LLM-judge comparisons of every response pair (the paper's CheemsPreference judge).

``judge_records(records, JudgeSettings(...))`` plans all C(N,2) pairs per prompt in a seeded shown
order, asks an OpenAI-compatible endpoint or a local Hugging Face causal LM with a Chinese
prompt and category-specific criteria, parses the one-letter verdict strictly, caches every
judgement on disk as it completes, and appends ``source: "judge"`` comparisons to the records.

Nothing here imports httpx, torch or transformers at import time.
"""

from cheems.annotate.cache import JudgeCache
from cheems.annotate.judge import FailedPair, JudgeResult, JudgeStats, judge_records, reason_text
from cheems.annotate.plan import PairTask, plan_pairs, shown_order
from cheems.annotate.prompt import CRITERIA, TEMPLATE_VERSION, CriteriaMap, build_messages, load_criteria_map
from cheems.annotate.settings import JudgeSettings, Outcome, RequestBudget
from cheems.annotate.verdict import FAILURE_REASONS, Verdict, parse_verdict

__all__ = [
    "CRITERIA",
    "FAILURE_REASONS",
    "TEMPLATE_VERSION",
    "CriteriaMap",
    "FailedPair",
    "JudgeCache",
    "JudgeResult",
    "JudgeSettings",
    "JudgeStats",
    "Outcome",
    "PairTask",
    "RequestBudget",
    "Verdict",
    "build_messages",
    "judge_records",
    "load_criteria_map",
    "parse_verdict",
    "plan_pairs",
    "reason_text",
    "shown_order",
]
