"""A real ``cheems annotate serve`` on loopback for the annotation tests, and small project builders."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from cheems.annotate.people import People, Person, ProjectSettings
from cheems.annotate.store import Project
from cheems.data.schema import Record
from helpers import free_port, stop_process


def team(annotators: int = 5, reviewers: int = 1, admins: int = 1, categories: dict | None = None) -> People:
    """ann-01.., rev-01.., lead; ``categories`` maps a name to its declared categories."""
    people = [
        Person(name=f"ann-{i:02d}", categories=(categories or {}).get(f"ann-{i:02d}", []))
        for i in range(1, annotators + 1)
    ]
    people += [Person(name=f"rev-{i:02d}", role="reviewer") for i in range(1, reviewers + 1)]
    people += [Person(name="lead" if i == 1 else f"lead-{i}", role="admin") for i in range(1, admins + 1)]
    return People(people=people)


def prompt(pid: str, n: int = 3, category: str = "数学", rank: dict | None = None) -> Record:
    """A prompt with responses r1..rn whose texts say which they are."""
    return Record.model_validate(
        {
            "id": pid,
            "input": f"问题 {pid}",
            "category": [category],
            "responses": [{"id": f"r{i}", "content": f"{pid} 的回答 {i}"} for i in range(1, n + 1)],
            "rank": rank,
        }
    )


def make_project(folder: Path, records, people: People | None = None, gold=(), **settings) -> tuple[Project, dict]:
    """Project.create in ``folder``; returns the project and the tokens."""
    project, tokens, _ = Project.create(folder, records, people or team(), gold, ProjectSettings(**settings))
    return project, tokens


class Server:
    """``python -m cheems annotate serve DIR`` in a subprocess, on a free loopback port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> "Server":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cheems", "annotate", "serve", str(self.folder), "--port", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "COLUMNS": "200"},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out, errs = self.proc.communicate()
                raise RuntimeError(f"server exited {self.proc.returncode}: {errs.decode()}")
            try:
                httpx.get(self.url + "/api/me", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not start in time")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        stop_process(self.proc)

    def client(self, token: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)


def ids_of(task: dict) -> dict[str, str]:
    """Key -> response id, read from the responses' texts (``... 的回答 3`` is r3)."""
    return {r["key"]: "r" + re.search(r"回答 (\d+)$", r["content"]).group(1) for r in task["responses"]}


def answer(task: dict, ranking_by_id: str, override: bool = False) -> dict:
    """An answer in the task's keys from a ranking by id (``"r1>r2=r3"``); scores follow the ranking."""
    key = {rid: k for k, rid in ids_of(task).items()}
    levels = [[key[r] for r in level.split("=")] for level in ranking_by_id.split(">")]
    scores = {k: 5 - i for i, level in enumerate(levels) for k in level}
    return {"scores": scores, "ranking": ">".join("=".join(level) for level in levels), "override": override}
