"""Where cheems keeps its on-disk caches, and the SQLite plumbing the score and judge caches share.

Both caches are SQLite files in WAL mode (readers never block the one writer, several processes
may share a file) and look keys up with ``IN (...)`` queries in chunks. A file that is not such a
cache (another program's database, a corrupt file, the other cache) is refused before anything is
written to it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from cheems.errors import InputError
from cheems.outputs import out_of_room

CHUNK = 900  # bound on SQL variables per query (old SQLite builds allow 999)


def cache_file(name: str) -> Path:
    """``$CHEEMS_CACHE_DIR/NAME``, else ``~/.cache/cheems/NAME``."""
    root = os.environ.get("CHEEMS_CACHE_DIR")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "cheems") / name


def _tables(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Table name -> column names (``sqlite3.DatabaseError`` when the file is not a database)."""
    names = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {name: [col[1] for col in conn.execute(f'PRAGMA table_info("{name}")')] for name in names}


def _check_schema(conn: sqlite3.Connection, schema: str, what: str) -> None:
    """Raise ``ValueError`` saying why the database is not this cache (an empty one is fine: it becomes one)."""
    with closing(sqlite3.connect(":memory:")) as mem:
        mem.execute(schema)
        expected = _tables(mem)
    found = _tables(conn)
    for table, columns in expected.items():
        if table in found and found[table] != columns:
            raise ValueError(f"not a {what}: its table '{table}' has the columns {', '.join(found[table])}")
    if found and not expected.keys() & found.keys():
        raise ValueError(f"not a {what}: it holds other tables ({', '.join(sorted(found)[:5])})")


def open_cache_db(
    path: Path, schema: str, what: str, hint: str, *, check_same_thread: bool = True
) -> sqlite3.Connection:
    """Open (and create) a cache database with ``schema``; a one-line InputError naming ``what`` when impossible."""
    if path.is_dir():
        raise InputError(f"is a folder, not a {what} file", path=str(path), hint=hint)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30, check_same_thread=check_same_thread)
    except (OSError, sqlite3.Error) as e:
        raise InputError(f"cannot open the {what}: {e}", path=str(path), hint=hint) from None
    try:
        _check_schema(conn, schema, what)  # before WAL mode, which would write to a foreign file
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(schema)
        conn.commit()
        return conn
    except ValueError as e:
        conn.close()
        raise InputError(str(e), path=str(path), hint=hint) from None
    except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed"
        conn.close()
        raise _write_failure(e, path, what, hint) or InputError(
            f"not a {what}: {e}", path=str(path), hint=hint
        ) from None
    except sqlite3.Error as e:
        conn.close()
        raise InputError(f"cannot open the {what}: {e}", path=str(path), hint=hint) from None


@contextmanager
def cache_errors(path: Path, what: str, hint: str) -> Iterator[None]:
    """Turn an SQLite failure while reading or writing a cache (a corrupt page, a full disk) into one line."""
    try:
        yield
    except sqlite3.Error as e:
        raise _write_failure(e, path, what, hint) or InputError(
            f"cannot use the {what}: {e}", path=str(path), hint=hint
        ) from None


SQLITE_IOERR = 10  # "disk I/O error": SQLite's word for a write the system refused (it keeps no errno)


def _write_failure(e: sqlite3.Error, path: Path, what: str, hint: str) -> InputError | None:
    """A cache write that failed for want of room (:func:`cheems.outputs.out_of_room`) or that the system refused
    (``disk I/O error``, e.g. past ``ulimit -f``): the cache is fine, the disk is not. None for anything else."""
    if line := out_of_room(e, path, f"cannot write the {what}", hint):
        return line
    if (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF == SQLITE_IOERR:
        reason = "disk I/O error (a full disk, the file-size limit (ulimit -f) or a quota)"
        return InputError(f"cannot write the {what}: {reason}", path=str(path), hint=hint)
    return None


def select_in(
    conn: sqlite3.Connection, sql: str, params: Sequence[Any], keys: Sequence[str]
) -> Iterator[tuple[Any, ...]]:
    """Rows of ``sql`` for every key, ``{marks}`` in ``sql`` standing for one chunk's ``?`` list after ``params``."""
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start : start + CHUNK]
        yield from conn.execute(sql.format(marks=",".join("?" * len(chunk))), [*params, *chunk])
