"""A real ``cheems serve MODEL`` on loopback for the serve tests, fp32, on a free port: :class:`ServedApp`, the
server ``cheems serve`` runs, under uvicorn in a thread of the test process (no interpreter, torch import or CLI to
start: most tests), and :class:`RewardServer`, the command as a subprocess (for what only a process shows: its ready
line, its exit on SIGTERM, the key read from its environment, the address it listens on)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from helpers import free_port, stop_process


class Served:
    """What a test asks of a running server, wherever it runs: its URL, ``GET /stats``, a wait for a state."""

    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict:
        return httpx.get(self.url + "/stats", timeout=10).json()

    def wait_for(self, key: str, value: int, timeout: float = 30) -> None:
        """Until ``GET /stats`` shows ``key`` at ``value`` (a state of the server: the event a test waits for)."""
        deadline = time.monotonic() + timeout
        while self.stats()[key] != value:
            assert time.monotonic() < deadline, f"/stats {key} never reached {value}: {self.stats()}"
            time.sleep(0.01)


class LogRecords(logging.Handler):
    """The log records of WARNING and above, formatted as uvicorn's stderr shows them (``ERROR: ...`` and any
    traceback): what a server in a thread would have written to its stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("%(levelname)s: %(name)s: %(message)s"))
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        # attached to the root and to uvicorn's own logger: a record that reaches both is shown once
        return "\n".join(self.format(r) for r in dict.fromkeys(self.records))


class ServedApp(Served):
    """The server of ``cheems serve MODEL --dtype fp32`` (:func:`cheems.serve.reward_app.reward_server`: the same
    checks, app and uvicorn server) run in a thread of this process on a free loopback port. ``options``: the
    command's settings by field name (``max_batch=2``, ``truncate="error"``; ``max_length`` is a scoring one)."""

    def __init__(self, model: Path | str, **options: Any) -> None:
        from cheems.models.scoring import ScoringSettings
        from cheems.serve.serve_settings import ServeSettings

        scoring = {k: options.pop(k) for k in list(options) if k in ScoringSettings.model_fields}
        self.scoring = ScoringSettings(model=str(model), dtype="fp32", **scoring)
        self.settings = ServeSettings(**options)
        self.logs = LogRecords()
        self.server: Any = None
        self.thread: threading.Thread | None = None

    def start(self) -> ServedApp:
        """Start it; returns at once: its socket listens already, so a request waits in the backlog until uvicorn
        has started and takes it (a server that fails to start closes the socket: its requests fail)."""
        from cheems.serve.reward_app import reward_server

        for name in ("", "uvicorn"):
            logging.getLogger(name).addHandler(self.logs)
        self.server, sock = reward_server(self.scoring, self.settings, port=0, own_logging=False)
        self.port = sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, args=(sock,), name=f"cheems-serve-{self.port}", daemon=True)
        self.thread.start()
        return self

    def _run(self, sock: Any) -> None:
        try:
            self.server.run(sockets=[sock])
        finally:
            sock.close()

    def errors(self) -> str:
        """What the server logged at WARNING or above so far, as its stderr would show it."""
        return self.logs.text()

    def stop(self) -> None:
        """Stop as uvicorn does on a signal (its loop sees ``should_exit``), and wait for the thread to end."""
        if self.thread is not None and self.thread.is_alive():
            self.server.should_exit = True
            self.thread.join(30)
            assert not self.thread.is_alive(), "the server thread did not end within 30 s"
        for name in ("", "uvicorn"):
            logging.getLogger(name).removeHandler(self.logs)

    def __enter__(self) -> ServedApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RewardServer(Served):
    """``python -m cheems serve MODEL --dtype fp32 ARGS`` on a free loopback port; its stderr kept in a file."""

    def __init__(self, model: Path | str, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.args = [str(model), "--port", str(self.port), "--dtype", "fp32", *args]
        self.env = {**os.environ, "COLUMNS": "200", **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.stderr = tempfile.TemporaryFile()

    def start(self) -> RewardServer:
        """Start it; returns once it has printed its address (the socket is bound and listening by then)."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cheems", "serve", *self.args],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=self.env,
            text=True,
        )
        line = self.proc.stdout.readline()  # the ready line, or "" when it exited
        if not line.startswith("serving"):
            self.proc.wait(timeout=30)
            raise RuntimeError(f"server exited {self.proc.returncode}: {self.errors()}")
        return self

    def errors(self) -> str:
        """What the server wrote to stderr so far."""
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")

    def terminate(self) -> int:
        """SIGTERM; the exit status (it must exit within 20 s)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)

    def stop(self) -> None:
        stop_process(self.proc)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> RewardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
