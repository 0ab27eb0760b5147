"""A curation recipe run with the real LLM judge and reward-model scorer plugged in.

:mod:`cheems.curate.recipe` runs the stages; the scorer (in :mod:`cheems.models`, later in the flow
than curation) reaches it from here, as does the judge, so the recipe module stays testable with
any judge and scorer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from cheems.curate.distant import DistantReport, DistantSettings, distant_file, distant_supervision
from cheems.curate.recipe import RecipeSummary, load_recipe, run_recipe
from cheems.data.io import ReadResult, ScoreKey, record_line, write_lines_and_report
from cheems.data.schema import Record
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.judge.judge_settings import JudgeSettings

if TYPE_CHECKING:
    from cheems.evaluate.evaluation import ScoredBy
    from cheems.models.base import Scorer


def rm_scores(records: list[Record], model: str | Scorer) -> dict[ScoreKey, float]:
    """Every response's score from the reward model ``model``, a spec or a scorer loaded (what a recipe's
    ``distant: {model: …}`` and ``cheems curate distant --model`` need)."""
    from cheems.models import load_scorer, score_records

    return score_records(records, load_scorer(model) if isinstance(model, str) else model)


def llm_judgements(records: list[Record], settings: JudgeSettings, log: Callable[[str], None]) -> list[Record]:
    """The records with the LLM judge's comparisons (what a recipe's ``judge:`` stage needs); logs a summary."""
    from cheems.judge import judge_records

    result = judge_records(records, settings)
    stats = result.stats
    log(
        f"judge {stats.judge_model}: {stats.pairs} questions, {stats.judged} judged, {stats.cached} from the cache, "
        f"{stats.failed_total} without a verdict, {stats.not_attempted} not attempted"
    )
    return cast("list[Record]", result.records)


def run_curation(path: str | Path, *, skip_invalid: bool, log: Callable[[str], None]) -> RecipeSummary:
    """Load the recipe at ``path`` and run it with the real judge and scorer."""
    recipe = load_recipe(path)
    return run_recipe(
        recipe,
        judge=lambda records, settings: llm_judgements(records, settings, log),
        score=rm_scores,
        skip_invalid=skip_invalid,
        log=log,
    )


def curate_distant(
    source: str | Path,
    output: str | Path,
    by: ScoredBy,
    settings: DistantSettings | None = None,
    report_json: str | Path | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> tuple[DistantReport, ReadResult]:
    """Distant supervision of a record file by a scores file (streamed: :func:`~cheems.curate.distant.distant_file`)
    or a reward model (which scores every record at once: they are read into memory), as ``cheems curate distant``:
    the report and the lines skipped."""
    settings = settings or DistantSettings()
    if by.scores is not None:
        return distant_file(
            source, output, by.scores, settings, report_json, skip_invalid=skip_invalid, workers=workers
        )
    loaded = read_records(source, skip_invalid=skip_invalid)
    try:
        scores = rm_scores(loaded.records, by.scoring.scorer())
    except InputError as e:  # the records are read: an error without a place of its own is the model's
        raise e.located("--model") from None
    out, report = distant_supervision(loaded.records, scores, settings.margin, settings.filtered, scores_path=by.source)
    write_lines_and_report(output, map(record_line, out), report_json, report.to_dict)
    return report, loaded
