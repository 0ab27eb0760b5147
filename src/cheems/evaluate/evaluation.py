"""The evaluation steps as a script calls them: score a bench, evaluate a scorer, a scores table or a judge on
it, compare two evaluations, pick best-of-N. ``cheems score``, ``eval``, ``compare`` and ``bon`` print what
these return (``cheems.score``, ``cheems.evaluate``, ``cheems.compare``, ``cheems.bon``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cheems.data.io import ScoreKey
from cheems.data.schema import Record
from cheems.evaluate.bench import EvalReport, score_bench
from cheems.evaluate.bench import evaluate as evaluate_scores
from cheems.evaluate.bon import BonResult, Sample, best_of_n
from cheems.evaluate.details import Details, read_details
from cheems.evaluate.stats import Comparison, add_intervals, compare_details
from cheems.models.base import Scorer

if TYPE_CHECKING:
    from cheems.annotate.settings import JudgeSettings
    from cheems.models.cache import ScoreCache

Bench = Mapping[str, list[Record]]


def score(bench: Bench, scorer: Scorer, *, cache: ScoreCache | None = None) -> dict[ScoreKey, float]:
    """Score every response of a bench (:func:`cheems.load_bench`) with a scorer (:func:`cheems.load_scorer`).

    Returns ``{(prompt_id, response_id): score}``, the rows ``cheems score`` writes. ``cache``: a
    :class:`cheems.models.ScoreCache` to read and fill (``ScoreCache()`` is the CLI's default file); None
    scores everything afresh.
    """
    return score_bench(dict(bench), scorer, cache)


def evaluate(
    bench: Bench,
    by: Scorer | Mapping[ScoreKey, float] | JudgeSettings,
    *,
    source: str | None = None,
    resamples: int = 1000,
    seed: int = 0,
    cache: ScoreCache | None = None,
    progress: bool = True,
) -> EvalReport:
    """CheemsBench's metrics of a bench judged ``by`` a scorer, a scores table or an LLM judge.

    - ``by``: a :class:`cheems.models.Scorer` (scored here, through ``cache`` when given), a mapping
      ``{(prompt_id, response_id): score}`` (:func:`cheems.data.read_scores` reads a scores file), or a
      :class:`cheems.annotate.JudgeSettings` (the judge's verdicts are cached in its ``cache`` file);
    - ``source``: the name the report gives what was evaluated (default: the scorer's name, ``scores``,
      or the judge model);
    - ``resamples``, ``seed``: the bootstrap intervals of the prompts (0: none), as ``--resamples`` and
      ``--bootstrap-seed``;
    - ``progress``: a judge's progress bar.

    ``report.to_dict()`` is what ``cheems eval --output-json`` writes for the same inputs.
    """
    from cheems.annotate.settings import JudgeSettings

    bench = dict(bench)
    if isinstance(by, JudgeSettings):
        from cheems.evaluate.judge import judge_bench

        report = judge_bench(bench, by, progress=progress)
    elif isinstance(by, Mapping):
        report = evaluate_scores(bench, dict(by), source or "scores")
    else:
        report = evaluate_scores(bench, score_bench(bench, by, cache), source or by.name)
    if resamples:
        add_intervals(report, resamples, seed)
    return report


def details_of(report: EvalReport | Details | str | Path) -> Details:
    """An evaluation's judged pairs as :func:`compare` takes them: a report as it is, a details file read."""
    if isinstance(report, Details):
        return report
    if isinstance(report, EvalReport):
        # a report in memory has no bench fingerprint: the pairs themselves must match
        return Details(report.scorer, report.scorer, "", {name: list(o) for name, o in report.outcomes.items()})
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

    Each of ``a`` and ``b`` is an :class:`EvalReport` (from :func:`evaluate`) or a details file
    ``cheems eval --details`` wrote. ``result.to_dict()`` is what ``cheems compare --output-json`` writes for
    the same files. Raises ``InputError`` when the two do not hold the same pairs.
    """
    return compare_details(details_of(a), details_of(b), resamples, seed, level)


def bon(
    pool: list[Record],
    by: Scorer | Mapping[ScoreKey, float],
    *,
    n: int | None = None,
    sample: Sample = "first",
    seed: int = 0,
    source: str | None = None,
    cache: ScoreCache | None = None,
) -> BonResult:
    """Best-of-N: pick the best-scored response of each prompt of ``pool``, scored ``by`` a scorer (through
    ``cache`` when given) or a scores table; with gold ranks or scores, the best-of-n curve.

    ``result.picks`` are the rows ``cheems bon -o`` writes, ``result.to_dict()`` its ``--output-json``.
    ``n``, ``sample``, ``seed`` as ``-n``, ``--sample``, ``--seed``; ``source`` names the scorer (default
    its name, or ``scores``).
    """
    if isinstance(by, Mapping):
        values, name = dict(by), source or "scores"
    else:
        values, name = score_bench({"pool": pool}, by, cache), source or by.name
    return best_of_n(pool, values, n=n, sample=sample, seed=seed, scorer=name)
