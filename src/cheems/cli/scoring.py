"""The options of the commands that score (``score``, ``eval``, ``bon``): the fields of
:class:`cheems.models.scoring.ScoringSettings` and, for an RM server, :data:`cheems.cli.options.CONNECTION_OPTIONS`;
the one decoding of "exactly one of ``--scores`` / ``--model`` / ``--judge-model``" (:func:`scored_by`), and the
warning for scores of no response (``warn_unmatched``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cheems.cli.console import report_warnings
from cheems.cli.judge import endpoint_settings
from cheems.cli.options import CONNECTION_OPTIONS, settings_of
from cheems.data.io import ScoreKey
from cheems.errors import InputError
from cheems.judge.judge_settings import JudgeSettings
from cheems.llm.endpoint import ConnectionSettings
from cheems.models.scoring import ScoringSettings

if TYPE_CHECKING:
    from cheems.evaluate.evaluation import ScoredBy

# ScoringSettings' fields, as ``settings_options`` lists them (after ``model``), with an RM server's connection.
SCORING_OPTIONS = ("batch_size", "max_length", "cache", "no_cache", "device", "dtype", "no_shared_prefix")
SCORING_MODELS = (ScoringSettings, ConnectionSettings)  # the settings a scoring command composes
SCORING_AND_SERVER = (*SCORING_OPTIONS, *CONNECTION_OPTIONS)


def scored_by(
    settings: dict[str, Any], scores: Path | None, *, ok: bool, needs: str, hint: str, others: tuple = ()
) -> ScoredBy:
    """The one of ``--scores``, ``--model`` and ``--judge-model`` (each only where the command has it) given,
    with its settings; one line ``needs`` when not exactly one of them and the command's ``others`` (winrate's
    ``--annotate``, ``--from-export``) is given, or the command's other requirements are not met (not ``ok``)."""
    from cheems.evaluate.evaluation import ScoredBy

    judge = settings.get("judge_model")
    if not ok or sum(x is not None for x in (scores, settings.get("model"), judge, *others)) != 1:
        raise InputError(needs, hint=hint)
    if judge:
        if settings.get("no_cache"):
            raise InputError(
                "a judge's verdicts are always cached (an interrupted run resumes from them)",
                path="--no-cache",
                hint="leave out --no-cache, or give --cache FILE to keep them in another file",
            )
        return ScoredBy(judge=endpoint_settings(JudgeSettings, settings))
    scoring = settings_of(ScoringSettings, settings)
    return ScoredBy(scores=scores, scoring=scoring, connection=settings_of(ConnectionSettings, settings))


def warn_unmatched(unmatched: list[ScoreKey], source: str, of: str) -> None:
    """One warning for scores that match no response of ``of`` (the bench, the pool): they are not used."""
    if unmatched:
        prompt, response = unmatched[0]
        report_warnings(
            [
                InputError(
                    f"{len(unmatched)} score(s) match no response of {of} (first: prompt '{prompt}' response "
                    f"'{response}'); they are not used",
                    path=source,
                    hint=f"check that the scores and {of} use the same ids",
                )
            ]
        )
