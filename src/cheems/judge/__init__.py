"""The LLM judge: comparisons of every response pair (the paper's CheemsPreference judge).

``judge_records(records, JudgeSettings(...))`` plans all C(N,2) pairs per prompt in a seeded shown
order, asks an OpenAI-compatible endpoint or a local Hugging Face causal LM with a Chinese
prompt and category-specific criteria, parses the one-letter verdict strictly, caches every
judgement on disk as it completes, and appends ``source: "judge"`` comparisons to the records.
The clients it asks through are :mod:`cheems.llm`'s.

Nothing here imports httpx, torch or transformers at import time.

Names are imported on first use (:func:`cheems.runtime.lazy_exports`), so reading the settings
model at CLI start-up does not import every stage.
"""

import sys

from cheems.runtime import callable_package, lazy_exports

_EXPORTS = {
    "CRITERIA": "prompt",
    "CriteriaMap": "prompt",
    "FAILURE_REASONS": "verdict",
    "FailedPair": "judging",
    "JudgeCache": "judgements",
    "JudgeResult": "judging",
    "JudgeSettings": "judge_settings",
    "JudgeStats": "judging",
    "PairTask": "questions",
    "TEMPLATE_VERSION": "prompt",
    "Verdict": "verdict",
    "build_messages": "prompt",
    "final_tag": "verdict",
    "judge_files": "judge_files",
    "judge_records": "judging",
    "load_criteria_map": "prompt",
    "parse_verdict": "verdict",
    "plan_pairs": "questions",
    "reason_text": "verdict",
    "shown_order": "questions",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
# cheems.judge(...) is cheems.judge.judging.judge_records(...): the package and the public function share the name
callable_package(sys.modules[__name__], "judging:judge_records")
