"""Where cheems keeps its on-disk caches, and the SQLite plumbing the score and judge caches share.

Both caches are SQLite files in WAL mode (readers never block the one writer, several processes
may share a file) and look keys up with ``IN (...)`` queries in chunks.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cheems.errors import InputError

CHUNK = 900  # bound on SQL variables per query (old SQLite builds allow 999)


def cache_file(name: str) -> Path:
    """``$CHEEMS_CACHE_DIR/NAME``, else ``~/.cache/cheems/NAME``."""
    root = os.environ.get("CHEEMS_CACHE_DIR")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "cheems") / name


def open_cache_db(path: Path, schema: str, what: str, hint: str, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """Open (and create) a cache database with ``schema``; a one-line InputError naming ``what`` when impossible."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30, check_same_thread=check_same_thread)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(schema)
        conn.commit()
        return conn
    except (OSError, sqlite3.Error) as e:
        raise InputError(f"cannot open the {what}: {e}", path=str(path), hint=hint) from None


def select_in(conn: sqlite3.Connection, sql: str, params: Sequence[Any], keys: Sequence[str]) -> Iterator[tuple]:
    """Rows of ``sql`` for every key, ``{marks}`` in ``sql`` standing for one chunk's ``?`` list after ``params``."""
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start:start + CHUNK]
        yield from conn.execute(sql.format(marks=",".join("?" * len(chunk))), [*params, *chunk])
