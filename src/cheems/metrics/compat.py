"""Which rules a metric follows: cheems' strict ones (the default) or each benchmark's upstream code, exactly.

``--compat strict`` (``compat="strict"``) keeps one rule everywhere: a pair is right iff score(better) >
score(worse), so a score tie is wrong, and a reward model or a judge reads the prompt as training sees it (a
record's ``sys_prompt`` as the first turn). ``--compat upstream`` follows each benchmark's own code where it differs;
:data:`UPSTREAM_RULES` says where, per metric, and is what ``--output-json`` records beside ``"compat"``. A
metric not named there has a single rule, its upstream's. Apart from the modules that compute, so that the CLI
reads it at start-up.
"""

from __future__ import annotations

from typing import Literal

Compat = Literal["strict", "upstream"]

SCORING_INPUT = (
    "a reward model or a judge run here reads the user turn and the response(s), without sys_prompt "
    "(AlignRM/CheemsRM cheems/eval_rm.py rm_evaluate, generative_evaluate); a --scores file is read as it was made"
)

UPSTREAM_RULES: dict[str, dict[str, str]] = {
    "cheems": {
        "exact_match": "a score tie does not break it, only a reversed pair; a prompt without a ranked pair counts "
        "with exact match 1 (AlignRM/CheemsRM cheems/eval/metrics.py get_rank_metrics)",
    },
    "rewardbench": {
        "missing_section": "a section with no subset in the file scores 0 and counts in the mean of the four "
        "(allenai/reward-bench rewardbench/utils.py calculate_scores_per_section)",
    },
    "bon": {
        "top_tie": "RewardBench 2: the first correct answer tied with k-1 others at the top scores 1/k "
        "(allenai/reward-bench rewardbench/utils.py reroll_and_score_dataset)",
        "ties_subset": "RewardBench 2 Ties: 0.3 tied accuracy + 0.3 ref accuracy + 0.2 correctness preferred + "
        "0.2 correctness preferred (hard) + 0.01 margin score (rewardbench/utils.py process_single_model)",
    },
}
"""Per metric (``--metric``), each rule besides the scoring input that ``--compat upstream`` changes, and the
upstream code it follows; a metric not named here computes as upstream under both."""


def upstream_rules(metric: str | None) -> dict[str, str]:
    """The rules ``--compat upstream`` changes for ``metric`` (None: ``cheems bon``, whose picks follow the scores
    alone): its own, then the scoring input (a scores file was scored as ``cheems score`` scored it)."""
    return {**UPSTREAM_RULES.get(metric or "", {}), "scoring_input": SCORING_INPUT}


def compat_record(compat: Compat, metric: str | None) -> dict[str, object]:
    """The keys an output JSON gets for ``compat``: none under strict (outputs stay as they were), else
    ``{"compat": "upstream", "rules": upstream_rules(metric)}``."""
    return {} if compat == "strict" else {"compat": compat, "rules": upstream_rules(metric)}
