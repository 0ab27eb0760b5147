"""On-disk judgement cache (SQLite, WAL): every judgement is stored the moment it completes.

Key = (judge key, item), both :func:`cheems.runtime.content_hash`: the judge key hashes the
judge's identity (backend, endpoint, model, generation settings) and ``TEMPLATE_VERSION``; the
item hashes the exact messages sent, which hold the prompt, reference, criteria and the two
responses in their shown order.
A process killed mid-run loses only the requests in flight: a restart finds every finished
judgement here and asks only the rest.

Only final outcomes are stored: a verdict, or a verdict failure after all re-asks (the judge
answered, but not with A/B/C). Transport failures (timeouts, 5xx, resets) are not, so a rerun
tries those pairs again.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from cheems.cachedb import cache_errors, cache_file, open_cache_db, select_in

WHAT, HINT = "judge cache", "pass another --cache file"


@dataclass(frozen=True)
class CachedJudgement:
    """One stored outcome: ``label`` (A/B/C) or ``failure`` (a verdict failure reason)."""

    label: str | None
    failure: str | None
    raw: str | None
    prompt_tokens: int
    completion_tokens: int
    requests: int


_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgements (
    judge TEXT NOT NULL,          -- content_hash(identity incl. template version, keyed)
    item TEXT NOT NULL,           -- content_hash(messages)
    judge_model TEXT,             -- for people reading the file
    prompt_id TEXT, a TEXT, b TEXT, shown TEXT,  -- the first pair that asked this (informational)
    label TEXT,                   -- A / B / C, or NULL when failed
    failure TEXT,                 -- verdict failure reason, or NULL
    raw TEXT,                     -- the judge's last reply
    prompt_tokens INTEGER, completion_tokens INTEGER, requests INTEGER,
    created REAL,
    PRIMARY KEY (judge, item)
) WITHOUT ROWID
"""


class JudgeCache:
    """Judgements on disk. One connection per instance; safe across processes (WAL)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else cache_file("judge.sqlite")
        self._conn: sqlite3.Connection | None = None

    def connect(self) -> sqlite3.Connection:
        """Open (and create) the database; a one-line InputError when that is impossible."""
        if self._conn is None:
            # check_same_thread off: the API judge may run its event loop in a worker thread (when
            # called from a running loop); calls never overlap, the caller waits for that thread.
            conn = open_cache_db(self.path, _SCHEMA, WHAT, HINT, check_same_thread=False)
            # A commit reaches the OS before returning: a killed process loses nothing committed
            # (only a power cut could lose the last transactions, and they would just be re-asked).
            conn.execute("PRAGMA synchronous=NORMAL")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Close the connection (everything is already committed)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "JudgeCache":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, judge: str, items: Iterable[str]) -> dict[str, CachedJudgement]:
        """Stored outcomes of these items under this judge (missing ones are absent)."""
        wanted = list(dict.fromkeys(items))
        conn = self.connect()
        with cache_errors(self.path, WHAT, HINT):
            rows = select_in(
                conn,
                "SELECT item, label, failure, raw, prompt_tokens, completion_tokens, requests "
                "FROM judgements WHERE judge = ? AND item IN ({marks})",
                [judge],
                wanted,
            )
            return {
                item: CachedJudgement(label, failure, raw, pt or 0, ct or 0, n or 0)
                for item, label, failure, raw, pt, ct, n in rows
            }

    def put(
        self,
        judge: str,
        item: str,
        outcome: CachedJudgement,
        *,
        judge_model: str = "",
        pair: tuple[str, str, str, str] | None = None,
    ) -> None:
        """Store one outcome and commit at once (so a kill right after loses nothing)."""
        conn = self.connect()
        prompt_id, a, b, shown = pair or (None, None, None, None)
        with cache_errors(self.path, WHAT, HINT), conn:
            conn.execute(
                "INSERT OR REPLACE INTO judgements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    judge,
                    item,
                    judge_model,
                    prompt_id,
                    a,
                    b,
                    shown,
                    outcome.label,
                    outcome.failure,
                    outcome.raw,
                    outcome.prompt_tokens,
                    outcome.completion_tokens,
                    outcome.requests,
                    time.time(),
                ),
            )

    def count(self, judge: str | None = None) -> int:
        """How many judgements are stored (for one judge, or all)."""
        conn = self.connect()
        if judge is None:
            return cast("int", conn.execute("SELECT COUNT(*) FROM judgements").fetchone()[0])
        return cast("int", conn.execute("SELECT COUNT(*) FROM judgements WHERE judge = ?", (judge,)).fetchone()[0])
