"""The settings of the evaluation commands (``eval``, ``bon``, ``winrate``, ``demo``, ...): one field per option,
with its description. Apart from the modules that compute (numpy loads only for a command that needs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from cheems.errors import InputError
from cheems.metrics.compat import Compat
from cheems.metrics.metric_registry import METRICS
from cheems.settings import Cli, Settings, rule

Sample = Literal["first", "random"]


class CompatSettings(Settings):
    """Which rules the numbers follow (``--compat`` of ``eval``, ``bon`` and ``score``, whose scores file then
    feeds ``eval --scores --compat upstream``): :mod:`cheems.metrics.compat`."""

    compat: Compat = Field(
        "strict",
        description="strict: a score tie is wrong and the sys_prompt is read, as training sees it; upstream: "
        "each benchmark's official code exactly (CheemsBench exact match, no sys_prompt; RewardBench 2 ties).",
    )


class EvalSettings(CompatSettings):
    """How ``cheems eval`` measures: the metric, and the bootstrap of its intervals (:func:`evaluate_files`)."""

    metric: str = Field("cheems", description=f"{METRICS.help_text()}.")  # checked by METRICS, naming --metric
    resamples: Annotated[int, rule(lambda n: n >= 0, "must be 0 or more, got {value}")] = Field(
        1000, description="Bootstrap resamples of the prompts for the intervals; 0: none."
    )
    bootstrap_seed: int = Field(0, description="Seed of the bootstrap resampling.")
    checks: Literal["cheap", "all", "none"] = Field(
        "cheap",
        description="The evaluation's own checks (docs/checks.md): cheap (the pairs and texts), all (also score "
        "again or ask the judge, as cheems doctor), none.",
    )


class BonSettings(CompatSettings):
    """How best-of-N draws each prompt's candidates: :func:`cheems.bon`'s ``n``, ``sample`` and ``seed``, and
    its ``compat`` (upstream: scored without the sys_prompt)."""

    n: Annotated[int | None, Cli("-n"), rule(lambda n: n is None or n >= 1, "must be at least 1, got {value}")] = Field(
        None, description="Candidates per prompt (N); default: all of each prompt's."
    )
    sample: Sample = Field(
        "first", description="first: the first N responses of each prompt; random: a seeded random N."
    )
    seed: int = Field(0, description="Seed of --sample random.")


class WinrateSettings(Settings):
    """How ``cheems winrate`` matches picks with the baseline and measures the win rate."""

    baseline_field: str | None = Field(
        None, description="Record field with the baseline response: reference or an extra key."
    )
    overlap: Annotated[int, rule(lambda n: n >= 1, "must be at least 1, got {value}")] = Field(
        1, description="With --annotate: annotators per prompt."
    )
    resamples: Annotated[int, rule(lambda n: n >= 0, "must be 0 or more, got {value}")] = Field(
        1000, description="Bootstrap resamples of the prompts for the interval; 0: none."
    )
    bootstrap_seed: int = Field(0, description="Seed of the bootstrap resampling.")
    skip_missing: Annotated[bool, Cli(flag=True)] = Field(
        False, description="Leave out (and list) picks whose prompt, response or baseline is missing."
    )


class CompareSettings(Settings):
    """How ``cheems compare`` (:func:`cheems.compare`) tests the difference of two evaluations."""

    resamples: Annotated[int, rule(lambda n: n >= 1, "must be at least 1, got {value}")] = Field(
        1000, description="Paired bootstrap resamples."
    )
    seed: int = Field(0, description="Seed of the bootstrap resampling.")
    level: Annotated[
        float,
        rule(
            lambda x: 0.5 <= x <= 0.999,
            "must be between 0.5 and 0.999, got {value:g}",
            "give a number between 0.5 and 0.999",
        ),
    ] = Field(0.95, description="Confidence level of the intervals; significant: p < 1 - level.")


class CorrelateSettings(Settings):
    """How ``cheems correlate`` bootstraps the correlations over reward models."""

    resamples: Annotated[int, rule(lambda n: n >= 1, "must be at least 1, got {value}")] = Field(
        1000, description="Bootstrap resamples of the RMs."
    )
    seed: int = Field(0, description="Seed of the bootstrap resampling.")


class BiasSettings(Settings):
    """How ``cheems analyze bias`` groups the judgements and bins their length differences."""

    by: Literal["file", "source", "annotator"] = Field(
        "file", description="One group per input file, comparison source, or annotator."
    )
    bins: Annotated[int, rule(lambda n: n >= 1, "must be at least 1, got {value}")] = Field(
        10, description="Equal-count bins of the length difference."
    )


class LeaderboardSettings(Settings):
    """How ``cheems leaderboard`` names its rows and titles the table."""

    name: list[str] = Field(
        default_factory=list,
        description="Row name, once per file in their order (default: the JSON's name, else the last part of its "
        "scorer, e.g. a model's folder name, else the file stem).",
    )
    title: str = Field("CheemsBench leaderboard", description="Title of the table and page.")


class DemoSettings(Settings):
    """What ``cheems demo`` scores with, and whether it trains."""

    model: Annotated[str, Cli("--model", "-m")] = Field(
        "similarity:m3e-small", description="The small Chinese model to score with."
    )
    no_train: Annotated[bool, Cli(flag=True)] = Field(
        False, description="Skip the training step (about a minute on 2 CPU cores)."
    )


class DoctorSettings(Settings):
    """How ``cheems doctor`` draws the sample its expensive checks score again or ask the judge about."""

    sample: Annotated[int, rule(lambda n: n >= 1, "must be at least 1, got {value}")] = Field(
        32, description="Responses batch_invariance scores again; prompts judge_null_responses asks about."
    )
    sample_seed: int = Field(0, description="Seed of the sample.")


def check_metric(metric: str, report: Path | None, judge: bool = False) -> None:
    """``--metric`` names a known metric that can read what scores (a ``judge``'s verdicts or scores); the HTML
    report (``--report``) is CheemsBench's only."""
    entry = METRICS.get(metric)  # an unknown metric: the one line listing them
    if judge and entry.scores_only:
        raise InputError(
            f"{metric} needs every response's score, and a judge gives verdicts on pairs",
            path="--metric",
            hint="evaluate a reward model (--model) or a scores file (--scores) with it",
        )
    other = entry.subset is not None
    if other and report is not None:
        raise InputError(
            f"--report writes the CheemsBench report; --metric {metric} has none",
            path="--report",
            hint="leave out --report (use --output-json), or --metric",
        )
