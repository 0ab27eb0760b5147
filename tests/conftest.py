"""Shared test fixtures: where the shared real data lives (skip with a reason when absent), a tiny Qwen2-style
tokenizer, a served annotation project, the benchmark fixtures under tests/data imported as bench files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


def pytest_configure(config: pytest.Config) -> None:
    # here, not in pyproject.toml's [tool.pytest.ini_options]: one place with the fixtures
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA device (benchmarks/gpu_check.sh runs them); skips with 'no CUDA device'"
    )


@pytest.fixture(scope="session")
def shared_data() -> Callable[[str], Path]:
    """``shared_data("oasst1_zh")``: that data set's folder in ``../shared/data`` next to the repository; a test
    that needs it skips in a user's clone, naming the data."""

    def folder(name: str) -> Path:
        path = SHARED / "data" / name
        if not path.is_dir():
            pytest.skip(f"needs the real {name} data at {path} (beside the repository in the team's checkout)")
        return path

    return folder


@pytest.fixture(scope="session")
def qwen2_tokenizer_dir(tmp_path_factory) -> Path:
    """A Qwen2-style tokenizer folder (small byte-level BPE, Qwen's special tokens and chat template), built
    once per session by :func:`tiny_models.build_tiny_tokenizer`: the causal tests run in every checkout."""
    from tiny_models import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("qwen2-tokenizer"))


@pytest.fixture
def serve_project(tmp_path):
    """``serve_project(records, people=None, gold=(), **settings) -> (Server, tokens)``: a new project in
    ``tmp_path / "project"`` served by a real ``cheems annotate serve`` on loopback, stopped after the test."""
    from annotate_server import Server, make_project

    servers = []

    def start(records, people=None, gold=(), **settings):
        _, tokens = make_project(tmp_path / "project", records, people, gold, **settings)
        server = Server(tmp_path / "project").start()
        servers.append(server)
        return server, tokens

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def reward_app():
    """``reward_app(model, **options) -> ServedApp``: the server ``cheems serve MODEL`` runs, under uvicorn in a
    thread of this process (:class:`serve_server.ServedApp`), one per (model, options) in the module: the tests
    that give the same settings share it, /stats counters included (a test that counts takes a ServedApp of its
    own). All stop at the module's end."""
    from serve_server import ServedApp

    apps: dict[tuple, ServedApp] = {}

    def get(model: Path | str, **options: object) -> ServedApp:
        key = (str(model), tuple(sorted(options.items())))
        if key not in apps:
            apps[key] = ServedApp(model, **options).start()
        return apps[key]

    yield get
    for app in apps.values():
        app.stop()


@pytest.fixture
def imported(tmp_path) -> dict[str, Path]:
    """Each benchmark fixture under tests/data imported as a bench file (the file stem names the subset)."""
    import json

    from cheems.data.importers import import_file
    from helpers import JUDGEBENCH, RB2, RMB, RMBENCH

    out = {}
    for name, source, fmt in (
        ("rmbench", RMBENCH, "rmbench"),
        ("rmb_pairs", RMB / "Pairwise_set", "rmb"),
        ("rmb_bon", RMB / "BoN_set", "rmb"),
        ("rb2", RB2, "rewardbench2"),
        ("judgebench", JUDGEBENCH, "judgebench"),
    ):
        path = out[name] = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in import_file(source, fmt).records), "utf-8")
    return out


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory, monkeypatch) -> None:
    """Each test's caches (scores, verdicts, samples) in a folder of its own: the commands and the library both
    default to $CHEEMS_CACHE_DIR, and a score cached by another test, or by a developer's own runs, must not answer
    for a scorer whose calls a test counts."""
    monkeypatch.setenv("CHEEMS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def cheems_cli(monkeypatch, capsys):
    """``cheems_cli(*args, cwd=None, env=None)``: the command through its real entry point in this process
    (:func:`helpers.run_main`), with ``run_cheems``'s result; for tests about what a command does, not about the
    process (signals, exit of a real interpreter, import-time output), which keep ``run_cheems``."""
    from helpers import run_main

    def run(*args: object, cwd: Path | None = None, env: dict[str, str] | None = None):
        if cwd is not None:
            monkeypatch.chdir(cwd)
        return run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env=env)

    return run


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models gain nothing from threads, and two OpenMP threads crawl on a shared 2-core box: a test module
    that trains them asks for this with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
