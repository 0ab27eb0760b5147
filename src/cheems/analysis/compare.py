"""Two evaluations of the same bench compared (``cheems compare``, :func:`compare`): the paired bootstrap over prompts
(both runs see the same resampled prompts, :func:`cheems.metrics.bootstrap.cheemsbench_draws`) of every metric's
difference, and McNemar's test on the pooled pairs (:func:`mcnemar`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cheems.errors import InputError
from cheems.evaluate.bench import EvalReport
from cheems.evaluate.details import Details, read_details
from cheems.metrics.bootstrap import Interval, check_bootstrap, cheemsbench_draws, percentile_interval
from cheems.metrics.cheemsbench import overall, subset_metrics
from cheems.metrics.compat import compat_record
from cheems.metrics.outcomes import Outcomes

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text


@dataclass
class Difference:
    """One metric of scorer A and scorer B, A - B with its paired bootstrap interval and p-value."""

    a: float
    b: float
    delta: float
    ci: Interval
    p_value: float

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "delta": self.delta, "ci": list(self.ci), "p_value": self.p_value}


@dataclass
class McNemar:
    """McNemar's test on paired pairs: ``b`` = A right and B wrong, ``c`` = B right and A wrong."""

    pairs: int
    b: int
    c: int
    exact_p: float  # two-sided binomial test of b among b + c discordant pairs, p = 1/2
    chi2: float  # (max(|b - c| - 1, 0))^2 / (b + c): with continuity correction
    chi2_p: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "b": self.b,
            "c": self.c,
            "exact_p": self.exact_p,
            "chi2": self.chi2,
            "chi2_p": self.chi2_p,
        }


def mcnemar(b: int, c: int, pairs: int) -> McNemar:
    """McNemar's test from the discordant counts; no discordant pair gives p = 1.

    The exact p-value is ``scipy.stats.binomtest(b, b + c, 0.5)`` (two-sided); the chi-square has
    Edwards' continuity correction, floored at 0 so that b = c gives chi2 = 0 and p = 1.
    """
    from scipy.stats import binomtest, chi2

    if b + c == 0:
        return McNemar(pairs, b, c, 1.0, 0.0, 1.0)
    statistic = max(abs(b - c) - 1, 0) ** 2 / (b + c)
    return McNemar(pairs, b, c, float(binomtest(b, b + c, 0.5).pvalue), statistic, float(chi2.sf(statistic, 1)))


@dataclass
class Comparison:
    """Scorer A (the first details file) against scorer B on one bench."""

    a: Details
    b: Details
    resamples: int
    seed: int
    level: float
    overall: Difference
    subsets: dict[str, dict[str, Difference]]  # subset -> {"accuracy": ..., "exact_match": ...}
    mcnemar: McNemar

    def to_dict(self) -> dict[str, Any]:
        """JSON of ``cheems compare --output-json``."""
        return {
            "a": {"path": self.a.path, "scorer": self.a.scorer},
            "b": {"path": self.b.path, "scorer": self.b.scorer},
            "bench": self.a.bench,
            "bootstrap": {"resamples": self.resamples, "seed": self.seed, "level": self.level},
            "overall": self.overall.to_dict(),
            "subsets": {name: {m: d.to_dict() for m, d in diffs.items()} for name, diffs in self.subsets.items()},
            "mcnemar": self.mcnemar.to_dict(),
        } | compat_record(self.a.compat, "cheems")


def _pair_keys(d: Details) -> dict[tuple[str, str, str, str, str], bool]:
    """(subset, prompt, category, chosen, rejected) -> right, for every pair of a details file."""
    return {
        (subset, o.prompt_id, o.category, p.chosen, p.rejected): p.correct
        for subset, prompts in d.outcomes.items()
        for o in prompts
        for p in o.pairs
    }


def _same_bench(
    a: Details, b: Details
) -> tuple[dict[tuple[str, str, str, str, str], bool], dict[tuple[str, str, str, str, str], bool]]:
    """Both files' pair keys, or a one-line error naming both files when they come from different benches."""
    where, hint = f"{a.path}, {b.path}", "compare details files that cheems eval --details wrote on the same bench"
    if a.bench != b.bench:
        raise InputError(
            f"the two details files come from different benches (bench {a.bench[:12]}… vs {b.bench[:12]}…)",
            path=where,
            hint=hint,
        )
    if a.compat != b.compat:  # each file's numbers follow its own rules: a difference would mix them
        raise InputError(
            f"the two details files follow different rules ({a.path}: --compat {a.compat}, {b.path}: --compat "
            f"{b.compat})",
            path=where,
            hint="write both with the same --compat (cheems eval --compat strict|upstream --details)",
        )
    keys_a, keys_b = _pair_keys(a), _pair_keys(b)
    if keys_a.keys() != keys_b.keys():
        only = sorted(keys_a.keys() - keys_b.keys()) or sorted(keys_b.keys() - keys_a.keys())
        subset, prompt, category, chosen, rejected = only[0]
        owner = a.path if only[0] in keys_a else b.path
        raise InputError(
            f"the two details files have the same bench fingerprint but not the same pairs (first: subset "
            f"'{subset}' prompt '{prompt}' category '{category}' pair {chosen} > {rejected} is only in {owner})",
            path=where,
            hint=hint,
        )
    if not keys_a:
        raise InputError("the details files hold no pair to compare", path=where, hint=hint)
    return keys_a, keys_b


def _aligned(d: Details) -> dict[str, Outcomes]:
    """Each subset with a ranked pair, its prompts that count sorted by id (so both files, and A/B swapped,
    resample alike): those with pairs, and under upstream every prompt (its exact match counts them)."""
    out = {
        name: sorted((o for o in d.outcomes[name] if o.pairs or d.compat == "upstream"), key=lambda o: o.prompt_id)
        for name in sorted(d.outcomes)
    }
    return {name: Outcomes.of(prompts) for name, prompts in out.items() if any(o.pairs for o in prompts)}


ZERO = 1e-12
"""A paired difference smaller than this is 0: two equal means of the same draw, summed in another order, can come
out as ±3e-17 and would count on one side of 0 only."""


def _difference(a: float, b: float, draws: np.ndarray, level: float) -> Difference:
    """A - B from the full data, with the percentile interval and two-sided p-value of the paired draws."""
    resamples = len(draws)
    draws = np.where(np.abs(draws) < ZERO, 0.0, draws)
    delta = a - b if abs(a - b) >= ZERO else 0.0
    below = (np.count_nonzero(draws <= 0) + 1) / (resamples + 1)
    above = (np.count_nonzero(draws >= 0) + 1) / (resamples + 1)
    return Difference(a, b, delta, percentile_interval(draws, level), min(1.0, 2 * min(below, above)))


def compare_details(a: Details, b: Details, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> Comparison:
    """Scorer A against scorer B on the same bench: paired bootstrap over prompts and McNemar's test.

    The files must come from the same bench (same fingerprint and the same pairs) and follow the same rules
    (``--compat``: the numbers are recomputed under them, as the evaluations made theirs), else an
    ``InputError`` names both. Subsets are taken in name order, prompts in id order; each resample
    draws prompts (``rng.integers`` as for :func:`cheems.metrics.bootstrap.intervals_of`) and both scorers are scored on
    the same draw, so the differences are paired. Each metric's ``delta`` is A - B on the full data,
    ``ci`` the percentile interval of the resampled differences at ``level``.

    p-value (two-sided, bootstrap): with ``k_le`` / ``k_ge`` the resamples whose difference is
    <= 0 / >= 0 (a zero counts on both sides) out of ``R``,
    ``p = min(1, 2 * min((k_le + 1) / (R + 1), (k_ge + 1) / (R + 1)))``. The +1 keeps the draw
    itself in the count, so p is never 0 (at least 2 / (R + 1)); 0 outside the interval at level
    1 - alpha goes with p < alpha except where the interval's interpolation falls right next to 0.

    McNemar pools every pair of the bench (it ignores that pairs of one prompt are related; the
    bootstrap does not).
    """
    check_bootstrap(resamples, level)
    keys_a, keys_b = _same_bench(a, b)
    prompts_a, prompts_b = _aligned(a), _aligned(b)
    compat = a.compat  # the same as b's (_same_bench)
    rng = np.random.default_rng(seed)
    subsets, total = {}, np.zeros((2, resamples))
    for name, prompts in prompts_a.items():
        draws = cheemsbench_draws(rng, [prompts, prompts_b[name]], resamples, compat)  # (metric, scorer, resample)
        metric_a, metric_b = subset_metrics(prompts, compat), subset_metrics(prompts_b[name], compat)
        subsets[name] = {
            "accuracy": _difference(metric_a.accuracy, metric_b.accuracy, draws[0, 0] - draws[0, 1], level),
            "exact_match": _difference(metric_a.exact_match, metric_b.exact_match, draws[1, 0] - draws[1, 1], level),
        }
        total += draws.mean(axis=0)
    overall_a = overall({name: subset_metrics(p, compat) for name, p in prompts_a.items()})
    overall_b = overall({name: subset_metrics(p, compat) for name, p in prompts_b.items()})
    total /= len(prompts_a)
    b_count = sum(right and not keys_b[key] for key, right in keys_a.items())
    c_count = sum(keys_b[key] and not right for key, right in keys_a.items())
    return Comparison(
        a,
        b,
        resamples,
        seed,
        level,
        _difference(overall_a, overall_b, total[0] - total[1], level),
        subsets,
        mcnemar(b_count, c_count, len(keys_a)),
    )


# ---------------------------------------------------------------- on the terminal
def _names(result: Comparison) -> tuple[str, str]:
    """The scorers' names, or the files' when both runs name the same scorer, a path by its last parts
    (printed literally: the console reads no markup)."""
    from cheems.analysis.leaderboard import short_names

    a, b = result.a, result.b
    names = short_names((a.scorer, b.scorer) if a.scorer != b.scorer else (a.path, b.path))
    return names[0], names[1]


_METRICS = {"accuracy": "acc", "exact_match": "exact"}


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def print_comparison(result: Comparison, console: Console) -> None:
    """The table of differences, McNemar's test, and one sentence on the overall score."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from cheems.evaluate.report import OVERALL
    from cheems.evaluate.report_html import compact_interval

    name_a, name_b = _names(result)
    alpha = 1 - result.level
    # fits an 80-column terminal: no vertical rules, short labels, the interval to two places; a cell
    # wraps at its spaces (a long name folds), nothing is cut
    table = Table(
        title=f"A = {name_a}   vs   B = {name_b}", caption=OVERALL, box=box.SIMPLE_HEAVY, collapse_padding=True
    )
    for col in ("subset", "metric", "A", "B", "A - B", f"{result.level * 100:g}% CI", "p", "verdict"):
        left = col in ("subset", "metric", "verdict")
        table.add_column(col, justify="left" if left else "right", overflow="fold")
    rows = [(name, metric, d) for name, diffs in result.subsets.items() for metric, d in diffs.items()]
    for i, (subset, metric, d) in enumerate([*rows, ("overall", "", result.overall)]):
        verdict = _verdict(d, alpha, name_a, name_b)
        table.add_row(
            Text(subset, style="bold" if subset == "overall" else ""),
            _METRICS.get(metric, metric),
            f"{d.a:.3f}",
            f"{d.b:.3f}",
            f"{d.delta:+.3f}",
            compact_interval(*d.ci, signed=True),
            _p(d.p_value),
            verdict,
            end_section=i == len(rows) - 1,
        )
    console.print(table)
    if result.a.compat != "strict":  # the numbers are the evaluations' own, under the rules both files record
        console.print(f"compat {result.a.compat}: exact match as the details files' evaluations computed it")
    m = result.mcnemar
    console.print(
        f"McNemar on {m.pairs} pooled pairs: A right and B wrong {m.b}, B right and A wrong {m.c}; "
        f"exact p = {_p(m.exact_p)}, chi-square (continuity corrected) = {m.chi2:.2f}, p = {_p(m.chi2_p)}",
        soft_wrap=True,
        highlight=False,
    )
    d, at = result.overall, f"at the {alpha * 100:g}% level"
    if d.delta == 0 or d.p_value >= alpha:
        sentence = f"overall: no significant difference {at}: A - B = {d.delta:+.3f}"
    else:
        better, worse = (name_a, name_b) if d.delta > 0 else (name_b, name_a)
        sentence = f"overall: {better} is better than {worse} by {abs(d.delta):.3f}, significant {at}"
    console.print(
        f"{sentence} (paired bootstrap over prompts, {result.resamples} resamples, seed {result.seed}, "
        f"p = {_p(d.p_value)})",
        soft_wrap=True,
        highlight=False,
    )


def _verdict(d: Difference, alpha: float, name_a: str, name_b: str) -> Text:
    from rich.text import Text

    if d.delta == 0 or d.p_value >= alpha:
        return Text("not significant")
    return Text(f"{name_a if d.delta > 0 else name_b} better", style="green")


def details_of(report: EvalReport | Details | str | Path) -> Details:
    """An evaluation's judged pairs as :func:`compare` takes them: a report as it is, a details file read."""
    if isinstance(report, Details):
        return report
    if isinstance(report, EvalReport):
        # a report in memory has no bench fingerprint: the pairs themselves must match
        outcomes = {name: list(o) for name, o in report.outcomes.items()}
        return Details(report.scorer, report.scorer, "", outcomes, report.compat)
    return read_details(report)


def compare(
    a: EvalReport | Details | str | Path,
    b: EvalReport | Details | str | Path,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Comparison:
    """Evaluation A against evaluation B of the same bench: paired bootstrap over prompts and McNemar's test.

    Each of ``a`` and ``b`` is an :class:`EvalReport` (from :func:`cheems.evaluate`) or a details file
    ``cheems eval --details`` wrote. ``result.to_dict()`` is what ``cheems compare --output-json`` writes for
    the same files. Raises ``InputError`` when the two do not hold the same pairs.
    """
    return compare_details(details_of(a), details_of(b), resamples, seed, level)
