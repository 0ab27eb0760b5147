"""Annotation: LLM-judge comparisons of every response pair (the paper's CheemsPreference judge).

``judge_records(records, JudgeSettings(...))`` plans all C(N,2) pairs per prompt in a seeded shown
order, asks an OpenAI-compatible endpoint or a local Hugging Face causal LM with a Chinese
prompt and category-specific criteria, parses the one-letter verdict strictly, caches every
judgement on disk as it completes, and appends ``source: "judge"`` comparisons to the records.
``generate_records(records, GenerateSettings(...))`` samples N responses per prompt from the same
kinds of backend (a candidate pool for best-of-N), cached and resumable in the same way.

Nothing here imports httpx, torch or transformers at import time.

Names are imported on first use (:func:`cheems.runtime.lazy_exports`), so reading the settings
model at CLI start-up does not import every stage.
"""

from cheems.runtime import lazy_exports

_EXPORTS = {
    "CRITERIA": "prompt",
    "CriteriaMap": "prompt",
    "FAILURE_REASONS": "verdict",
    "FailedPair": "judge",
    "GenerateSettings": "settings",
    "JudgeCache": "cache",
    "JudgeResult": "judge",
    "JudgeSettings": "settings",
    "JudgeStats": "judge",
    "Outcome": "settings",
    "PairTask": "plan",
    "RequestBudget": "settings",
    "TEMPLATE_VERSION": "prompt",
    "Verdict": "verdict",
    "build_messages": "prompt",
    "generate_records": "generate",
    "judge_records": "judge",
    "load_criteria_map": "prompt",
    "parse_verdict": "verdict",
    "plan_pairs": "plan",
    "reason_text": "judge",
    "shown_order": "plan",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
