"""The settings of every command that scores with a reward model (``score``, ``eval``, ``bon``): one field each,
whose description is the option's help; an RM server's connection settings are
:class:`cheems.llm.endpoint.ConnectionSettings`, given beside them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from cheems.errors import InputError
from cheems.models.registry import scorers_help
from cheems.settings import Cli, Settings

if TYPE_CHECKING:
    from cheems.llm.endpoint import ConnectionSettings
    from cheems.models.base import Scorer
    from cheems.models.score_cache import ScoreCache


class ScoringSettings(Settings):
    """Which reward model scores, and how: ``cheems.load_scorer``'s arguments and the score cache.

    ``batch_size`` and ``dtype`` are checked by :func:`cheems.models.load_scorer` (its messages name the option).
    """

    model: Annotated[str | None, Cli("--model", "-m")] = Field(None, description=scorers_help())
    batch_size: int = Field(16, description="Responses per forward pass.")
    max_length: int | None = Field(
        None,
        description="Max tokens per (prompt, response); the prompt is truncated first. Default: the length a model "
        "trained by cheems was trained at (recorded in its folder), else 512.",
    )
    cache: Annotated[str | Path | None, Cli(path=True)] = Field(
        None, description="Score cache (SQLite); default $CHEEMS_CACHE_DIR/scores.sqlite."
    )
    no_cache: Annotated[bool, Cli(flag=True)] = Field(False, description="Neither read nor write the score cache.")
    device: str | None = Field(None, description="cpu, cuda, cuda:1, ... (default: cuda if available).")
    dtype: str = Field(
        "auto",
        description="Precision of a Hugging Face model's forward pass: auto (bf16 where the GPU or CPU has bf16 "
        "units, else fp32), fp32, bf16 or fp16.",
    )
    no_shared_prefix: Annotated[bool, Cli(flag=True)] = Field(
        False,
        description="Run each (prompt, response) whole: by default a causal RM runs the prompt once per prompt (its "
        "KV cache) and scores every response from it (same scores, less compute).",
    )

    def scorer(self, connection: ConnectionSettings | None = None) -> Scorer:
        """``load_scorer`` of ``model`` with these settings; an error of the spec names ``--model`` as its place
        (one with a place of its own, a model folder or ``--batch-size``, keeps it)."""
        from cheems.models import load_scorer

        try:
            return load_scorer(
                self.model or "",
                batch_size=self.batch_size,
                max_length=self.max_length,
                device=self.device,
                dtype=self.dtype,
                shared_prefix=not self.no_shared_prefix,
                connection=connection,
            )
        except InputError as e:
            raise e.located("--model") from None

    def score_cache(self) -> ScoreCache | None:
        """The score cache: None with ``no_cache``, else ``cache`` (default $CHEEMS_CACHE_DIR/scores.sqlite)."""
        from cheems.models import ScoreCache

        return None if self.no_cache else ScoreCache(self.cache)

    def inputs(self, bench: list[Path], cached: bool = True) -> list[tuple[str, str | Path]]:
        """The files a scoring run reads: the model when it is a local folder or file, the benches, the score cache
        unless ``no_cache`` or not ``cached`` (an output must replace none of them)."""
        from cheems.models.score_cache import default_cache_path

        model = self.model
        local: list[tuple[str, str | Path]] = [("--model", model)] if model and os.path.exists(model) else []
        cache = [("--cache", self.cache or default_cache_path())] if cached and not self.no_cache else []
        return local + [("--bench", b) for b in bench] + cache
