"""The options of the commands that score (``score``, ``eval``, ``bon``): the fields of
:class:`cheems.models.scoring.ScoringSettings` and, for an RM server, :data:`cheems.cli.options.CONNECTION_OPTIONS`;
"exactly one of ``--scores`` / ``--model`` / ``--judge-model``" (:meth:`cheems.ScoredBy.from_settings`) with the
option-named errors, and the warning for scores of no response (``warn_unmatched``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from cheems.cli.console import report_warnings
from cheems.cli.options import CONNECTION_OPTIONS
from cheems.data.io import ScoreKey
from cheems.errors import InputError
from cheems.llm.endpoint import ConnectionSettings
from cheems.models.scoring import ScoringSettings
from cheems.settings import settings_of

if TYPE_CHECKING:
    from cheems.evaluate.evaluation import ScoredBy

# ``--cache`` of the commands that take a reward model or a judge (``eval``, ``suite``): the cache of either.
EitherCache = Annotated[
    Optional[Path],
    typer.Option(
        "--cache",
        help="Score cache (SQLite; default $CHEEMS_CACHE_DIR/scores.sqlite), or with --judge-model the "
        "judgement cache (default $CHEEMS_CACHE_DIR/judge.sqlite).",
    ),
]

# ScoringSettings' fields, as ``settings_options`` lists them (after ``model``), with an RM server's connection.
SCORING_OPTIONS = ("batch_size", "max_length", "cache", "no_cache", "device", "dtype", "no_shared_prefix")
SCORING_MODELS = (ScoringSettings, ConnectionSettings)  # the settings a scoring command composes
SCORING_AND_SERVER = (*SCORING_OPTIONS, *CONNECTION_OPTIONS)


def scored_by(
    settings: dict[str, Any], scores: Path | None, *, ok: bool, needs: str, hint: str, others: tuple[Any, ...] = ()
) -> ScoredBy:
    """:meth:`ScoredBy.from_settings` of the options given, a bad value naming its option; ``needs`` too when the
    command's other requirements are not met (not ``ok``)."""
    from cheems.evaluate.evaluation import ScoredBy

    if not ok:
        raise InputError(needs, hint=hint)
    return ScoredBy.from_settings(settings, settings_of, scores, needs=needs, hint=hint, others=others)


def warn_unmatched(unmatched: list[ScoreKey], source: str, of: str) -> None:
    """One warning for scores that match no response of ``of`` (the bench, the pool): they are not used."""
    from cheems.analysis.bon import unmatched_warning

    report_warnings(unmatched_warning(unmatched, source, of))
