"""The flow runs one way: every import inside cheems points down the list of layers (function-level ones too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "cheems"
LAYERS = [
    {"__init__", "errors", "runtime", "cachedb", "registries"},  # below everything
    {"data"},
    {"ranking"},
    {"annotate"},
    {"curate"},
    {"models"},
    {"evaluate"},
    {"train"},
    {"workflows"},
    {"cli", "__main__"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _part(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every ``cheems.*`` import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cheems."):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("cheems.")]
    return found


FILES = sorted(p for p in SRC.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(SRC)) for p in FILES])
def test_imports_point_down_the_flow(path):
    rel = path.relative_to(SRC)
    own = rel.parts[0].removesuffix(".py")
    assert own in RANK, f"{rel}: a new top-level module belongs in LAYERS"
    for line, module in imports(path):
        target = _part(module)
        assert RANK[target] <= RANK[own], f"{rel}:{line} imports {module}, later in the flow than {own}"
        if own == "cli" and rel.name != "main.py":
            assert module != "cheems.cli.main", f"{rel}:{line}: cli.main imports the commands, not the other way"
