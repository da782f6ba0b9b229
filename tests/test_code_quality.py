"""The code is ruff- and mypy-clean, as configured in pyproject.toml: the suite checks it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = _run("mypy", "--no-incremental")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def _module_imports() -> dict[str, set[str]]:
    """Module-level imports between the package's modules (``htm_analytics.x`` names)."""
    import ast

    package = ROOT / "htm_analytics"
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        is_package = parts[-1] == "__init__"
        graph[name] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")[: len(name.split(".")) - node.level + is_package]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                targets = [target]
                if not node.module:  # `from . import x`: the submodules
                    targets = [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t.startswith("htm_analytics"))
    return graph


def test_modules_import_without_cycles() -> None:
    import networkx as nx

    graph = _module_imports()
    edges = nx.DiGraph([(a, b) for a, targets in graph.items() for b in targets
                        if b in graph and not a.startswith(b)])  # a package's own __init__
    assert len(graph) > 40 and "htm_analytics.store.search" in graph
    assert nx.is_directed_acyclic_graph(edges), nx.find_cycle(edges)


def test_only_the_store_talks_to_postgresql() -> None:
    graph = _module_imports()
    surfaces = ["htm_analytics.cli", "htm_analytics.report", "htm_analytics.widgets",
                "htm_analytics.tags", "htm_analytics.trends", "htm_analytics.robots",
                "htm_analytics.indexes", "htm_analytics.htm", "htm_analytics.evaluation",
                "htm_analytics.conversations", "htm_analytics.conversation_formats"]
    for module in surfaces:
        path = ROOT / module.replace(".", "/")
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
        for file in files:
            source = file.read_text()
            assert "import psycopg" not in source and "from psycopg" not in source, file
        for name in (n for n in graph if n == module or n.startswith(module + ".")):
            assert not any(t.startswith("htm_analytics.store.") and t != "htm_analytics.store"
                           for t in graph[name]), name
