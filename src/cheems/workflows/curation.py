"""A curation recipe run with the real LLM judge and reward-model scorer plugged in.

:mod:`cheems.curate.recipe` runs the stages; the scorer (in :mod:`cheems.models`, later in the flow
than curation) reaches it from here, as does the judge, so the recipe module stays testable with
any judge and scorer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cheems.curate.recipe import RecipeSummary, load_recipe, run_recipe
from cheems.data.schema import Record
from cheems.errors import InputError


def rm_scores(records: list[Record], model: str) -> dict:
    """Every response's score from the reward model ``model`` (what a recipe's ``distant: {model: …}`` needs)."""
    from cheems.models import load_scorer, score_records

    return score_records(records, load_scorer(model))


def judge_settings(settings: dict[str, Any]) -> Any:
    """``JudgeSettings`` from a recipe's ``judge:`` mapping; unknown, missing or bad keys are InputErrors."""
    import dataclasses

    from cheems.annotate import JudgeSettings
    from cheems.data.yamlfile import validate_config

    fields = dataclasses.fields(JudgeSettings)
    known = [f.name for f in fields]
    for key in settings:
        if key not in known:
            raise InputError(f"unknown key '{key}'", field=key, hint=f"known keys: {', '.join(known)}")
    for f in fields:
        if f.name not in settings and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError("is missing", field=f.name, hint="add it")
    judge = validate_config(settings, JudgeSettings)  # types and finite numbers, as every config value
    judge.check()
    return judge


def llm_judgements(records: list[Record], settings: dict[str, Any], log: Callable[[str], None]) -> list[Record]:
    """The records with the LLM judge's comparisons (what a recipe's ``judge:`` stage needs); logs a summary."""
    from cheems.annotate import judge_records

    result = judge_records(records, judge_settings(settings))
    stats = result.stats
    log(
        f"judge {stats.judge_model}: {stats.pairs} questions, {stats.judged} judged, {stats.cached} from the cache, "
        f"{stats.failed_total} without a verdict, {stats.not_attempted} not attempted"
    )
    return result.records


def run_curation(path: str | Path, *, skip_invalid: bool, log: Callable[[str], None]) -> RecipeSummary:
    """Load the recipe at ``path`` (its judge settings checked up front) and run it with the real judge and scorer."""
    recipe = load_recipe(path, check_judge=judge_settings)
    return run_recipe(
        recipe,
        judge=lambda records, settings: llm_judgements(records, settings, log),
        score=rm_scores,
        skip_invalid=skip_invalid,
        log=log,
    )
