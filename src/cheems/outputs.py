"""Where commands write: outputs checked before any work, written atomically, never half-written.

One place for three rules:

- :func:`claim_outputs`: a command names its inputs and outputs once, at its start. An output is
  never one of the inputs (compared after resolving symlinks, and by inode for hard links), never
  another output of the same run, never a folder (a file output) or a file (a folder output), and
  its folder can be created. An input brings what belongs to it: a database its SQLite side files
  (``-wal``, ``-shm``, ``-journal``: replacing the live log loses answers), a folder (a model) every
  file in it. A folder output that is filled or replaced whole never holds an input nor lies inside
  one. A broken rule is an ``InputError`` raised before any work, with nothing created.
- :func:`atomic_file`: a file is written to a temporary file beside it (``.NAME.<random>.tmp``,
  unique per process) and moved onto its name with ``os.replace`` only when complete; the
  temporary file is removed on any exit: exceptions, SIGINT, SIGTERM. Two runs writing the same
  file at once leave one complete run's output. Only SIGKILL (which no process can catch) can
  leave the hidden temporary file behind; the file under the real name is then still the old one.
- :func:`together`: files written inside the block are moved onto their names at its end, all at
  once, or none of them (split's two halves, a report beside its records); two runs' groups of the same
  files take their names one group after the other (a lock on their folders), never interleaved.
- :func:`replace_folder`: a folder built elsewhere (a trained model) takes its name whole, at once.
- :func:`out_of_room`: the one rule for a write that fails for want of room — a full disk (``ENOSPC``),
  the file-size limit (``ulimit -f``: ``EFBIG``) or a disk quota (``EDQUOT``), as an ``OSError`` or in a
  library's words (safetensors: ``... (os error 27)``) — is one line naming the path.
  :func:`atomic_file` applies it to every file it writes; :func:`disk_errors` to a whole save.

Under :func:`signals_interrupt` (the CLI's entry point) SIGINT and SIGTERM raise
:class:`Interrupted`, which unwinds the run like ``KeyboardInterrupt`` so that every cleanup runs;
the signal is held back for the few instructions that create, move or remove a temporary file, so
an interrupt never leaves one behind nor half-commits a group. :func:`interrupted_line` then says
which outputs the run left unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from cheems.errors import InputError

Named = tuple[str, "str | Path | None"]
"""(the option or key that names a path, the path); ``None`` paths are left out."""

T = TypeVar("T")
SIGNALS = (signal.SIGINT, signal.SIGTERM)
DISK_FULL = 64 * 2**20  # free bytes below which a failed write is taken for a full disk
NO_ROOM = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "the file would pass the file-size limit (ulimit -f)",
    errno.EDQUOT: "the disk quota is exceeded",
}
"""The errors of a write that failed for want of room, and what each means to a user."""
SQLITE_FULL = 13  # sqlite3's "database or disk is full" (sqlite3.Error.sqlite_errorcode, Python 3.11+)
_OS_ERROR = re.compile(r"\(os error (\d+)\)")  # how Rust libraries (safetensors) quote the errno
SIDE_FILES = ("-wal", "-shm", "-journal")
"""What SQLite keeps beside a database ``X`` as ``X-wal``, ``X-shm``, ``X-journal``: part of it while it is open."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (a ``BaseException``, like ``KeyboardInterrupt``: nothing catches it by accident)."""

    def __init__(self, signum: int, note: str | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.note = note  # what the run did about it (a training run: its checkpoint), for the interrupted line


# ---------------------------------------------------------------------------- checks before any work


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


def _special(path: str | Path) -> bool:
    """An existing file that is not a regular file or folder: ``/dev/null``, ``/dev/stdout``, a named pipe.

    Writing to one destroys nothing and cannot be atomic: it is written directly, and never
    compared with the inputs (``--train /dev/null --test /dev/null`` is fine).
    """
    try:
        mode = os.stat(os.path.expanduser(str(path))).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _same(a: str, b: str) -> bool:
    """Whether two resolved paths name one file: by inode when both exist (hard links), else by path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


def _within(path: str, folder: str) -> bool:
    """Whether the resolved ``path`` lies inside the resolved ``folder`` (not the folder itself)."""
    return path != folder and os.path.commonpath([path, folder]) == folder


def _database_of(path: str) -> str:
    """The database ``path`` is a SQLite side file of (``X-wal`` -> ``X``), else ``path`` itself."""
    for suffix in SIDE_FILES:
        if path.endswith(suffix) and len(path) > len(suffix):
            return path[: -len(suffix)]
    return path


def _input_clash(real: str, sources: list[tuple[str, str]]) -> str | None:
    """How writing the file ``real`` would replace an input, or None: the input itself, a SQLite side file
    of it, or a file (or a side file of a file) of an input folder."""
    base = _database_of(real)
    for label, source in sources:
        if _same(real, source):
            return f"is also the input {label} ({source})"
        if base != real and _same(base, source):
            return f"is a SQLite side file of the input {label} ({source})"
        if os.path.isdir(source) and _within(real, source):
            if os.path.lexists(real):
                return f"is a file of the input {label} ({source})"
            if base != real and os.path.lexists(base):
                return f"is a SQLite side file of {base}, a file of the input {label} ({source})"
    return None


def _folder_clash(real: str, sources: list[tuple[str, str]]) -> str | None:
    """How filling the folder ``real`` as a whole would touch an input, or None."""
    for label, source in sources:
        if _same(real, source):
            return f"is also the input {label} ({source})"
        if _within(source, real):
            return f"holds the input {label} ({source})"
        if _within(real, source):
            return f"is inside the input {label} ({source})"
    return None


def _check_folder(label: str, given: str, folder: str) -> None:
    """The output ``given`` is written in ``folder`` (resolved): its nearest existing part is a folder we can
    write in (the missing ones are created when the output is written)."""
    parent = folder
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise InputError(
            f"cannot be created: {parent} is a file, not a folder",
            path=given,
            field=label,
            hint="choose a path inside a folder",
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(
            f"cannot be written: no write permission in the folder {parent}",
            path=given,
            field=label,
            hint="choose a folder you can write to",
        )


@dataclass
class Claim:
    """What one command writes: files, folders, and a note for the interrupted message."""

    files: list[tuple[str, str, str]] = field(default_factory=list)  # (label, path as given, resolved path)
    folders: list[str] = field(default_factory=list)  # folders whose files are not listed one by one
    note: str | None = None


_claim: Claim | None = None
_committed: set[str] = set()  # resolved paths moved into place in this run


def _check_outputs(
    inputs: Iterable[Named] = (),
    files: Iterable[Named] = (),
    folders: Iterable[tuple[str, str | Path | None, Iterable[str]]] = (),
    replaced: Iterable[Named] = (),
) -> Claim:
    """Check a command's outputs against its inputs and each other; raise ``InputError``, create nothing.

    ``inputs`` and ``files`` are ``(label, path)`` pairs (label: the option or key that names the
    path, e.g. ``--output``); an input may be a folder (every file in it is an input) or a database
    (its SQLite side files are inputs too, whether they exist now or not). ``folders`` are
    ``(label, folder, names)``: an output folder and the files the command writes in it under fixed
    names (checked like ``files``); no names: a folder filled as a whole, kept apart from every input.
    ``replaced`` are folders built elsewhere and moved onto their names at the end (:func:`replace_folder`),
    checked like a folder filled as a whole.
    """
    claim = Claim()
    sources = [(label, _real(p)) for label, p in inputs if p is not None]
    outputs: list[tuple[str, str]] = [(label, str(p)) for label, p in files if p is not None]
    marked = [(label, folder, (), True) for label, folder in replaced]
    for label, folder, names, whole in [*marked, *((label, folder, names, False) for label, folder, names in folders)]:
        if folder is None:
            continue
        given, real = str(folder), _real(folder)
        if os.path.exists(real) and not os.path.isdir(real):
            raise InputError(
                f"is a file ({real}), not a folder",
                path=given,
                field=label,
                hint="name a folder (it is created when missing)",
            )
        _check_folder(label, given, real)
        names = list(names)
        if not names:  # a folder the command fills as a whole (a model, the demo): named in the message as a whole
            if clash := _folder_clash(real, sources):
                raise InputError(
                    clash,
                    path=given,
                    field=label,
                    hint="choose a folder apart from the inputs: inputs are never overwritten",
                )
            if whole:  # left unchanged until it is replaced at once
                claim.files.append((label, given, real))
            else:
                claim.folders.append(given)
        outputs += [(label, os.path.join(given, name)) for name in names]
    for label, given in outputs:
        real = _real(given)
        if _special(given):
            claim.files.append((label, given, real))
            continue
        if os.path.isdir(real):
            raise InputError(
                f"is a folder ({real}), not a file",
                path=given,
                field=label,
                hint="name a file to write, e.g. a path inside that folder",
            )
        if clash := _input_clash(real, sources):
            raise InputError(clash, path=given, field=label, hint="write to another file: inputs are never overwritten")
        for other_label, _, other in claim.files:
            if _same(real, other):
                what = "the same option twice" if other_label == label else f"also {other_label}"
                raise InputError(f"is {what} ({real})", path=given, field=label, hint="give each output its own file")
        _check_folder(label, given, os.path.dirname(real))
        if os.path.exists(real) and not os.access(real, os.W_OK):
            raise InputError(
                f"is read-only ({real})",
                path=given,
                field=label,
                hint="make it writable (chmod u+w) or write to another file",
            )
        claim.files.append((label, given, real))
    return claim


def claim_outputs(
    inputs: Iterable[Named] = (),
    files: Iterable[Named] = (),
    folders: Iterable[tuple[str, str | Path | None, Iterable[str]]] = (),
    note: str | None = None,
    replaced: Iterable[Named] = (),
) -> None:
    """Check a command's outputs, then remember the outputs so an interrupted run can say what it left unchanged.

    Every command calls this once, at its start, before reading anything large. ``note`` is added
    to the interrupted message (e.g. where finished work is kept).
    """
    global _claim
    _claim = _check_outputs(inputs, files, folders, replaced)
    _claim.note = note


# ---------------------------------------------------------------------------- signals

_hold = 0
_deferred: int | None = None
_finishing = False
_live: set[str] = set()  # temporary files that exist now


def _on_signal(signum: int, frame: object) -> None:
    global _deferred
    if _finishing:  # the run is over and printing its last line: nothing left to stop
        return
    if _hold:
        _deferred = signum
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def _held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back for a few instructions (creating, moving, removing a temporary file)."""
    global _hold, _deferred
    _hold += 1
    try:
        yield
    finally:
        _hold -= 1
        if not _hold and _deferred is not None:
            signum, _deferred = _deferred, None
            raise Interrupted(signum)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM raise :class:`Interrupted`; the previous handlers come back after.

    Starts a fresh run: no outputs claimed, none committed.
    """
    global _claim, _finishing, _deferred
    _claim, _finishing, _deferred = None, False, None
    _committed.clear()
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


async def interruptible(run: Awaitable[T]) -> T:
    """Await ``run``; while :func:`signals_interrupt` is on, a signal cancels it and raises :class:`Interrupted` after.

    Raised straight from the handler, :class:`Interrupted` surfaces in whatever code runs at that
    moment; inside asyncio's socket transport that is caught and logged as a failed write, and the
    interrupt is lost. The event loop's own handler instead cancels the run at its next ``await``.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not _on_signal:
        return await run
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None  # awaited inside a task: asyncio.run's
    caught: list[int] = []

    def cancel(signum: int) -> None:
        if not caught:
            caught.append(signum)
            task.cancel()

    for s in SIGNALS:
        loop.add_signal_handler(s, cancel, s)
    try:
        return await run
    except asyncio.CancelledError:
        if not caught:
            raise
    finally:
        for s in SIGNALS:
            loop.remove_signal_handler(s)
            signal.signal(s, _on_signal)
        if caught:
            _on_signal(caught[0], None)  # raises Interrupted (unless the run is already finishing)
    raise asyncio.CancelledError


def interrupted_line(note: str | None = None) -> str:
    """The one line an interrupted run prints: which outputs it left unchanged (and had written), and the note
    (``note``, the :class:`Interrupted`'s own, over the one the command claimed its outputs with).

    Later signals are ignored from here on, and a temporary file a second signal kept its writer
    from removing is removed.
    """
    global _finishing
    _finishing = True
    for tmp in list(_live):
        _remove(tmp)
    parts = ["interrupted"]
    if _claim is not None:
        unchanged = [given for _, given, real in _claim.files if real not in _committed]
        written = [given for _, given, real in _claim.files if real in _committed]
        if unchanged:
            parts.append(f"{', '.join(unchanged)} left unchanged")
        if written:
            parts.append(f"{', '.join(written)} already written")
        if _claim.folders:
            parts.append(f"{', '.join(_claim.folders)} may be incomplete")
        note = note or _claim.note
    if note:
        parts.append(note)
    return "; ".join(parts)


# ---------------------------------------------------------------------------- atomic writing

_pending: list[tuple[str, str, list[str]]] | None = None  # inside together(): (temp, target, folders made)


def _remove(tmp: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    _live.discard(tmp)


def _discard(tmp: str, made: list[str]) -> None:
    """Remove a temporary file and the folders made for it (when still empty)."""
    with _held():
        _remove(tmp)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def _make_folders(folder: str) -> list[str]:
    """Create ``folder`` and its missing parents; return the ones created, outermost first."""
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    made = []
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except FileExistsError:  # made by a run beside this one
            continue
        made.append(path)
    return made


def umask_mode() -> int:
    """The permissions a plain ``open(..., "w")`` gives a new file: 0666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def follow_umask(files: Iterable[str | Path]) -> None:
    """Give ``files`` the permissions of :func:`umask_mode`: for what a library wrote through a private temporary
    file (safetensors saves every ``*.safetensors`` 0600), so a saved model reads like the rest of its folder."""
    mode = umask_mode()
    for file in files:
        os.chmod(file, mode)


def _file_mode(target: str) -> int:
    """Permissions of the file being replaced, else what a plain ``open(..., "w")`` would give."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return umask_mode()


def _commit(tmp: str, target: str) -> None:
    with _held():
        os.replace(tmp, target)
        _live.discard(tmp)
        _committed.add(target)


@contextlib.contextmanager
def atomic_file(path: str | Path, binary: bool = False) -> Iterator[IO[Any]]:
    """Open ``path`` for writing UTF-8 text (or bytes); it gets the content only if the block completes.

    The temporary file lives in the target's folder (``os.replace`` is atomic only within one
    file system) under a random name, so concurrent runs never share one. A symlink is written
    through: the link stays, its target gets the new content. Missing folders are created (and
    removed again when the write fails). A special file (``/dev/null``, a pipe) is written directly.
    """
    if _special(path):
        with open(os.path.expanduser(str(path)), "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            yield f
        return
    target = _real(path)
    folder, name = os.path.split(target)
    short = name.encode()[:100].decode(errors="ignore")  # room for the suffix within the 255-byte name limit
    with _held():
        made = _make_folders(folder)
        try:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{short}.", suffix=".tmp")
        except OSError as e:  # no room even for an empty file (no inodes left, a quota)
            for created in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(created)
            if line := out_of_room(e, path):
                raise line from None
            raise
        _live.add(tmp)
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # the content is on disk before the name points to it
        os.chmod(tmp, _file_mode(target))
        if _pending is not None:
            _pending.append((tmp, target, made))
        else:
            _commit(tmp, target)
    except BaseException as e:
        _discard(tmp, made)
        if line := out_of_room(e, path):  # a full disk or `ulimit -f`: one line, and the old file stays
            raise line from None
        raise


@contextlib.contextmanager
def _group_lock(targets: list[str]) -> Iterator[None]:
    """An exclusive lock (``flock``) on the folder of each of ``targets`` while a group takes its names: two runs
    that write the same files at once (``dedup -o OUT --report R``) commit one after the other, so the files end up
    all from one run, never one run's records beside the other's report. Released when the process ends, however."""
    fds: list[int] = []
    try:
        for folder in sorted({os.path.dirname(t) for t in targets}) if len(targets) > 1 else ():
            try:
                fds.append(os.open(folder, os.O_RDONLY))
            except OSError:  # a folder this user may write but not read: no lock there
                continue
            try:
                fcntl.flock(fds[-1], fcntl.LOCK_EX)  # in sorted order: two groups never wait for each other
            except OSError:  # a file system without locks (some network ones): the group commits unlocked
                continue
        yield
    finally:
        for fd in fds:
            os.close(fd)  # releases the lock


@contextlib.contextmanager
def together() -> Iterator[None]:
    """Files written with :func:`atomic_file` inside the block take their names at its end, all of them or none."""
    global _pending
    if _pending is not None:  # nested: the outer block commits
        yield
        return
    _pending = []
    try:
        yield
        with _held(), _group_lock([target for _, target, _ in _pending]):
            while _pending:
                tmp, target, _ = _pending.pop(0)
                _commit(tmp, target)
    except BaseException:
        for tmp, _, made in _pending:
            _discard(tmp, made)
        raise
    finally:
        _pending = None


def replace_folder(source: str | Path, target: str | Path) -> None:
    """Move the finished folder ``source`` onto ``target`` (one file system): the name changes at once.

    An old ``target`` (the caller decided it may go) is moved aside first and removed after, so the
    name always holds a whole folder, the old one or the new one.
    """
    source, target = _real(source), _real(target)
    parent, name = os.path.split(target)
    aside = None
    with _held():
        if os.path.isdir(target) and os.listdir(target):
            aside = tempfile.mkdtemp(dir=parent, prefix=f".{name}.", suffix=".old")
            os.rename(target, aside)  # onto the empty folder mkdtemp made
        try:
            os.rename(source, target)  # replaces an empty target
        except BaseException:
            if aside is not None:  # the old folder takes its name back
                os.rename(aside, target)
            raise
        _committed.add(target)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def _disk_full(folder: str | Path) -> bool:
    """Whether the file system of ``folder`` (or its nearest existing parent) has next to no room left."""
    path = os.path.abspath(folder)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free < DISK_FULL


def out_of_room(
    error: BaseException, path: str | Path, what: str = "cannot write", hint: str | None = None
) -> InputError | None:
    """The one line for a write that failed for want of room (see :data:`NO_ROOM`), or None for any other failure.

    The errno comes from an ``OSError``, from the ``(os error N)`` a Rust library (safetensors)
    puts in its message, or SQLite's ``SQLITE_FULL``. The line names ``path`` and says how to make
    room; the caller raises it ``from None`` once its partial output is removed, so nothing that
    looks finished is left.
    """
    code = error.errno if isinstance(error, OSError) else None
    if code is None and (found := _OS_ERROR.search(str(error))):
        code = int(found.group(1))
    if code is None and getattr(error, "sqlite_errorcode", None) == SQLITE_FULL:  # no errno: the disk is full
        code = errno.ENOSPC
    if code not in NO_ROOM:
        return None
    return InputError(
        f"{what}: {NO_ROOM[code]}",
        path=str(path),
        hint=hint or "free space (or raise the limit or quota) and run again; nothing was written there",
    )


@contextlib.contextmanager
def disk_errors(what: str, folder: str | Path, hint: str) -> Iterator[None]:
    """Inside the block, a write into ``folder`` that fails for want of room is an ``InputError`` naming ``what``.

    Libraries report a full disk in their own words (torch: ``unexpected pos``, safetensors:
    ``SafetensorError``): :func:`out_of_room` reads the errno where there is one, and otherwise any
    error counts when the disk is full afterwards; an ``OSError`` is always a line (its own reason).
    Other errors pass through unchanged.
    """
    try:
        yield
    except InputError:
        raise
    except Exception as e:
        if line := out_of_room(e, folder, f"cannot save {what}", hint):
            raise line from None
        if isinstance(e, OSError):
            reason = e.strerror or str(e)
        elif _disk_full(folder):
            reason = "no space left on the device"
        else:
            raise
        raise InputError(f"cannot save {what}: {reason}", path=str(folder), hint=hint) from None


@contextlib.contextmanager
def exclusive_lock(path: str | Path, busy: Callable[[str], InputError], *, remove: bool = False) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created when missing, ``pid N`` written in it) for the block; when
    another process holds it, raise ``busy(its pid line)`` at once: one run at a time, never a wait.

    ``remove``: the file goes when the block ends, while still held. A process that opened it before then finds,
    once it holds the lock, that the name is another file (or none) and takes the lock again on the name.
    """
    path = str(path)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            try:
                owner = Path(path).read_text(encoding="utf-8").strip()
            except OSError:  # removed by its holder in between
                owner = ""
            raise busy(owner or "another process") from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        os.close(fd)  # the holder before us removed the file we had opened: lock the name's file instead
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        yield
    finally:
        if remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        os.close(fd)  # closing the descriptor releases the lock


def run_lock(output: str | Path, what: str) -> contextlib.AbstractContextManager[None]:
    """The lock of one run writing its ``what`` to ``output`` (``.NAME.lock`` beside it, removed at the end): a
    second run onto the same file while one runs is one line, before any work, not a file holding one run's half
    of what both meant to write (two ``generate`` runs growing one pool with two models)."""
    target = Path(output)
    lock = target.parent / f".{target.name}.lock"

    def busy(owner: str) -> InputError:
        return InputError(
            f"another run is writing its {what} to this file ({owner})",
            path=str(output),
            hint="wait for it to finish and run this one on its output, or write to another file",
        )

    if not target.parent.is_dir():  # claim_outputs creates the folder later; nothing can hold a lock there yet
        return contextlib.nullcontext()
    return exclusive_lock(lock, busy, remove=True)
