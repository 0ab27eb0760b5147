"""The flow runs one way: every import inside cheems points down the list of layers (function-level ones too);
no module imports itself back through others; each module's name says what it holds once."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "cheems"
LAYERS = [
    # below everything
    {
        "errors",
        "arguments",
        "runtime",
        "cachedb",
        "registries",
        "settings",
        "yamlfile",
        "outputs",
        "terminal",
        "http_serving",
    },
    {"data"},
    {"ranking"},
    {"llm"},  # clients of chat models (and the one HTTP client)
    {"judge"},  # the LLM judge
    {"annotate"},  # the human annotation app
    {"curate"},
    {"models"},
    {"serve"},  # cheems serve: the reward model over HTTP for RL trainers (reads models only)
    {"rewards"},  # reward functions for RL trainers (TRL, verl): a model or a reward server
    {"prompts"},  # the prompt pool: dedup, decontaminate, categorise (the classifier embeds with a model)
    {"metrics"},  # the numbers of judged pairs: a module per benchmark, the --compat rules, the bootstrap
    {"evaluate"},  # the run: bench in, judged pairs, report, checks, suites
    {"analysis"},  # over finished runs: compare, leaderboard, correlate, best-of-N, win rate, bias, pool plots
    {"train"},
    {"workflows"},
    {"cli", "__main__"},
    # the package's face: its type-checking block names every layer's public functions (imported lazily at run time)
    {"__init__"},
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


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {_module(p): p for p in FILES}


def _targets(path: Path) -> set[str]:
    """The cheems modules a file imports: ``from cheems.x import y`` is ``cheems.x.y`` where that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cheems"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            found |= subs or {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("cheems.")}
    return found & MODULES.keys()


def test_no_import_circles():
    """Not even through function-level or type-checking imports: a circle is two modules that are one."""
    graph = nx.DiGraph()
    for name, path in MODULES.items():
        graph.add_edges_from((name, target) for target in _targets(path) if target != name)
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert circles == []


def test_models_do_not_import_the_annotation_app():
    """Scorers reach servers through cheems.llm's client, not through the package of the human annotation app."""
    for name, path in MODULES.items():
        if name.startswith("cheems.models"):
            assert not {t for t in _targets(path) if t.startswith("cheems.annotate")}, name


def test_module_names_are_unique():
    """One name, one module; a command's module may share its library module's name (cli/bon.py, analysis/bon.py)."""
    names = Counter(p.name for p in FILES if p.name != "__init__.py" and p.parent.name != "cli")
    assert [name for name, n in names.items() if n > 1] == []


# The functions a newcomer reads first stay short enough to read top to bottom (issue 32: they had grown back):
# the training loop (packing and the length head in their own functions) and the commands that are
# parse -> one library call -> print. The limit counts the body's lines after the docstring.
SHORT = {("train/trainer.py", "train_reward_model"): 56, ("cli/main.py", "eval_"): 20, ("cli/suite.py", "suite"): 20}


@pytest.mark.parametrize(("file", "function"), sorted(SHORT))
def test_the_functions_read_first_stay_short(file, function):
    tree = ast.parse((SRC / file).read_text(encoding="utf-8"))
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    assert len(found) == 1
    body = found[0].body[1:] if ast.get_docstring(found[0]) else found[0].body
    lines = found[0].end_lineno - body[0].lineno + 1  # type: ignore[operator]
    assert lines <= SHORT[file, function], f"{file} {function}: {lines} lines"
