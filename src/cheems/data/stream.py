"""Record files as a stream: read a line at a time, do the per-record work in a pool of processes,
get the results back in input order.

:func:`stream_records` is the one record reader. :func:`read_records` is
``list(stream_records(...))``; the data steps (``validate``, ``resolve``, ``split``, ``curate …``)
pass a function that turns each record into its output (a JSON line, a few counts), so that memory
stays bounded by a few chunks of the file, not the file, and the CPU-bound part (JSON decoding,
validation, the step itself) runs on every core.

Whatever the number of workers, the results, the lines skipped with ``skip_invalid`` and the warnings
come in input order, so the output is byte-identical to a single-process run. JSON Lines files are
streamed; a ``.json`` array or a ``.csv`` file is parsed whole first (its syntax spans lines), then
streamed the same way. Official pairwise rows (``input/answer1/answer2/preference``) are grouped by
``input`` into one record each and come after the file's other records, as they always have.

:class:`Records` is the one step runner: a step is a per-record function returning ``(record or None,
outcome)``; run over a list it gives the records, run over files (streamed as above) the output
lines, made in the workers. The same function and the same report either way.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from cheems.data.io import (
    Decoder,
    ReadResult,
    add_official_pair,
    decode_jsonl_line,
    file_kind,
    is_official_pair,
    jsonl_lines,
    load_rows,
    parse_record,
    record_line,
)
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.runtime import ProgressBar

T = TypeVar("T")

CHUNK_BYTES = 1 << 20
"""Text per task sent to a worker: large enough that pickling is a small part of the work, small enough
that a few chunks in flight stay a few MB."""

LOG_EVERY_S = 10.0
"""Off a terminal, a long ``dedup`` or ``decontaminate`` writes one line of progress this often (``log_progress``)."""

POOL_MIN_BYTES = 32 << 20
"""Files smaller than this are done in this process: starting workers (each imports pydantic and the
schema, about half a second) costs more than it saves."""

_RECORD, _PAIR, _ERROR = "record", "pair", "error"


def default_workers() -> int:
    """Worker processes for CPU-bound data steps: the cores this process may run on (``$CHEEMS_WORKERS`` wins)."""
    env = os.environ.get("CHEEMS_WORKERS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(
                f"{env!r} is not a number of worker processes",
                path="CHEEMS_WORKERS",
                hint="set it to 1 (this process), 2, … or unset it for every core",
            )
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def same_record(record: Record) -> Record:
    """The record itself (what :func:`stream_records` yields by default)."""
    return record


def _parse_chunk(
    path: str,
    fn: Callable[[Record], Any],
    rows: list[tuple[int, Any]],
    raw: bool,
    scope: str | None = None,
    prompts: bool = False,
) -> list[tuple[Any, ...]]:
    """A chunk of rows, parsed and passed through ``fn`` (runs in a worker): JSON Lines text when ``raw``,
    else values already decoded (``.json`` and ``.csv`` files). ``scope`` and ``prompts``: as ``parse_record``'s."""
    decoder = Decoder(Path(path)) if raw else None
    out: list[tuple[Any, ...]] = []
    for n, item in rows:
        try:
            obj = decode_jsonl_line(decoder, item, n) if decoder is not None else item
            out.append(_one(path, fn, n, obj, scope, prompts))
        except InputError as e:
            out.append((n, _ERROR, e))
    return out


def _one(
    path: str, fn: Callable[[Record], Any], n: int, obj: Any, scope: str | None = None, prompts: bool = False
) -> tuple[Any, ...]:
    """(line, kind, value) for one decoded row: an official pairwise row is kept as it is for grouping."""
    if is_official_pair(obj):
        return n, _PAIR, obj
    record = parse_record(obj, path, n, scope, prompts=prompts)
    try:
        result = fn(record)
    except InputError as e:  # a check of fn's own (the importers' distinct_pairs) is at this line too
        raise e.located(path, n) from None
    return n, _RECORD, (record.id, record.unranked(), len(record.responses), result)


class PromptIds:
    """The prompt ids read so far and where each was first seen, for the duplicate check. One object can
    span several :func:`stream_records` calls (bench files, whose ids must be unique across the files).
    ``scoped``: a record without an id is named ``FILE-STEM/p-…`` (see ``parse_record``), so that only ids written
    in the files can repeat across them."""

    _LINE_BITS = 40

    def __init__(self, *, scoped: bool = False) -> None:
        from cheems.data.keytable import KeyLog  # here, not at the top: workers import this module, not numpy

        self.scoped = scoped
        self.paths: list[str] = []
        self._log = KeyLog()

    def first_seen(self, rid: str, line: int) -> str | None:
        """``path:line`` of an earlier record with id ``rid``, or ``None`` (this one, at ``line`` of the last
        path, is then remembered)."""
        first = self._log.first((rid,), (len(self.paths) - 1) << self._LINE_BITS | line)
        if first is None:
            return None
        return f"{self.paths[first >> self._LINE_BITS]}:{first & ((1 << self._LINE_BITS) - 1)}"

    def scope(self, path: str) -> str | None:
        """The ``id_scope`` of ``parse_record`` for the records of ``path``: its stem when ``scoped``."""
        return Path(path).stem if self.scoped else None


class _Reader:
    """What the main process keeps while records stream by: ids seen (for duplicates), pairwise groups,
    skipped lines and warnings."""

    def __init__(
        self,
        issues: ReadResult,
        skip_invalid: bool,
        ids: PromptIds | None,
        unique_ids: bool = True,
        prompts: bool = False,
    ) -> None:
        self.issues, self.skip_invalid, self.unique_ids, self.prompts = issues, skip_invalid, unique_ids, prompts
        self.ids = ids if ids is not None else PromptIds()

    def skip(self, error: InputError) -> None:
        """A bad row: raise it, or with ``skip_invalid`` list it so that nothing goes silently."""
        if not self.skip_invalid:
            raise error
        self.issues.skipped.append(error)

    def take(self, path: str, n: int, value: tuple[Any, ...], *, unique: bool = True) -> Any:
        """The result of a parsed record, after the checks that need every earlier record (``unique``: its id
        is not one seen before; pairwise groups are not checked, their ids come from their text)."""
        rid, left_out, n_responses, result = value
        first = self.ids.first_seen(rid, n) if unique and self.unique_ids else None
        if first is not None:
            raise InputError(
                f"duplicate prompt id '{rid}' (first at {first})",
                path=path,
                line=n,
                field="id",
                hint="give every prompt its own id",
            )
        if left_out:
            self.issues.warnings.append(_unranked_warning(rid, left_out, n_responses, path, n))
        return result

    def file(self, path: str, items: Iterable[list[tuple[Any, ...]]], fn: Callable[[Record], Any]) -> Iterator[Any]:
        """The results of one file's records in order, then those of its pairwise groups."""
        self.ids.paths.append(path)
        groups: dict[str, tuple[int, dict[str, Any]]] = {}
        for chunk in items:
            for n, kind, value in chunk:
                try:
                    if kind == _ERROR:
                        raise value
                    if kind == _PAIR:
                        _group_pair(groups, value, path, n)
                        continue
                    yield self.take(path, n, value)
                except InputError as e:
                    self.skip(e)
        for n, group in groups.values():
            try:
                # a group has no answer1/answer2: it parses as a record
                _, _, value = _one(path, fn, n, group, self.ids.scope(path))
                yield self.take(path, n, value, unique=False)
            except InputError as e:
                self.skip(e)


def _group_pair(groups: dict[str, tuple[int, dict[str, Any]]], obj: dict[str, Any], path: str, n: int) -> None:
    """Add an official pairwise row to the record of its ``input`` (kept from its first row on)."""
    key = json.dumps(obj.get("input"), ensure_ascii=False, sort_keys=True)
    _, group = groups.setdefault(
        key, (n, {k: v for k, v in obj.items() if k not in ("answer1", "answer2", "preference")})
    )
    add_official_pair(group, obj["answer1"], obj["answer2"], obj["preference"], path, n)


def _unranked_warning(rid: str, left_out: list[str], n_responses: int, path: str, n: int) -> InputError:
    return InputError(
        f"prompt '{rid}': rank leaves out {len(left_out)} of {n_responses} responses "
        f"({', '.join(left_out)}); they are in no ranked pair and not evaluated",
        path=path,
        line=n,
        field="rank",
        hint="rank every response, or drop the ones you mean to leave out",
    )


def _chunks(lines: Iterator[tuple[int, str]], budget: int) -> Iterator[list[tuple[int, str]]]:
    chunk: list[tuple[int, str]] = []
    size = 0
    for item in lines:
        chunk.append(item)
        size += len(item[1])
        if size >= budget:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class _Pool:
    """``n`` worker processes, each fed through its own pipe: task ``i`` goes to worker ``i % n``, and its
    result is read back from that worker, so results come in task order.

    No thread runs in this process, so the pool can be closed from any thread — also from a generator
    that the garbage collector finalizes there (a process pool's manager thread, finalizing the generator
    that owns its pool, cannot join itself). A worker reads its pipe all the time: it ends as soon as the
    pipe closes, whether :meth:`close` closed it or the kernel did because this process was killed, so no
    worker outlives its parent (and multiprocessing's resource tracker, which the workers hold open,
    ends with them).
    """

    JOIN_S = 10.0
    """How long a closed worker may take to end before it is killed (it ends on its own at once)."""

    def __init__(self, n: int) -> None:
        context = multiprocessing.get_context("spawn")  # not fork: threads here (the progress bar) do not fork safely
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        try:
            for _ in range(n):
                mine, theirs = context.Pipe()
                proc = context.Process(target=_serve, args=(theirs,), daemon=True, name="cheems-data-worker")
                self._conns.append(mine)
                proc.start()
                self._procs.append(proc)
                theirs.close()  # the worker's end lives in the worker alone: its close is our EOF and vice versa
        except BaseException:
            self.close()
            raise

    def send(self, i: int, task: tuple[Callable[..., Any], tuple[Any, ...]]) -> None:
        """Give task ``i`` to its worker."""
        try:
            self._conns[i % len(self._conns)].send(task)
        except OSError:
            raise self._lost(i) from None

    def receive(self, i: int) -> Any:
        """The result of task ``i`` (the exception it raised is raised here)."""
        try:
            ok, value = self._conns[i % len(self._conns)].recv()
        except (EOFError, OSError):
            raise self._lost(i) from None
        if not ok:
            raise value
        return value

    def _lost(self, i: int) -> ChildProcessError:
        proc = self._procs[i % len(self._procs)]
        proc.join(self.JOIN_S)
        return ChildProcessError(
            f"a data worker process (pid {proc.pid}) ended unexpectedly (exit code {proc.exitcode}); "
            "if memory ran out, use fewer workers (--workers or $CHEEMS_WORKERS)"
        )

    def close(self) -> None:
        """End the workers (a task still running is dropped) and wait for them."""
        for conn in self._conns:
            conn.close()
        for proc in self._procs:
            proc.join(self.JOIN_S)
            if proc.is_alive():  # only a worker stuck in C code that holds the GIL
                proc.kill()
                proc.join()
        self._conns, self._procs = [], []


def _serve(conn: Any) -> None:
    """A worker's life: run the tasks that come through ``conn`` in order and send back ``(ok, result)``."""
    import queue
    import signal
    import threading
    from multiprocessing.reduction import ForkingPickler

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the parent decides
    tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
    # A thread always reading the pipe: the parent never blocks on a full pipe while this process sends a
    # result, and the end of the pipe (the parent closed it or died) ends this process at once.
    threading.Thread(target=_receive, args=(conn, tasks), daemon=True).start()
    while True:
        fn, args = tasks.get()
        try:
            result = (True, fn(*args))
        except Exception as e:  # the parent raises it
            result = (False, e)
        try:
            data = ForkingPickler.dumps(result)
        except Exception as e:  # an exception that does not pickle: its text does
            data = ForkingPickler.dumps((False, RuntimeError(f"{type(e).__name__} in a data worker: {e}")))
        try:
            conn.send_bytes(data)  # what conn.send would send: the parent's recv reads it
        except OSError:  # the parent is gone
            os._exit(0)


def _receive(conn: Any, tasks: Any) -> None:
    while True:
        try:
            tasks.put(conn.recv())
        except (EOFError, OSError):
            os._exit(0)


def _in_order(
    tasks: Iterator[tuple[Callable[..., list[tuple[Any, ...]]], tuple[Any, ...]]], workers: int
) -> Generator[list[tuple[Any, ...]], None, None]:
    """Run ``(function, args)`` tasks on ``workers`` processes, at most two each in flight; results in order."""
    if workers <= 1:
        for fn, args in tasks:
            yield fn(*args)
        return
    pool = _Pool(workers)
    try:
        sent = received = 0
        for task in tasks:
            pool.send(sent, task)
            sent += 1
            if sent - received >= 2 * workers:
                yield pool.receive(received)
                received += 1
        while received < sent:
            yield pool.receive(received)
            received += 1
    finally:
        pool.close()


class _Progress:
    """The progress bar of a stream: MB read out of the files' size, with MB/s and records/s."""

    def __init__(self, total: int, label: str, enabled: bool, log_every_s: float | None = None) -> None:
        self.bar = ProgressBar(
            max(1, total >> 20), label, enabled=enabled, after_s=1.0, terminal_only=True, log_every_s=log_every_s
        )
        self.bytes = self.records = 0
        self.start = time.monotonic()

    def add(self, size: int, records: int) -> None:
        self.bytes += size
        self.records += records
        done_mb = self.bytes >> 20
        seconds = max(time.monotonic() - self.start, 1e-9)
        stats = f"{self.bytes / seconds / 1e6:.1f} MB/s, {self.records / seconds:,.0f} records/s"
        self.bar.advance(done_mb - self.bar.done, stats=stats)

    def close(self) -> None:
        self.bar.close()


def read_records(paths: str | Path | Iterable[str | Path], skip_invalid: bool = False) -> ReadResult:
    """Read canonical or official record files whole; raise ``InputError`` on the first bad line.

    With ``skip_invalid`` bad lines are collected in ``ReadResult.skipped`` instead; nothing
    is dropped without a record of it. The records come from :func:`stream_records`; steps that
    need not hold every record at once use that directly.
    """
    result = ReadResult()
    result.records = list(stream_records(paths, skip_invalid=skip_invalid, issues=result))
    return result


def stream_records(
    paths: str | Path | Iterable[str | Path],
    fn: Callable[[Record], T] = same_record,  # type: ignore[assignment]  # a TypeVar default: python/mypy#3737
    *,
    skip_invalid: bool = False,
    issues: ReadResult | None = None,
    workers: int | None = 1,
    progress: str | None = None,
    ids: PromptIds | None = None,
    unique_ids: bool = True,
    prompts: bool = False,
    log_progress: bool = False,
) -> Iterator[T]:
    """``fn(record)`` for every record of the files, in input order, reading a chunk at a time.

    ``fn`` runs in the worker processes when ``workers`` > 1 (``None``: :func:`default_workers`) and
    the input is large enough to pay for them; it must then be picklable (a module-level function or
    a ``functools.partial`` of one). Bad lines raise ``InputError`` at their line, or with
    ``skip_invalid`` go to ``issues.skipped``; a rank that leaves responses out is a warning in
    ``issues.warnings``. ``progress`` labels a progress bar (MB read, MB/s, records/s) drawn on a
    terminal once the work has run a second. Prompt ids must be unique across the files (and across the
    calls that share ``ids``), unless ``unique_ids`` is False (``dedup``, whose input repeats prompts: a prompt
    without an id is named by its text). With ``prompts`` a record may be a prompt alone, without responses (the
    prompt-side steps: ``dedup``, ``decontaminate``, ``validate``; see ``parse_record``). With ``log_progress`` the
    progress is also a plain line every :data:`LOG_EVERY_S` seconds off a terminal (a long step in a log).
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    reader = _Reader(issues if issues is not None else ReadResult(), skip_invalid, ids, unique_ids, prompts)
    n_workers = default_workers() if workers is None else workers
    total = sum(Path(p).stat().st_size for p in paths if Path(p).is_file())
    every = LOG_EVERY_S if log_progress else None
    bar = _Progress(total, f"{progress} (MB)" if log_progress else progress or "", progress is not None, every)
    try:
        for p in paths:
            path = str(p)
            pooled = n_workers if Path(p).is_file() and Path(p).stat().st_size >= POOL_MIN_BYTES else 1
            chunks = _in_order(_tasks(path, fn, reader, bar), pooled)
            try:
                yield from reader.file(path, chunks, fn)
            finally:
                chunks.close()  # the workers end here, in this thread, not whenever the generator is collected
    finally:
        bar.close()


def _tasks(
    path: str, fn: Callable[[Record], Any], reader: _Reader, bar: _Progress
) -> Iterator[tuple[Callable[..., list[tuple[Any, ...]]], tuple[Any, ...]]]:
    """The chunks of one file as tasks; JSON Lines read a line at a time, other formats parsed whole first."""
    scope = reader.ids.scope(path)
    if file_kind(path) != "jsonl":
        rows = load_rows(path, reader.skip_invalid, reader.issues.skipped)
        bar.add(Path(path).stat().st_size, len(rows))
        for start in range(0, len(rows), 256):
            yield _parse_chunk, (path, fn, rows[start : start + 256], False, scope, reader.prompts)
        return
    for chunk in _chunks(jsonl_lines(path), CHUNK_BYTES):
        bar.add(sum(len(raw.encode("utf-8")) + 1 for _, raw in chunk), len(chunk))
        yield _parse_chunk, (path, fn, chunk, True, scope, reader.prompts)


StepFn = Callable[[Record], tuple[Record | None, Any]]
"""A data step on one record: its output record (None: left out) and what the step did (its report's part)."""


def _as_line(fn: StepFn, record: Record) -> tuple[str | None, Any]:
    """``fn(record)`` with the output record as its canonical line (run in the workers: a line pickles light)."""
    out, outcome = fn(record)
    return (record_line(out) if out is not None else None), outcome


class Records:
    """The records a step runs over: a list in memory, or record files streamed a chunk at a time.

    :meth:`map` runs any per-record function (in the worker processes for large files); :meth:`step`
    runs a step (:data:`StepFn`) and yields ``(output, outcome)`` in input order, the output being the
    record over a list and its line over files (None when left out). Files are read again on every
    call (a two-pass step reads them twice); ``issues`` holds the last pass's skipped lines and warnings.
    ``ids``: the prompt ids of other files, which these files' ids must not repeat (a bench's files).
    """

    def __init__(
        self,
        source: Sequence[Record] | Sequence[str | Path] | str | Path,
        *,
        skip_invalid: bool = False,
        workers: int | None = 1,
        label: str | None = None,
        ids: PromptIds | None = None,
    ) -> None:
        items = [source] if isinstance(source, (str, Path)) else list(source)
        in_memory = all(isinstance(r, Record) for r in items)  # an empty list too: no records
        self.records: list[Record] | None = cast("list[Record]", items) if in_memory else None
        self.paths: list[str | Path] = [] if in_memory else cast("list[str | Path]", items)
        self.skip_invalid, self.workers, self.label, self.ids = skip_invalid, workers, label, ids
        self.issues = ReadResult()

    @property
    def streamed(self) -> bool:
        """Whether the records come from files (outputs are then lines)."""
        return self.records is None

    def map(self, fn: Callable[[Record], T]) -> Iterator[T]:
        """``fn(record)`` for every record, in input order."""
        if self.records is not None:
            return map(fn, self.records)
        self.issues = ReadResult()
        return stream_records(
            self.paths,
            fn,
            skip_invalid=self.skip_invalid,
            issues=self.issues,
            workers=self.workers,
            progress=self.label,
            ids=self.ids,
        )

    def step(self, fn: StepFn) -> Iterator[tuple[Any, Any]]:
        """``fn(record)`` for every record, the output record as a line when the records come from files."""
        return self.map(fn) if self.records is not None else self.map(functools.partial(_as_line, fn))
