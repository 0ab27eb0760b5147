"""On-disk score cache (SQLite) and ``score_records``, which scores only what the cache lacks.

Key = (scorer fingerprint, sha256 of the JSON of (prompt, response)), value = the score. The
same response under the same prompt gets one score whatever file or prompt id it comes from.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Final

from cheems.cachedb import cache_errors, cache_file, open_cache_db, select_in
from cheems.data.io import ScoreKey
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.models.base import ScoreItem, Scorer, finished_hook, item_digest, progress_hook
from cheems.models.sharding import on_main
from cheems.runtime import ProgressBar

_WHAT_HINT = ("score cache", "pass another --cache file, or --no-cache")
PROGRESS_AFTER_S = 2.0  # a progress bar appears only when scoring takes longer than this
FLUSH_S = 1.0  # scores handed on before a scorer returns reach the cache at most this late (one commit each)


def default_cache_path() -> Path:
    """``$CHEEMS_CACHE_DIR/scores.sqlite``, else ``~/.cache/cheems/scores.sqlite``."""
    return cache_file("scores.sqlite")


class ScoreCache:
    """Scores on disk, keyed by scorer fingerprint and item digest. Safe across processes (WAL).

    ``ScoreCache()`` is the commands' file (:func:`default_cache_path`, read at each use, as a command reads it
    at its start): what ``cheems score`` and ``cheems eval`` use without ``--cache``, and what the library's
    ``cache`` arguments default to (:data:`DEFAULT_SCORE_CACHE`).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.given = Path(path).expanduser() if path is not None else None

    @property
    def path(self) -> Path:
        """The file: the one given, else the commands' default."""
        return self.given if self.given is not None else default_cache_path()

    def __repr__(self) -> str:  # as help() shows a default argument
        return f"ScoreCache({str(self.given)!r})" if self.given is not None else "ScoreCache()"

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


DEFAULT_SCORE_CACHE: Final = ScoreCache()  # cheems.score/evaluate/bon's default cache: the commands' file


class _Keeper:
    """The new scores of one ``score_records`` call: checked, and written to the cache as they come.

    A scorer that hands scores on before its ``score`` call returns (an RM server, a reply at a time:
    :func:`~cheems.models.base.finished`) has them written at most ``FLUSH_S`` late, and at once when
    the call fails, so a rerun asks only for what is missing. The rest is written when the call returns.
    """

    def __init__(self, cache: ScoreCache | None, fingerprint: str, todo: dict[str, ScoreItem]) -> None:
        self.cache, self.fingerprint, self.todo = cache, fingerprint, todo
        self.digests = list(todo)
        self.known: dict[str, float] = {}
        self.pending: dict[str, float] = {}  # known, not yet in the cache
        self.saved = 0
        self.flushed_at = time.monotonic()

    def add(self, indices: Sequence[int], scores: Sequence[float]) -> None:
        """Scores of the items at ``indices`` of ``todo``; a non-finite one is an error (and never kept)."""
        new = {self.digests[i]: float(s) for i, s in zip(indices, scores)}
        for d, value in new.items():  # a NaN written to a scores file or the cache would poison every later read
            if not math.isfinite(value):
                raise InputError(
                    f"the model gave a non-finite score ({value}) to a response starting {self.todo[d][1][:40]!r}",
                    field="score",
                    hint="check the model's weights and dtype (an fp16 overflow gives inf); such a score is never "
                    "written",
                )
        self.known.update(new)
        self.pending.update(new)
        if time.monotonic() - self.flushed_at >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Write the pending scores to the cache (one transaction)."""
        if self.cache is not None and self.pending:
            self.cache.put_many(self.fingerprint, self.pending)
            self.saved += len(self.pending)
        self.pending = {}
        self.flushed_at = time.monotonic()

    def score(self, scorer: Scorer, progress: bool) -> dict[str, float]:
        """Every item of ``todo`` scored by ``scorer`` (a progress bar once it has run ``PROGRESS_AFTER_S``),
        all of it in the cache; a failure first writes what was scored, and says so."""
        items = list(self.todo.values())
        try:
            with (
                ProgressBar(
                    len(items), f"scoring with {scorer.name}", enabled=progress, after_s=PROGRESS_AFTER_S
                ) as bar,
                progress_hook(bar.advance),
                finished_hook(self.add),
            ):
                scored = scorer.score(items)
        except InputError as e:
            self.flush()
            if not self.saved:
                raise
            assert self.cache is not None  # only a cache saves scores
            from cheems.llm.runs import with_saved_note  # lazy: only this path needs the judge's module

            note = f"{self.saved} score(s) of this run are saved in {self.cache.path}: a rerun asks only for the rest"
            raise with_saved_note(e, note) from None
        except BaseException:  # Ctrl-C, a bug: what was scored is kept all the same
            self.flush()
            raise
        if len(scored) != len(items):
            raise RuntimeError(f"scorer {scorer.name} returned {len(scored)} scores for {len(items)} items")
        rest = [i for i, d in enumerate(self.digests) if d not in self.known]  # not handed on early
        self.add(rest, [scored[i] for i in rest])
        self.flush()
        return self.known


def score_records(
    records: list[Record], scorer: Scorer, *, cache: ScoreCache | None = None, progress: bool = True
) -> dict[ScoreKey, float]:
    """Score every response of every record: ``{(prompt_id, response_id): score}``.

    Cached scores are reused; the misses (each distinct (prompt, response) once) go to the scorer
    in one call, so it can batch by length across records, and are written back to the cache: as
    they come from a scorer that hands them on early (an RM server), so a run that stops half-way
    keeps them and a rerun asks only for the rest.

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
        if getattr(scorer, "shards", False):  # every process scores its share; rank 0 alone writes the cache
            new = _Keeper(None, fingerprint, todo).score(scorer, progress)
            if cache is not None:
                on_main(lambda: cache.put_many(fingerprint, new))
        else:
            new = on_main(lambda: _Keeper(cache, fingerprint, todo).score(scorer, progress))
        known.update(new)
    return {key: known[d] for key, d in zip(keys, digests)}


def _cached(cache: ScoreCache | None, fingerprint: str, digests: list[str]) -> list[float | None]:
    """The cached score of each digest, None for a miss (a list, short to send to the other processes)."""
    found = cache.get_many(fingerprint, digests) if cache is not None else {}
    return [found.get(d) for d in digests]
