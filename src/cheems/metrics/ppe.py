"""PPE-style metrics (Preference Proxy Evaluations, arXiv 2410.14872): ``cheems eval --metric ppe-preference`` for
its human-preference pairs, ``--metric ppe-correctness`` for its best-of-K correctness sets.

PPE-style, from the paper's definitions: lmarena/PPE's code could not be read when these were written, so they
are not checked against it (:data:`SOURCE`, printed with the numbers). Both report the file's numbers over all its
prompts, as PPE reports each benchmark (``accuracy`` is not a mean over categories here); ``categories`` break
them down. The tie rule (:data:`TIE_RULE`): a pair is right by :func:`~cheems.metrics.metric_registry.pair_right` (a
score tie is wrong), and a tie at the top of a best-of-K pick counts only when every tied response is correct.
What PPE defines and cheems computes from scores: pairwise accuracy, best-of-K (the correctness of the response a
scorer ranks first among a prompt's K), its curve over K (:func:`best_of_k_expectation`) and the row-wise Pearson
correlation of the K scores with the K correctness labels.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.metrics.compat import Compat
from cheems.metrics.metric_registry import pair_right, register_metric

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PromptOutcome


_IMPORT_HINT = "import PPE's files with: cheems import ppe-preference|ppe-correctness IN -o OUT"

SOURCE = "PPE-style, from the paper's definitions (arXiv 2410.14872); lmarena/PPE's code could not be read"
"""Where these numbers come from, in the JSON (``source``) and printed under their table."""

TIE_RULE = (
    "a score tie in a pair is wrong; at the top of a best-of-K pick a tie counts only when every tied response "
    "is correct (in the curve, tied responses are ordered incorrect first)"
)
"""How ties count, in the JSON beside :data:`SOURCE`."""


@register_metric("ppe-preference", title="PPE human preference", help="PPE-style human-preference accuracy")
def ppe_preference_subset(outcomes: Sequence[PromptOutcome], records: list[Record], name: str = "") -> dict[str, Any]:
    """The ``ppe-preference`` metric of one bench file: ``accuracy`` (= ``pooled_accuracy``) is the share of
    its pairs right over all prompts whose vote has a winner; a tied vote has no ranked pair and is counted in
    ``n_label_ties``; ``categories`` (the language) each have their share."""
    hits: dict[str, list[bool]] = defaultdict(list)
    prompts: dict[str, int] = defaultdict(int)
    for outcome in outcomes:
        if outcome.pairs:
            hits[outcome.category] += [pair_right(p) for p in outcome.pairs]
            prompts[outcome.category] += 1
    every = [h for group in hits.values() for h in group]
    if not every:
        raise InputError(
            f"bench file '{name}' has no vote with a winner", path="--metric ppe-preference", hint=_IMPORT_HINT
        )
    categories = {
        category: {"accuracy": statistics.fmean(h), "n_prompts": prompts[category], "n_pairs": len(h)}
        for category, h in sorted(hits.items())
    }
    return {
        "accuracy": statistics.fmean(every),
        "pooled_accuracy": statistics.fmean(every),
        "n_prompts": sum(prompts.values()),
        "n_pairs": len(every),
        "n_label_ties": sum(1 for o in outcomes if not o.pairs),
        "categories": categories,
        "source": SOURCE,
        "ties": TIE_RULE,
    }


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r of two equally long sequences; None when either is constant. Each is divided by its largest
    magnitude first: scores of ±1e200 would overflow the sums of squares to inf (and r to 0.0) otherwise."""
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    scaled = [[v / m for v in seq] for seq in (xs, ys) for m in [max(abs(v) for v in seq)]]
    return max(-1.0, min(1.0, statistics.correlation(*scaled)))


def _correct_flags(record: Record) -> dict[str, bool]:
    flags = {r.id: getattr(r, "correct", None) for r in record.responses}
    if not all(isinstance(f, bool) for f in flags.values()):
        raise InputError(
            f"prompt '{record.id}' does not mark each response 'correct' true or false, as --metric "
            "ppe-correctness needs",
            field="responses",
            hint=_IMPORT_HINT,
        )
    return {rid: bool(flag) for rid, flag in flags.items()}


def check_ppe_record(record: Record, compat: Compat = "strict") -> dict[str, bool]:
    """What ``ppe-correctness`` reads of a record, checked (the same under both ``compat``): each response marked
    ``correct`` true or false, and its ``conflict_pairs``, when it has them, a list of ``[correct id, incorrect
    id]`` pairs of its responses. Returns the flags; raises ``InputError`` (no place: ``cheems eval`` adds the
    file and line, the metric the bench file)."""
    flags = _correct_flags(record)
    sampled = getattr(record, "conflict_pairs", None)
    if sampled is None:
        return flags
    hint = "give conflict_pairs as [[correct response id, incorrect response id], …], or import PPE's file"
    if not isinstance(sampled, list):
        raise InputError(f"must be a list of pairs, got {type(sampled).__name__}", field="conflict_pairs", hint=hint)
    for n, pair in enumerate(sampled):
        field = f"conflict_pairs[{n}]"
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(rid, str) for rid in pair)):
            raise InputError(f"must be a pair of two response ids, got {pair!r}", field=field, hint=hint)
        if unknown := [rid for rid in pair if rid not in flags]:
            raise InputError(f"names no response of prompt '{record.id}': '{unknown[0]}'", field=field, hint=hint)
        correct, wrong = pair
        if not (flags[correct] and not flags[wrong]):
            what = ", ".join(f"'{rid}' is {'correct' if flags[rid] else 'incorrect'}" for rid in pair)
            raise InputError(f"must be [correct id, incorrect id]: {what}", field=field, hint=hint)
    return flags


def _conflicts(outcome: PromptOutcome, record: Record) -> list[bool]:
    """Whether each of a prompt's conflict pairs is right: its ``conflict_pairs`` (PPE's sampled ones, imported
    as [correct id, incorrect id], :func:`check_ppe_record`) when it has them, else every correct-vs-incorrect
    pair."""
    sampled = getattr(record, "conflict_pairs", None)
    if sampled is None:
        return [pair_right(p) for p in outcome.pairs]
    judged = {(p.chosen, p.rejected): p for p in outcome.pairs}
    return [pair_right(judged[correct, wrong]) for correct, wrong in sampled]


def best_of_k_expectation(scores: Sequence[float], flags: Sequence[bool], k: int) -> float:
    """The expected correctness of the best-scored response of a uniformly random ``k``-subset of one row's
    responses (``scores[i]``, ``flags[i]``: correct or not), exactly: with the responses ordered best first, the
    one at rank j (1-based) of n is a subset's best with probability C(n−j, k−1) / C(n, k). The tie rule
    (:data:`TIE_RULE`): equal scores are ordered incorrect first, so a subset whose top is tied counts only when
    every tied response in it is correct (best-of-K's strict rule). ``k = n`` is best-of-K; ``k = 1`` the share
    correct."""
    n = len(scores)
    if not 1 <= k <= n or len(flags) != n:
        raise ValueError(f"need 1 <= k <= {n} and one flag per score, got k={k} and {len(flags)} flags")
    order = sorted(range(n), key=lambda i: (-scores[i], flags[i]))
    hits = sum(math.comb(n - j, k - 1) for j, i in enumerate(order, start=1) if flags[i])
    return hits / math.comb(n, k)  # integers to the end: one rounding


def best_of_k_curve(rows: Sequence[tuple[Sequence[float], Sequence[bool]]]) -> list[dict[str, Any]]:
    """Best-of-K over K = 1 … the largest row's size, as PPE plots it: each K's mean of
    :func:`best_of_k_expectation` over the rows with at least K responses (``n_rows`` of them)."""
    curve = []
    for k in range(1, max(len(scores) for scores, _ in rows) + 1):
        values = [best_of_k_expectation(scores, flags, k) for scores, flags in rows if len(scores) >= k]
        curve.append({"k": k, "best_of_k": statistics.fmean(values), "n_rows": len(values)})
    return curve


@register_metric(
    "ppe-correctness",
    title="PPE correctness",
    help="PPE-style best-of-K: accuracy, best-of-K and its curve, Pearson",
    record_check=check_ppe_record,
)
def ppe_correctness_subset(outcomes: Sequence[PromptOutcome], records: list[Record], name: str = "") -> dict[str, Any]:
    """The ``ppe-correctness`` metric of one bench file (a PPE best-of-K set), over its rows (``n_rows``):

    - ``accuracy`` (= ``pooled_accuracy``): the share of conflict pairs right (a correct and an incorrect
      response of one row: PPE's ``sampled_conflict_pairs`` when the rows have them, else every such pair;
      ``n_conflict_pairs`` of them), over the ``n_prompts`` rows that have one (``n_pairs``: every
      correct-vs-incorrect pair judged);
    - ``best_of_k``: the mean over every row of whether the response scored highest is correct (a row all
      correct counts 1, all wrong 0; a tie at the top counts only when every tied response is correct:
      cheems' strict rule), beside ``random_best_of_k`` (a random pick's expected value, the mean share of
      correct responses) and ``oracle_best_of_k`` (the share of rows with a correct response);
    - ``best_of_k_curve``: best-of-K for each K from 1 to K (:func:`best_of_k_curve`: the exact expectation over
      random K-subsets of each row, the same tie rule), the curve PPE plots;
    - ``pearson``: the mean over rows with both kinds of response of Pearson's r between the K scores and
      the K labels (1 correct, 0 not); rows whose scores are all equal are left out and counted in
      ``pearson_undefined``.

    The score-based keys need a scorer; a judge gets ``accuracy`` alone. ``source`` and ``ties`` say where the
    definitions come from and how ties count."""
    by_id = {r.id: r for r in records}
    hits: dict[str, list[bool]] = defaultdict(list)
    prompts: dict[str, int] = defaultdict(int)
    pairs: dict[str, int] = defaultdict(int)
    flags_all, best, rs, undefined = [], [], [], 0
    rows: list[tuple[list[float], list[bool]]] = []  # each row's scores and flags, for the curve
    scored = all(o.response_scores() is not None for o in outcomes)
    for outcome in outcomes:
        record = by_id[outcome.prompt_id]
        try:
            flags = check_ppe_record(record)
        except InputError as e:  # records in memory (the Python API): the bench files' are checked as read
            raise e.located(f"bench file '{name}'") from None
        flags_all.append(flags)
        if not outcome.pairs:  # all correct or all wrong: any pick scores the same
            best.append(float(all(flags.values())))
            rows.append(([0.0] * len(flags), list(flags.values())))
            continue
        hits[outcome.category] += _conflicts(outcome, record)
        prompts[outcome.category] += 1
        pairs[outcome.category] += len(outcome.pairs)
        if scored:
            scores = outcome.response_scores() or {}
            top = max(scores.values())
            best.append(float(all(flags[rid] for rid, s in scores.items() if s == top)))
            rows.append((list(scores.values()), [flags[rid] for rid in scores]))
            r = pearson(list(scores.values()), [float(flags[rid]) for rid in scores])
            if r is None:
                undefined += 1
            else:
                rs.append(r)
    every = [h for group in hits.values() for h in group]
    if not every:
        raise InputError(
            f"no prompt of bench file '{name}' has both a correct and an incorrect response",
            path="--metric ppe-correctness",
            hint=_IMPORT_HINT,
        )
    out: dict[str, Any] = {
        "accuracy": statistics.fmean(every),
        "pooled_accuracy": statistics.fmean(every),
        "n_prompts": sum(prompts.values()),
        "n_pairs": sum(pairs.values()),
        "n_conflict_pairs": len(every),
        "n_rows": len(flags_all),
        "categories": {
            category: {
                "accuracy": statistics.fmean(h),
                "n_prompts": prompts[category],
                "n_pairs": pairs[category],
                "n_conflict_pairs": len(h),
            }
            for category, h in sorted(hits.items())
        },
    }
    if scored:
        out |= {
            "best_of_k": statistics.fmean(best),
            "random_best_of_k": statistics.fmean(
                [statistics.fmean([float(f) for f in fl.values()]) for fl in flags_all]
            ),
            "oracle_best_of_k": statistics.fmean([float(any(fl.values())) for fl in flags_all]),
            "best_of_k_curve": best_of_k_curve(rows),
            "pearson": statistics.fmean(rs) if rs else None,
            "pearson_undefined": undefined,
        }
    return out | {"source": SOURCE, "ties": TIE_RULE}
