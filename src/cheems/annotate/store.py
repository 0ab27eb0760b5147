"""A project: one SQLite file (WAL, ``synchronous=FULL``) that holds the plan, the queues and every answer.

Every SQL statement of the app is here, parameterised. A write runs in one ``BEGIN IMMEDIATE``
transaction and returns only after its commit, so an acknowledged submission survives the server
being killed (SIGKILL) right after. Answers are append-only: a returned task answered again adds a
row, the earlier one stays in the file.

Queues: each person's entries (*items*) are annotate, review or adjudicate items. Submitting an
annotate item may open a review item for a reviewer (a seeded draw at ``review_rate``; a task
answered again after a rejection is always reviewed again) and, when every overlapping copy of a
task is in and two of them agree on fewer pairs than ``agreement_target``, an adjudication item.
Gold prompts (known ranks) are planted at init as ordinary-looking annotate items for every
annotator and, for reviewers, as review items whose shown answer is the gold ranking or a corrupted
one (the reviewer should approve the first and reject the second).
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar, cast, get_args

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic's own dependency; it validates only this TypedDict on 3.11

from cheems.annotate.answer import (
    KEYS,
    Answer,
    AnswerError,
    Verdict,
    agreement,
    by_id,
    by_key,
    check_answer,
    rank_levels,
)
from cheems.annotate.people import People, Person, ProjectSettings, Role
from cheems.annotate.plan import PlannedTask, plan_tasks, prompt_tasks, seeded, shown_order
from cheems.annotate.snapshot import AnswerRow, ItemRow, ReviewRow, Snapshot, StoredAnswer, TaskRow
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.runtime import content_hash

DB_NAME = "project.sqlite3"
TOKENS_NAME = "tokens.txt"
LOCK_NAME = "serve.lock"  # held by a running server (:mod:`.web`)
PROJECT_FILES = (DB_NAME, TOKENS_NAME, LOCK_NAME)
"""Every file of a project (the database brings its SQLite side files): inputs no output may replace."""
BUILD_PREFIX = ".init-"  # the hidden folder init builds the files in
FORMAT = "cheems-annotate/1"
SESSION_DAYS = 7
RECORD_CACHE = 4096  # parsed prompts kept in memory by a server

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE people (name TEXT PRIMARY KEY, position INTEGER NOT NULL, role TEXT NOT NULL,
                     categories TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE);
CREATE TABLE prompts (id TEXT PRIMARY KEY, position INTEGER NOT NULL, gold INTEGER NOT NULL, record TEXT NOT NULL);
CREATE TABLE tasks (id TEXT PRIMARY KEY, prompt_id TEXT NOT NULL REFERENCES prompts(id),
                    responses TEXT NOT NULL, gold INTEGER NOT NULL);
CREATE TABLE items (id TEXT PRIMARY KEY, kind TEXT NOT NULL, task_id TEXT NOT NULL REFERENCES tasks(id),
                    person TEXT NOT NULL REFERENCES people(name), state TEXT NOT NULL, gold INTEGER NOT NULL,
                    shown TEXT NOT NULL, position REAL NOT NULL, reviews TEXT REFERENCES items(id),
                    returned_reason TEXT, planted TEXT, created_at TEXT NOT NULL);
CREATE INDEX items_queue ON items (person, state);
CREATE INDEX items_task ON items (task_id);
CREATE TABLE answers (id INTEGER PRIMARY KEY, item_id TEXT NOT NULL REFERENCES items(id), body TEXT NOT NULL,
                      submitted_at TEXT NOT NULL);
CREATE INDEX answers_item ON answers (item_id);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, item_id TEXT NOT NULL REFERENCES items(id), approve INTEGER NOT NULL,
                      reason TEXT NOT NULL, correct INTEGER, at TEXT NOT NULL);
CREATE TABLE sessions (token_hash TEXT PRIMARY KEY, person TEXT NOT NULL REFERENCES people(name),
                       csrf TEXT NOT NULL, created_at TEXT NOT NULL);
"""

# Queue order: consensus work first, then tasks returned by a reviewer, then reviews, then new tasks.
QUEUE_ORDER = (
    "CASE WHEN kind = 'adjudicate' THEN 0 WHEN returned_reason IS NOT NULL THEN 1"
    " WHEN kind = 'review' THEN 2 ELSE 3 END, position, id"
)


class NotYours(Exception):
    """The item belongs to someone else (HTTP 403)."""


class NotFound(Exception):
    """No such item (HTTP 404)."""


class Conflict(Exception):
    """The item is not waiting for this action (already submitted, or of another kind) (HTTP 409)."""


@dataclass
class Item:
    """One queue entry as a person sees it: the prompt, the responses under keys A, B, C, and what to do."""

    item_id: str
    kind: str
    task_id: str
    prompt_id: str
    prompt: str | list[dict[str, str]]
    sys_prompt: str | None
    """The record's system prompt: the model answered under it, so the person judges with it in view."""
    reference: str | None
    category: list[str]
    responses: list[dict[str, str]]
    """``[{"key": "A", "content": ...}, ...]`` in the order shown to this person."""
    shown: list[str]
    returned_reason: str | None = None
    answer: dict[str, Any] | None = None
    """For a review: the answer under review, in this item's keys."""
    answers: list[dict[str, Any]] = field(default_factory=list)
    """For an adjudication: every annotator's answer (with ``annotator``), in this item's keys."""

    def api(self) -> dict[str, Any]:
        """The ``GET /api/next`` body: ``item_id`` names this person's copy of the task (the id of the
        ``/api/tasks/{item_id}/...`` routes, and ``item_id`` in the export); response ids and the plan's
        task id stay inside."""
        body: dict[str, Any] = {
            "item_id": self.item_id,
            "kind": self.kind,
            "prompt": self.prompt,
            "sys_prompt": self.sys_prompt,
            "reference": self.reference,
            "category": self.category,
            "responses": self.responses,
        }
        if self.returned_reason is not None:
            body["returned_reason"] = self.returned_reason
        if self.answer is not None:
            body["answer"] = self.answer
        if self.kind == "adjudicate":
            body["answers"] = self.answers
        return body


@dataclass(frozen=True)
class PlanSummary:
    """What ``init`` planned, for the CLI to print."""

    prompts: int
    tasks: int
    items: int
    gold_items: int
    skipped: list[str]
    shared: list[str]
    wanted: int
    """Annotators that one task of a prompt each would take (:attr:`cheems.annotate.plan.Plan.wanted`)."""


@dataclass(frozen=True)
class DayProgress:
    """One person's day: answers and reviews given since local midnight, and what is left in the queue."""

    done_today: int
    left: int


@dataclass(frozen=True)
class Discussion:
    """An adjudication an annotator is part of: the task, every answer, and the consensus once recorded."""

    item: Item
    consensus: dict[str, Any] | None


class Planted(TypedDict):
    """A planted gold review as the ``items`` table holds it."""

    answer: StoredAnswer
    correct: bool


class _Damaged(InputError):
    """A stored value that does not read back as what the app wrote: the file was edited or broken."""

    def __init__(self, damage: str) -> None:
        super().__init__(f"{DB_NAME} is damaged: {damage}", hint=DAMAGED_HINT)


T = TypeVar("T")
DAMAGED_HINT = f"restore {DB_NAME} from a backup (or make a new project with `cheems annotate init`)"
_IDS = TypeAdapter(list[str])
_ANSWER = TypeAdapter(StoredAnswer)
_PLANTED = TypeAdapter(Planted)
_RECORD = TypeAdapter(Record)
_SETTINGS = TypeAdapter(ProjectSettings)


def _stored(what: str, adapter: TypeAdapter[T], text: Any) -> T:
    """A JSON column read back as ``adapter``'s type; _Damaged naming ``what`` when it is not."""
    try:
        return adapter.validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise _Damaged(f"{what} is not valid: {where + ': ' if where else ''}{first['msg']}") from None


@contextmanager
def _loading(folder: Path) -> Iterator[None]:
    """Reading a project: a damaged file or value is one InputError naming the project and the damage."""
    try:
        yield
    except sqlite3.ProgrammingError:  # our own misuse (a closed connection), not the file's fault
        raise
    except sqlite3.DatabaseError as e:
        raise InputError(f"cannot read {DB_NAME}: {e}", path=str(folder), hint=DAMAGED_HINT) from None
    except _Damaged as e:
        raise e.located(str(folder)) from None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _time(text: str, what: str = "a time") -> datetime:
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise _Damaged(f"{what} {str(text)[:40]!r} is not a time") from None


def _hash(secret: str) -> str:
    return content_hash(secret)


class Project:
    """An annotation project folder: ``project.sqlite3`` and, after init, ``tokens.txt``."""

    def __init__(self, folder: Path, settings: ProjectSettings) -> None:
        self.folder = folder
        self.path = folder / DB_NAME
        self.settings = settings
        self._local = threading.local()
        # Writers of this process take turns here rather than in SQLite, whose busy handler sleeps
        # (1, 2, 5, ... 100 ms) between retries: under 50 concurrent submitters that sleep was most
        # of the latency (benchmarks/annotate_load.py).
        self._writer = threading.Lock()
        self._team: dict[str, Person] | None = None
        self._records: dict[str, Record] = {}

    # -- opening --------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        folder: str | Path,
        records: Sequence[Record],
        people: People,
        gold: Sequence[Record] = (),
        settings: ProjectSettings | None = None,
    ) -> tuple["Project", dict[str, str], PlanSummary]:
        """Plan the work and write a new project folder; returns it, each person's token, and the plan's size.

        The folder must not exist or be empty: init never overwrites a project. The files are built
        in a hidden folder inside it and moved out when complete, the database last: a folder holds a
        project once ``project.sqlite3`` is there, so a full disk, an error or a kill never leaves a
        folder that looks like one. A full disk is one InputError.
        """
        folder = Path(folder)
        settings = settings or ProjectSettings()
        _check_new_folder(folder)
        _check_prompts(records, gold)
        # The project collects its own labels: comparisons and ranks the input came with stay in that file.
        records = [_fresh(r) for r in records]
        plan = plan_tasks(records, people.with_role("annotator"), settings.overlap, settings.seed)
        tokens = {p.name: secrets.token_urlsafe(24) for p in people.people}
        existed = folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        # Inside the folder: on its file system, so the moves below are renames, even for a mount point.
        building = folder / f"{BUILD_PREFIX}{secrets.token_hex(4)}"
        building.mkdir()
        project = cls(building, settings)
        moved: list[str] = []
        try:
            with project._write(new=True) as db:
                db.executescript(SCHEMA)  # executescript commits first: the schema is its own transaction
                db.execute("BEGIN IMMEDIATE")
                project._insert_plan(db, records, people, gold, plan, tokens)
                gold_items = db.execute("SELECT COUNT(*) FROM items WHERE gold = 1").fetchone()[0]
                items = db.execute("SELECT COUNT(*) FROM items").fetchone()[0]
            _write_tokens(building / TOKENS_NAME, tokens)
            project.close()  # the last connection: SQLite folds the -wal file into the database (if space allows)
            (building / (DB_NAME + "-shm")).unlink(missing_ok=True)  # an index SQLite rebuilds
            for name in (TOKENS_NAME, DB_NAME + "-wal", DB_NAME):
                if (building / name).exists():
                    (building / name).rename(folder / name)
                    moved.append(name)
            building.rmdir()
        except BaseException as e:
            project.close()
            shutil.rmtree(building, ignore_errors=True)
            for name in moved:
                (folder / name).unlink(missing_ok=True)
            if not existed:
                shutil.rmtree(folder, ignore_errors=True)
            if isinstance(e, (OSError, sqlite3.OperationalError)):
                why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                raise InputError(
                    f"cannot write the project: {why}", path=str(folder), hint="free some space, or name another folder"
                ) from None
            raise
        summary = PlanSummary(
            len(records) - len(plan.skipped), len(plan.tasks), items, gold_items, plan.skipped, plan.shared, plan.wanted
        )
        return cls(folder, settings), tokens, summary

    @classmethod
    def open(cls, folder: str | Path) -> "Project":
        """Open an existing project; a one-line InputError when the folder is not one, or its file is damaged.

        The pages, tables and settings are checked here; a damaged value is found by the read that meets it.
        """
        folder = Path(folder)
        hint = "give the folder made by `cheems annotate init`"
        if not (folder / DB_NAME).is_file():
            raise InputError(f"not an annotation project (no {DB_NAME} in it)", path=str(folder), hint=hint)
        with _loading(folder):
            conn = sqlite3.connect(f"file:{folder / DB_NAME}?mode=ro", uri=True, timeout=30)
            try:
                # quick_check reads every page (not the rows' values): a torn or cut file is refused now,
                # not when a request of the server or the export's read meets the page.
                check = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
                if check != "ok":
                    raise _Damaged(f"SQLite's check finds: {check}")
                missing = _missing_tables(conn)
                rows = {} if "meta" in missing else dict(conn.execute("SELECT key, value FROM meta").fetchall())
            finally:
                conn.close()
            if len(missing) == len(_schema_columns()) or rows.get("format", FORMAT) != FORMAT:
                raise InputError(f"{DB_NAME} is not a {FORMAT} project file", path=str(folder), hint=hint)
            damage = list(missing.values()) or [
                f"the {key} row of table 'meta' is missing" for key in ("format", "settings") if key not in rows
            ]
            if damage:
                raise _Damaged("; ".join(damage))
            settings = _stored("the settings row of table 'meta'", _SETTINGS, rows["settings"])
        return cls(folder, settings)

    def close(self) -> None:
        """Close this thread's connection (the others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # One connection per thread: the server answers requests on a thread pool.
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")  # a commit is on disk before the 200 goes out
            conn.execute("PRAGMA foreign_keys = ON")
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    @contextmanager
    def _write(self, new: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction; committed when the block ends, rolled back on any error."""
        db = self._conn()
        with self._writer:
            if not new:
                db.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlock between two writers
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            if db.in_transaction:
                db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same moment; damage is one InputError."""
        with _loading(self.folder):
            db = self._conn()
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("COMMIT")

    # -- init -----------------------------------------------------------------------------------

    def _insert_plan(
        self,
        db: sqlite3.Connection,
        records: Sequence[Record],
        people: People,
        gold: Sequence[Record],
        plan,
        tokens: dict[str, str],
    ) -> None:
        s = self.settings
        db.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [("format", FORMAT), ("settings", s.model_dump_json()), ("created_at", _now())],
        )
        db.executemany(
            "INSERT INTO people (name, position, role, categories, token_hash) VALUES (?, ?, ?, ?, ?)",
            [
                (p.name, i, p.role, json.dumps(p.categories, ensure_ascii=False), _hash(tokens[p.name]))
                for i, p in enumerate(people.people)
            ],
        )
        prompts = [(r.id, i, 0, json.dumps(r.to_json(), ensure_ascii=False)) for i, r in enumerate(records)]
        prompts += [(r.id, i, 1, json.dumps(r.to_json(), ensure_ascii=False)) for i, r in enumerate(gold)]
        db.executemany("INSERT INTO prompts (id, position, gold, record) VALUES (?, ?, ?, ?)", prompts)
        self._insert_tasks(db, plan.tasks)
        queue_length: dict[str, int] = {}
        for position, task in enumerate(plan.tasks):
            for name in plan.annotators[task.task_id]:
                self._add_item(db, "annotate", task, name, position=position)
                queue_length[name] = queue_length.get(name, 0) + 1
        self._plant_gold(db, gold, people, queue_length)

    def _insert_tasks(self, db: sqlite3.Connection, tasks: Sequence[PlannedTask]) -> None:
        db.executemany(
            "INSERT INTO tasks (id, prompt_id, responses, gold) VALUES (?, ?, ?, ?)",
            [(t.task_id, t.prompt_id, json.dumps(list(t.responses)), int(t.gold)) for t in tasks],
        )

    def _plant_gold(
        self, db: sqlite3.Connection, gold: Sequence[Record], people: People, queue_length: dict[str, int]
    ) -> None:
        """Gold tasks at seeded places in every annotator's queue; gold reviews in every reviewer's."""
        seed = self.settings.seed
        for record in gold:
            tasks = prompt_tasks(record, seed, gold=True)
            if not tasks:
                continue
            self._insert_tasks(db, tasks)
            for i, person in enumerate(people.with_role("annotator")):
                task = tasks[(i + seeded(seed, "gold", record.id).randrange(len(tasks))) % len(tasks)]
                where = seeded(seed, "gold-place", task.task_id, person.name).random()
                self._add_item(db, "annotate", task, person.name, position=where * queue_length.get(person.name, 0))
            if self.settings.review_rate > 0:
                for person in people.with_role("reviewer"):
                    rng = seeded(seed, "gold-review", record.id, person.name)
                    task = tasks[rng.randrange(len(tasks))]
                    correct = rng.random() < 0.5
                    planted = {"answer": _planted_answer(record, task, correct), "correct": correct}
                    position = rng.random() * queue_length.get(person.name, 0)
                    self._add_item(db, "review", task, person.name, position=position, planted=planted)

    def _add_item(
        self,
        db: sqlite3.Connection,
        kind: str,
        task: PlannedTask | TaskRow,
        person: str,
        *,
        position: float | None = None,
        shown: Sequence[str] | None = None,
        reviews: str | None = None,
        planted: dict[str, Any] | None = None,
    ) -> str:
        """Insert one queue item (ids are opaque: a hash, never a hint of gold or of who else has the task)."""
        n = db.execute("SELECT COUNT(*) FROM items WHERE task_id = ? AND kind = ?", (task.task_id, kind)).fetchone()[0]
        item_id = content_hash([self.settings.seed, kind, task.task_id, person, reviews, n])[:16]
        if position is None:  # made while the project runs: after everything already in that queue
            position = db.execute(
                "SELECT COALESCE(MAX(position), 0) + 1 FROM items WHERE person = ?", (person,)
            ).fetchone()[0]
        order = list(shown) if shown is not None else shown_order(self.settings.seed, item_id, task.responses)
        db.execute(
            "INSERT INTO items (id, kind, task_id, person, state, gold, shown, position, reviews, planted, created_at)"
            " VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, ?)",
            (
                item_id,
                kind,
                task.task_id,
                person,
                int(task.gold),
                json.dumps(order),
                position,
                reviews,
                json.dumps(planted, ensure_ascii=False) if planted else None,
                _now(),
            ),
        )
        return item_id

    # -- people and sessions ------------------------------------------------------------------

    def person_by_token(self, token: str) -> Person | None:
        """The person a login token belongs to (tokens are stored only as hashes)."""
        return self._people().get(_hash(token))

    def _people(self) -> dict[str, Person]:
        """Token hash -> person, read once: the team does not change after init (every request asks)."""
        if self._team is None:
            with self._read() as db:
                self._team = {r["token_hash"]: _person(r) for r in db.execute("SELECT * FROM people")}
        return self._team

    def new_session(self, name: str) -> tuple[str, str]:
        """A browser session for ``name``: (cookie value, CSRF token)."""
        cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        with self._write() as db:
            db.execute(
                "INSERT INTO sessions (token_hash, person, csrf, created_at) VALUES (?, ?, ?, ?)",
                (_hash(cookie), name, csrf, _now()),
            )
        return cookie, csrf

    def session(self, cookie: str) -> tuple[Person, str] | None:
        """(person, CSRF token) of a live session cookie, or None (unknown or older than a week)."""
        with self._read() as db:
            row = db.execute(
                "SELECT people.*, sessions.csrf, sessions.created_at AS started FROM sessions"
                " JOIN people ON people.name = sessions.person WHERE sessions.token_hash = ?",
                (_hash(cookie),),
            ).fetchone()
        if row is None or datetime.now(timezone.utc) - _time(row["started"]) > timedelta(days=SESSION_DAYS):
            return None
        return _person(row), row["csrf"]

    def end_session(self, cookie: str) -> None:
        """Log out: forget the session."""
        with self._write() as db:
            db.execute("DELETE FROM sessions WHERE token_hash = ?", (_hash(cookie),))

    # -- queues ---------------------------------------------------------------------------------

    def next_item(self, name: str) -> Item | None:
        """The first open item of ``name``'s queue, or None when it is empty."""
        with self._read() as db:
            row = db.execute(
                f"SELECT * FROM items WHERE person = ? AND state = 'open' ORDER BY {QUEUE_ORDER} LIMIT 1", (name,)
            ).fetchone()
            return self._item(db, row) if row else None

    def item_for(self, item_id: str, name: str) -> Item:
        """One item of ``name``'s (NotFound, NotYours otherwise)."""
        with self._read() as db:
            return self._item(db, self._own_row(db, item_id, name))

    def today(self, name: str) -> DayProgress:
        """Answers and reviews ``name`` gave since local midnight, and the open items left."""
        midnight = datetime.now().astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
        since = midnight.astimezone(timezone.utc).isoformat(timespec="microseconds")
        with self._read() as db:
            answered = db.execute(
                "SELECT COUNT(*) FROM answers JOIN items ON items.id = answers.item_id"
                " WHERE items.person = ? AND answers.submitted_at >= ?",
                (name, since),
            ).fetchone()[0]
            reviewed = db.execute(
                "SELECT COUNT(*) FROM reviews JOIN items ON items.id = reviews.item_id"
                " WHERE items.person = ? AND reviews.at >= ?",
                (name, since),
            ).fetchone()[0]
            left = db.execute("SELECT COUNT(*) FROM items WHERE person = ? AND state = 'open'", (name,)).fetchone()[0]
        return DayProgress(answered + reviewed, left)

    def discussions(self, name: str) -> list[Discussion]:
        """The adjudications of tasks ``name`` annotated: every answer side by side, and the consensus."""
        with self._read() as db:
            rows = db.execute(
                "SELECT adj.* FROM items AS adj WHERE adj.kind = 'adjudicate' AND adj.task_id IN"
                " (SELECT task_id FROM items WHERE person = ? AND kind = 'annotate') ORDER BY adj.created_at",
                (name,),
            ).fetchall()
            out = []
            for row in rows:
                consensus = self._latest_answer(db, row["id"]) if row["state"] == "done" else None
                shown = _shown(row)
                out.append(Discussion(self._item(db, row), by_key(consensus, shown) if consensus is not None else None))
            return out

    # -- actions --------------------------------------------------------------------------------

    def submit(self, item_id: str, name: str, answer: Answer) -> None:
        """Store ``name``'s answer to an annotate or adjudicate item, committed before this returns.

        AnswerError (422) for an answer that does not fit the task; NotFound, NotYours, Conflict.
        """
        with self._write() as db:
            row = self._own_row(db, item_id, name)
            if row["kind"] == "review":
                raise Conflict("this is a review task — approve or reject it (POST .../review)")
            if row["state"] != "open":
                raise Conflict(f"this task is already {row['state']} — nothing to submit")
            shown = _shown(row)
            keys = KEYS[: len(shown)]
            texts = self._texts(db, row["task_id"], shown)
            levels = check_answer(answer, keys, texts)
            db.execute(
                "INSERT INTO answers (item_id, body, submitted_at) VALUES (?, ?, ?)",
                (item_id, json.dumps(by_id(answer, levels, shown), ensure_ascii=False), _now()),
            )
            state = "done" if row["kind"] == "adjudicate" else "submitted"
            db.execute("UPDATE items SET state = ?, returned_reason = NULL WHERE id = ?", (state, item_id))
            if row["kind"] == "annotate" and not row["gold"]:
                self._maybe_review(db, row)
                self._maybe_adjudicate(db, row["task_id"])

    def review(self, item_id: str, name: str, verdict: Verdict) -> None:
        """A reviewer's verdict; a rejected task goes back to its annotator with the reason."""
        approve, reason = verdict.approve, verdict.reason
        if not approve and not reason:
            raise AnswerError("a rejection needs a reason — say what the annotator should fix")
        with self._write() as db:
            row = self._own_row(db, item_id, name)
            if row["kind"] != "review":
                raise Conflict(f"this is an {row['kind']} task, not a review — submit an answer instead")
            if row["state"] != "open":
                raise Conflict("this review is already done")
            correct = None
            if row["planted"]:
                correct = approve == _planted(row)["correct"]
            else:
                target = db.execute("SELECT state FROM items WHERE id = ?", (row["reviews"],)).fetchone()
                if target["state"] == "submitted":  # it may have been returned or re-answered meanwhile
                    if approve:
                        db.execute("UPDATE items SET state = 'approved' WHERE id = ?", (row["reviews"],))
                    else:
                        db.execute(
                            "UPDATE items SET state = 'open', returned_reason = ? WHERE id = ?",
                            (reason, row["reviews"]),
                        )
            db.execute(
                "INSERT INTO reviews (item_id, approve, reason, correct, at) VALUES (?, ?, ?, ?, ?)",
                (item_id, int(approve), reason, None if correct is None else int(correct), _now()),
            )
            db.execute("UPDATE items SET state = 'done' WHERE id = ?", (item_id,))

    def _maybe_review(self, db: sqlite3.Connection, row: sqlite3.Row) -> None:
        """Send a submitted task to review: a seeded draw, or always when it was answered before."""
        rounds = db.execute("SELECT COUNT(*) FROM answers WHERE item_id = ?", (row["id"],)).fetchone()[0]
        drawn = seeded(self.settings.seed, "review", row["id"], rounds).random() < self.settings.review_rate
        if not (drawn or rounds > 1):
            return
        reviewer = self._least_loaded(db, ("reviewer", "admin"), exclude=row["person"])
        if reviewer is None:
            return
        task = self._task(db, row["task_id"])
        self._add_item(db, "review", task, reviewer, shown=_shown(row), reviews=row["id"])

    def _maybe_adjudicate(self, db: sqlite3.Connection, task_id: str) -> None:
        """Open an adjudication when every copy of a task is answered and two disagree beyond the target."""
        copies = db.execute(
            "SELECT id, state FROM items WHERE task_id = ? AND kind = 'annotate'", (task_id,)
        ).fetchall()
        if len(copies) < 2 or any(c["state"] not in ("submitted", "approved") for c in copies):
            return
        if db.execute("SELECT 1 FROM items WHERE task_id = ? AND kind = 'adjudicate'", (task_id,)).fetchone():
            return
        task = self._task(db, task_id)
        levels = [self._latest_answer(db, c["id"]).levels for c in copies]
        least = min(agreement(x, y, task.responses) for i, x in enumerate(levels) for y in levels[i + 1 :])
        if least < self.settings.agreement_target:
            who = self._least_loaded(db, ("reviewer", "admin"))
            if who is not None:
                self._add_item(db, "adjudicate", task, who)

    def _least_loaded(self, db: sqlite3.Connection, roles: Sequence[str], exclude: str | None = None) -> str | None:
        """The person of the first role that has anyone, with the fewest open items (then file order)."""
        for role in roles:
            row = db.execute(
                "SELECT people.name FROM people LEFT JOIN items ON items.person = people.name AND items.state = 'open'"
                " WHERE people.role = ? AND people.name != ? GROUP BY people.name"
                " ORDER BY COUNT(items.id), people.position LIMIT 1",
                (role, exclude or ""),
            ).fetchone()
            if row:
                return cast("str | None", row["name"])
        return None

    # -- reading --------------------------------------------------------------------------------

    def _own_row(self, db: sqlite3.Connection, item_id: str, name: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise NotFound(f"no task {item_id!r}")
        if row["person"] != name:
            raise NotYours(f"task {item_id!r} is not assigned to you")
        return cast("sqlite3.Row", row)

    def _task(self, db: sqlite3.Connection, task_id: str) -> TaskRow:
        row = db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return _task_row(row)

    def _record(self, db: sqlite3.Connection, prompt_id: str) -> Record:
        """A prompt's record, parsed once (prompts never change after init; parsing was a tenth of a request)."""
        record = self._records.get(prompt_id)
        if record is None:
            if len(self._records) >= RECORD_CACHE:
                self._records.clear()
            row = db.execute("SELECT record FROM prompts WHERE id = ?", (prompt_id,)).fetchone()
            record = self._records[prompt_id] = _stored(f"prompt '{prompt_id}'", _RECORD, row["record"])
        return record

    def _texts(self, db: sqlite3.Connection, task_id: str, shown: Sequence[str]) -> dict[str, str]:
        record = self._record(db, self._task(db, task_id).prompt_id)
        content = {r.id: r.content for r in record.responses}
        return {KEYS[i]: content[rid] for i, rid in enumerate(shown)}

    def _latest_answer(self, db: sqlite3.Connection, item_id: str) -> StoredAnswer:
        row = db.execute(
            "SELECT id, body FROM answers WHERE item_id = ? ORDER BY id DESC LIMIT 1", (item_id,)
        ).fetchone()
        if row is None:
            raise _Damaged(f"item '{item_id}' is answered, but its answer is missing")
        return _stored(f"answer {row['id']}", _ANSWER, row["body"])

    def _item(self, db: sqlite3.Connection, row: sqlite3.Row) -> Item:
        task = self._task(db, row["task_id"])
        record = self._record(db, task.prompt_id)
        shown = _shown(row)
        content = {r.id: r.content for r in record.responses}
        item = Item(
            item_id=row["id"],
            kind=row["kind"],
            task_id=task.task_id,
            prompt_id=record.id,
            prompt=record.input if isinstance(record.input, str) else [m.model_dump() for m in record.input],
            sys_prompt=record.sys_prompt,
            reference=record.reference,
            category=record.category,
            responses=[{"key": KEYS[i], "content": content[rid]} for i, rid in enumerate(shown)],
            shown=shown,
            returned_reason=row["returned_reason"],
        )
        if row["kind"] == "review":
            stored = _planted(row)["answer"] if row["planted"] else self._latest_answer(db, row["reviews"])
            item.answer = by_key(stored, shown)
        elif row["kind"] == "adjudicate":
            copies = db.execute(
                "SELECT id, person FROM items WHERE task_id = ? AND kind = 'annotate' ORDER BY id", (task.task_id,)
            ).fetchall()
            item.answers = [
                {"annotator": c["person"], **by_key(self._latest_answer(db, c["id"]), shown)} for c in copies
            ]
        return item

    def snapshot(self) -> Snapshot:
        """Every row, read in one transaction (for the dashboard and the export)."""
        with self._read() as db:
            people = [_person(r) for r in db.execute("SELECT * FROM people ORDER BY position")]
            prompts: dict[str, Record] = {}
            gold: dict[str, Record] = {}
            for r in db.execute("SELECT * FROM prompts ORDER BY gold, position"):
                (gold if r["gold"] else prompts)[r["id"]] = _stored(f"prompt '{r['id']}'", _RECORD, r["record"])
            tasks = [_task_row(r) for r in db.execute("SELECT * FROM tasks ORDER BY rowid")]
            items = [_item_row(r) for r in db.execute("SELECT * FROM items ORDER BY rowid")]
            answers = _answer_rows(db)
            reviews = [
                ReviewRow(
                    r["item_id"],
                    r["reviews"],
                    r["person"],
                    bool(r["approve"]),
                    r["reason"],
                    bool(r["gold"]),
                    None if r["correct"] is None else bool(r["correct"]),
                    _time(r["at"], f"the time of review {r['id']}"),
                )
                for r in db.execute(
                    "SELECT reviews.*, items.reviews, items.person, items.gold FROM reviews"
                    " JOIN items ON items.id = reviews.item_id ORDER BY reviews.id"
                )
            ]
        return Snapshot(self.settings, people, prompts, gold, tasks, items, answers, reviews)


def _answer_rows(db: sqlite3.Connection) -> list[AnswerRow]:
    """Every answer; ``current`` marks the latest one of each item that stands."""
    rows = db.execute(
        "SELECT answers.*, items.task_id, items.person, items.kind, items.state FROM answers"
        " JOIN items ON items.id = answers.item_id ORDER BY answers.id"
    ).fetchall()
    latest = {r["item_id"]: r["id"] for r in rows}
    out = []
    for r in rows:
        body = _stored(f"answer {r['id']}", _ANSWER, r["body"])
        stands = r["state"] in ("submitted", "approved", "done")
        out.append(
            AnswerRow(
                **vars(body),
                item_id=r["item_id"],
                task_id=r["task_id"],
                person=r["person"],
                kind=r["kind"],
                submitted_at=_time(r["submitted_at"], f"the time of answer {r['id']}"),
                current=stands and latest[r["item_id"]] == r["id"],
            )
        )
    return out


def _person(row: sqlite3.Row) -> Person:
    """A person of the ``people`` table. Not validated again: a name an older cheems took stays readable."""
    what = f"person {str(row['name'])[:40]!r}"
    if not isinstance(row["name"], str):
        raise _Damaged(f"{what} has a name that is not text")
    if row["role"] not in get_args(Role):
        raise _Damaged(f"{what} has the role {str(row['role'])[:20]!r}")
    categories = _stored(f"{what} (categories)", _IDS, row["categories"])
    return Person.model_construct(name=row["name"], role=row["role"], categories=categories)


def _task_row(r: sqlite3.Row) -> TaskRow:
    return TaskRow(r["id"], r["prompt_id"], _stored(f"task '{r['id']}'", _IDS, r["responses"]), bool(r["gold"]))


def _item_row(r: sqlite3.Row) -> ItemRow:
    return ItemRow(r["id"], r["kind"], r["task_id"], r["person"], r["state"], bool(r["gold"]), _shown(r), r["reviews"])


def _shown(item: sqlite3.Row) -> list[str]:
    """The response ids of an ``items`` row in the order its person sees them."""
    return _stored(f"item '{item['id']}'", _IDS, item["shown"])


def _planted(item: sqlite3.Row) -> Planted:
    """The shown answer of a planted gold review, and whether it is the gold one."""
    return _stored(f"the planted answer of item '{item['id']}'", _PLANTED, item["planted"])


def _missing_tables(db: sqlite3.Connection) -> dict[str, str]:
    """Table -> what it lacks, for the tables of ``SCHEMA`` a project file lacks (or lacks columns of)."""
    missing = {}
    for table, columns in _schema_columns().items():
        have = {r[0] for r in db.execute("SELECT name FROM pragma_table_info(?)", (table,))}
        if not have:
            missing[table] = f"table '{table}' is missing"
        elif columns - have:
            missing[table] = f"table '{table}' has no column {', '.join(sorted(columns - have))}"
    return missing


@functools.cache
def _schema_columns() -> dict[str, set[str]]:
    """Table -> column names, as ``SCHEMA`` makes them."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(SCHEMA)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
        return {t: {r[0] for r in db.execute("SELECT name FROM pragma_table_info(?)", (t,))} for t in tables}
    finally:
        db.close()


def _planted_answer(record: Record, task: PlannedTask, correct: bool) -> dict[str, Any]:
    """A plausible answer to a gold task: the gold order of its responses, or that order turned upside down."""
    assert record.rank is not None
    levels = rank_levels(record.rank, task.responses)
    if not correct:
        levels = levels[::-1] if len(levels) > 1 else [levels[0][:1], levels[0][1:]]
    scores = {r: max(0, 5 - i) for i, level in enumerate(levels) for r in level}
    return {"scores": scores, "levels": levels, "spans": [], "flags": {}, "note": "", "override": False}


def _fresh(record: Record) -> Record:
    """The prompt and its responses only: no comparisons, rank or earlier human annotations; each text once
    (the pool rule, :meth:`Record.pooled`), so that no task shows one text twice."""
    data = record.to_json()
    for key in ("comparisons", "rank", "human_annotations"):
        data.pop(key, None)
    return Record.model_validate(data).pooled()


def _check_new_folder(folder: Path) -> None:
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    if names and all(name.startswith(BUILD_PREFIX) for name in names):
        raise InputError(
            f"holds only {names[0]}, left by an init that was stopped",
            path=str(folder),
            hint="delete the folder and run init again",
        )
    if folder.exists() and (not folder.is_dir() or names):
        raise InputError(
            "already exists and is not an empty folder",
            path=str(folder),
            hint="name a new folder — init never overwrites a project",
        )


def _check_prompts(records: Sequence[Record], gold: Sequence[Record]) -> None:
    ids = {r.id for r in records}
    for r in gold:
        if r.rank is None:
            raise InputError(
                f"gold prompt '{r.id}' has no 'rank'", path="--gold", hint="gold prompts need a known ranking"
            )
        missing = [x.id for x in r.responses if x.id not in r.rank]
        if missing:
            raise InputError(
                f"gold prompt '{r.id}' has no rank for {', '.join(missing)}", path="--gold", hint="rank every response"
            )
        if r.id in ids:
            raise InputError(
                f"gold prompt '{r.id}' is also a prompt to annotate", path="--gold", hint="keep gold prompts apart"
            )


def _write_tokens(path: Path, tokens: dict[str, str]) -> None:
    """``name<TAB>token`` lines, readable by the owner only (0600 from the start, never wider)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        f.writelines(f"{name}\t{token}\n" for name, token in tokens.items())
