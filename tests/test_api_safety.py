"""The public Python API is as safe as the commands (issue 31): its version, its outputs, its argument types."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import cheems
from helpers import run_cheems

SRC = Path(cheems.__file__).resolve().parents[1]
PYPROJECT = SRC.parent / "pyproject.toml"


def _pyproject_version() -> str:
    found = re.search(r'^version\s*=\s*"([^"]+)"', PYPROJECT.read_text(encoding="utf-8"), re.MULTILINE)
    assert found
    return found.group(1)


# ---------------------------------------------------------------------------- version


def test_version_is_the_installed_packages_and_the_commands():
    assert cheems.__version__ == metadata.version("cheems") == _pyproject_version()
    proc = run_cheems("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"cheems {cheems.__version__}"


def test_version_of_a_source_checkout_that_is_not_installed():
    """``python -S``: no site-packages, so no metadata; the checkout's pyproject.toml gives the version."""
    heavy = "{m.split('.')[0] for m in sys.modules} & {'torch', 'numpy', 'pydantic'}"
    code = f"import sys, cheems; print(cheems.__version__); print(sorted({heavy}))"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split("\n")[:2] == [_pyproject_version(), "[]"]
