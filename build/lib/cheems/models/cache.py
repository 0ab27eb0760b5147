"""On-disk score cache (SQLite) and ``score_records``, which scores only what the cache lacks.

Key = (scorer fingerprint, sha256 of the JSON of (prompt, response)), value = the score. The
same response under the same prompt gets one score whatever file or prompt id it comes from.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path

from cheems.cachedb import cache_errors, cache_file, open_cache_db, select_in
from cheems.data.io import ScoreKey
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.models.base import ScoreItem, Scorer, item_digest, progress_hook
from cheems.models.sharding import on_main
from cheems.runtime import ProgressBar

_WHAT_HINT = ("score cache", "pass another --cache file, or --no-cache")
PROGRESS_AFTER_S = 2.0  # a progress bar appears only when scoring takes longer than this


def default_cache_path() -> Path:
    """``$CHEEMS_CACHE_DIR/scores.sqlite``, else ``~/.cache/cheems/scores.sqlite``."""
    return cache_file("scores.sqlite")


class ScoreCache:
    """Scores on disk, keyed by scorer fingerprint and item digest. Safe across processes (WAL)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_cache_path()

    def _connect(self) -> sqlite3.Connection:
        return open_cache_db(
            self.path,
            "CREATE TABLE IF NOT EXISTS scores (fingerprint TEXT NOT NULL, item TEXT NOT NULL, "
            "score REAL, PRIMARY KEY (fingerprint, item)) WITHOUT ROWID",
            *_WHAT_HINT,
        )

    def get_many(self, fingerprint: str, digests: Iterable[str]) -> dict[str, float]:
        """Cached scores of these item digests (missing ones are simply absent)."""
        wanted = list(dict.fromkeys(digests))
        if not wanted or not self.path.exists():
            return {}
        found: dict[str, float] = {}
        with closing(self._connect()) as conn, cache_errors(self.path, *_WHAT_HINT):
            # NaN is stored as NULL by SQLite: treat it as a miss.
            found.update(
                select_in(
                    conn,
                    "SELECT item, score FROM scores WHERE fingerprint = ? AND item IN ({marks}) AND score IS NOT NULL",
                    [fingerprint],
                    wanted,
                )
            )
        return found

    def put_many(self, fingerprint: str, scores: Mapping[str, float]) -> None:
        """Store scores of item digests (one transaction; existing entries are replaced)."""
        if not scores:
            return
        with closing(self._connect()) as conn, cache_errors(self.path, *_WHAT_HINT), conn:
            conn.executemany(
                "INSERT OR REPLACE INTO scores (fingerprint, item, score) VALUES (?, ?, ?)",
                [(fingerprint, d, float(s)) for d, s in scores.items()],
            )


def _score(scorer: Scorer, items: Sequence[ScoreItem], progress: bool) -> list[float]:
    """``scorer.score(items)`` with a progress bar once the scoring has run ``PROGRESS_AFTER_S``."""
    with (
        ProgressBar(len(items), f"scoring with {scorer.name}", enabled=progress, after_s=PROGRESS_AFTER_S) as bar,
        progress_hook(bar.advance),
    ):
        return scorer.score(items)


def score_records(
    records: list[Record], scorer: Scorer, *, cache: ScoreCache | None = None, progress: bool = True
) -> dict[ScoreKey, float]:
    """Score every response of every record: ``{(prompt_id, response_id): score}``.

    Cached scores are reused; the misses (each distinct (prompt, response) once) go to the scorer
    in one call, so it can batch by length across records, and are written back to the cache.

    Under a launcher (torchrun, accelerate launch) every process calls this with the same records
    and gets the same result: rank 0 alone reads and writes the cache, a model scorer scores its
    share of the batches, any other scorer runs on rank 0 (:mod:`cheems.models.sharding`).
    """
    keys: list[ScoreKey] = []
    items: list[ScoreItem] = []
    for record in records:
        for response in record.responses:
            keys.append((record.id, response.id))
            items.append((record.prompt, response.content))  # with the sys_prompt as system turn
    digests = [item_digest(item) for item in items]
    fingerprint = scorer.fingerprint() if cache is not None else ""
    unique = list(dict.fromkeys(digests))
    cached = on_main(lambda: _cached(cache, fingerprint, unique))
    known = {d: value for d, value in zip(unique, cached) if value is not None}
    todo: dict[str, ScoreItem] = {}
    for d, item in zip(digests, items):
        if d not in known:
            todo.setdefault(d, item)
    if todo:
        if getattr(scorer, "shards", False):
            scored = _score(scorer, list(todo.values()), progress)
        else:
            scored = on_main(lambda: _score(scorer, list(todo.values()), progress))
        if len(scored) != len(todo):
            raise RuntimeError(f"scorer {scorer.name} returned {len(scored)} scores for {len(todo)} items")
        new = dict(zip(todo, scored))
        for d, value in new.items():  # a NaN written to a scores file or the cache would poison every later read
            if not math.isfinite(value):
                prompt, response = todo[d]
                raise InputError(
                    f"the model gave a non-finite score ({value}) to a response starting {response[:40]!r}",
                    field="score",
                    hint="check the model's weights and dtype (an fp16 overflow gives inf); nothing was written",
                )
        known.update(new)
        if cache is not None:
            on_main(lambda: cache.put_many(fingerprint, new))
    return {key: known[d] for key, d in zip(keys, digests)}


def _cached(cache: ScoreCache | None, fingerprint: str, digests: list[str]) -> list[float | None]:
    """The cached score of each digest, None for a miss (a list, short to send to the other processes)."""
    found = cache.get_many(fingerprint, digests) if cache is not None else {}
    return [found.get(d) for d in digests]
