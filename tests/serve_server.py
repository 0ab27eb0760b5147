"""A real ``cheems serve MODEL`` on loopback for the serve tests (a subprocess, fp32, a free port)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from helpers import free_port, stop_process


class RewardServer:
    """``python -m cheems serve MODEL --dtype fp32 ARGS`` on a free loopback port; its stderr kept in a file."""

    def __init__(self, model: Path | str, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
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

    def stats(self) -> dict:
        return httpx.get(self.url + "/stats", timeout=10).json()

    def wait_for(self, key: str, value: int, timeout: float = 30) -> None:
        """Until ``GET /stats`` shows ``key`` at ``value`` (a state of the server: the event a test waits for)."""
        deadline = time.monotonic() + timeout
        while self.stats()[key] != value:
            assert time.monotonic() < deadline, f"/stats {key} never reached {value}: {self.stats()}"
            time.sleep(0.01)

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
