"""The public API as users' tools see it (issue 32): type checkers see every ``cheems.*`` name with its real type
(the ``TYPE_CHECKING`` block of ``cheems/__init__.py``, the ``py.typed`` marker), and ``help()`` and
``inspect.signature`` see each public callable's own signature and docstring."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pydoc
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cheems

INIT = Path(cheems.__file__)


def _typed_names() -> dict[str, tuple[str, str]]:
    """``{public name: (module, attribute)}`` as the ``TYPE_CHECKING`` block of ``cheems/__init__.py`` imports them
    (``name = imported`` aliases followed)."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    imported: dict[str, tuple[str, str]] = {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported[alias.asname or alias.name] = (str(node.module), alias.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            imported[node.targets[0].id] = imported.pop(node.value.id)  # type: ignore[attr-defined]
    return imported


def _function(name: str) -> object:
    module, attr = _typed_names()[name]
    return getattr(importlib.import_module(module), attr)


def test_type_checkers_see_every_public_name_as_what_run_time_gives():
    """Each name ``__getattr__`` exports lazily is imported under ``TYPE_CHECKING`` from where it really lives."""
    typed = _typed_names()
    assert sorted(typed) == sorted(cheems.__all__)
    for name in cheems.__all__:
        found, real = getattr(cheems, name), _function(name)
        assert inspect.unwrap(found) is real or (inspect.ismodule(found) and callable(found)), name


CALLABLES = [n for n in cheems.__all__ if not inspect.isclass(getattr(cheems, n)) and callable(getattr(cheems, n))]


@pytest.mark.parametrize("name", CALLABLES)
def test_every_public_callable_shows_its_own_signature_and_docstring(name):
    """``cheems.load_bench`` (checked) and ``cheems.evaluate`` (a package, called) read as the function they call:
    ``inspect.signature`` gives its parameters, not ``(*args, **kwargs)``, and ``help()`` its docstring."""
    public, real = getattr(cheems, name), _function(name)
    assert inspect.isfunction(real)
    assert inspect.signature(public) == inspect.signature(real)
    doc = inspect.getdoc(real)
    assert doc and doc in (inspect.getdoc(public) or "")
    shown = pydoc.render_doc(public, renderer=pydoc.plaintext)
    assert str(inspect.signature(real)) in shown and doc.splitlines()[0] in shown


def test_help_of_the_callable_packages_shows_the_function_not_the_package_notes():
    assert {"evaluate", "judge", "train"} <= set(CALLABLES)
    for name in ("evaluate", "judge", "train"):
        package_notes = inspect.getdoc(importlib.import_module(f"cheems.{name}").__dict__["__doc__"])
        shown = pydoc.render_doc(getattr(cheems, name), renderer=pydoc.plaintext)
        assert f"cheems.{name} - {name}(" in shown, shown[:300]
        assert package_notes is None or package_notes.splitlines()[0] not in shown
    assert "(*args" not in str(inspect.signature(cheems.evaluate)) + str(inspect.signature(cheems.train))


USER_SCRIPT = """\
import cheems

bench = cheems.load_bench(["open.jsonl"])
reveal_type(bench)
reveal_type(cheems.load_scorer("length"))
reveal_type(cheems.evaluate(bench, cheems.load_scorer("length"), resamples=0))
cheems.evaluate(bench, cheems.load_scorer("length"), resample=0)
cheems.load_benches(["open.jsonl"])
reveal_type(cheems.__version__)
"""
# only cheems is read: torch, numpy and pydantic unread keep the check a few seconds (their names are then Any)
MYPY_INI = "[mypy]\nfollow_imports = skip\n\n[mypy-cheems.*]\nfollow_imports = normal\n"


def test_a_user_script_type_checks_against_the_installed_wheel(tmp_path):
    """The package built and installed as ``pip install .`` does (py.typed shipped): a user's mypy sees the report
    type of ``cheems.evaluate(...)``, and a misspelt keyword or name is an error, not an ``Any``."""
    root, proj, site = INIT.parents[2], tmp_path / "proj", tmp_path / "site"
    proj.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, proj / name)
    shutil.copytree(root / "src", proj / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*pip, "--target", str(site), str(proj)], check=True, capture_output=True, cwd=tmp_path)
    assert (site / "cheems" / "py.typed").is_file()
    (tmp_path / "user.py").write_text(USER_SCRIPT, encoding="utf-8")
    (tmp_path / "mypy.ini").write_text(MYPY_INI, encoding="utf-8")
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", "cache", "user.py"]
    env = {**os.environ, "PYTHONPATH": str(site)}  # the installed copy, before any other cheems
    out = subprocess.run(mypy, capture_output=True, text=True, cwd=tmp_path, env=env).stdout
    revealed = re.findall(r'Revealed type is "(.+)"', out)
    assert revealed == [
        "dict[str, list[cheems.data.schema.Record]]",
        "cheems.models.base.Scorer",
        "cheems.evaluate.bench.EvalReport",
        "str",
    ], out
    assert re.search(r'user\.py:7: error: Unexpected keyword argument "resample"', out), out
    assert re.search(r'user\.py:8: error: Module has no attribute "load_benches"', out), out
    assert "Found 2 errors in 1 file" in out, out
