"""The options every scoring command shares (--model, --batch-size, --max-length, --cache, --no-cache,
--device, --no-shared-prefix; for an RM server :data:`cheems.cli.options.CONNECTION_OPTIONS`) and the
helpers that act on them: ``load_model``, ``score_cache``, ``stream_scores``, ``connection_settings`` and
``scoring_inputs``.

Used by ``score`` and ``eval`` (:mod:`cheems.cli.main`) and ``bon`` (:mod:`cheems.cli.bon`), which warn alike
about scores of no response they know (``warn_unmatched``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from cheems.cli.console import report_warnings
from cheems.cli.options import CONNECTION_OPTIONS, from_options
from cheems.data.io import ReadResult, ScoreKey
from cheems.errors import InputError
from cheems.models.registry import scorers_help

if TYPE_CHECKING:
    from cheems.annotate.settings import ConnectionSettings
    from cheems.models.base import Scorer
    from cheems.models.cache import ScoreCache

ModelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--model",
        "-m",
        help=scorers_help(),
    ),
]
# The options above, as ``settings_options`` lists them, with the connection settings for an RM server.
SCORING_OPTIONS = ("batch_size", "max_length", "cache", "no_cache", "device", "no_shared_prefix", *CONNECTION_OPTIONS)
BatchOpt = Annotated[int, typer.Option(help="Responses per forward pass.")]
MaxLenOpt = Annotated[int, typer.Option(help="Max tokens per (prompt, response); the prompt is truncated first.")]
CacheOpt = Annotated[
    Optional[Path], typer.Option("--cache", help="Score cache (SQLite); default $CHEEMS_CACHE_DIR/scores.sqlite.")
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the score cache.")]
DeviceOpt = Annotated[Optional[str], typer.Option(help="cpu, cuda, cuda:1, ... (default: cuda if available).")]
DtypeOpt = Annotated[
    str,
    typer.Option(
        help="Precision of a Hugging Face model's forward pass: auto (bf16 where the GPU or CPU has bf16 units, "
        "else fp32), fp32, bf16 or fp16.",
    ),
]
NoSharedPrefixOpt = Annotated[
    bool,
    typer.Option(
        "--no-shared-prefix",
        help="Run each (prompt, response) whole: by default a causal RM runs the prompt once per prompt (its KV "
        "cache) and scores every response from it (same scores, less compute).",
    ),
]


def connection_settings(given: Mapping[str, Any]) -> ConnectionSettings:
    """The connection settings among the options ``given`` (a bad value: one line naming its option)."""
    from cheems.annotate.settings import ConnectionSettings

    return from_options(ConnectionSettings, {k: v for k, v in given.items() if k in ConnectionSettings.model_fields})


def score_cache(cache: Path | None, no_cache: bool) -> ScoreCache | None:
    """The score cache ``--cache`` / ``--no-cache`` name: None with ``--no-cache``, else the file (default
    $CHEEMS_CACHE_DIR/scores.sqlite)."""
    from cheems.models import ScoreCache

    return None if no_cache else ScoreCache(cache)


def load_model(
    model: str,
    batch_size: int,
    max_length: int,
    device: str | None,
    shared_prefix: bool,
    connection: ConnectionSettings | None,
    dtype: str,
) -> Scorer:
    """``load_scorer`` from the scoring options; an error of the spec names ``--model`` as its place (one with
    a place of its own, a model folder or ``--batch-size``, keeps it)."""
    from cheems.models import load_scorer

    try:
        return load_scorer(
            model,
            batch_size=batch_size,
            max_length=max_length,
            device=device,
            dtype=dtype,
            shared_prefix=shared_prefix,
            connection=connection,
        )
    except InputError as e:
        raise e.located("--model") from None


def stream_scores(
    model: str,
    bench: list[Path],
    batch_size: int,
    max_length: int,
    cache: Path | None,
    no_cache: bool,
    device: str | None,
    workers: int | None,
    issues: ReadResult,
    shared_prefix: bool = True,
    connection: ConnectionSettings | None = None,
    dtype: str = "auto",
) -> Iterator[tuple[ScoreKey, float]]:
    """:func:`cheems.score` a chunk of the bench files at a time, in their order, with a progress bar: memory
    stays bounded by a chunk, whatever the size of the files. Warnings of the files go to ``issues``. Under a
    launcher every process reads the files and takes its share of each chunk's batches."""
    from cheems.data.stream import same_record
    from cheems.evaluate.bench import score_stream, stream_bench

    scorer = load_model(model, batch_size, max_length, device, shared_prefix, connection, dtype)
    files = stream_bench(bench, same_record, issues, workers=workers, progress="scoring")
    records = (r for _, file_records in files for r in file_records)
    return score_stream(records, scorer, score_cache(cache, no_cache))


def scoring_inputs(
    model: str | None, bench: list[Path], cache: Path | None, no_cache: bool
) -> list[tuple[str, str | Path]]:
    """The files ``score``, ``eval`` and ``bon`` read: the model when it is a local folder or file, the benches,
    the score cache (an output must replace none of them)."""
    from cheems.models.cache import default_cache_path

    local: list[tuple[str, str | Path]] = [("--model", model)] if model and os.path.exists(model) else []
    return local + [("--bench", b) for b in bench] + ([] if no_cache else [("--cache", cache or default_cache_path())])


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
