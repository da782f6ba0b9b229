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


# The layers, lowest first. A module of a layer imports from its own layer, the layers before
# it and the shared modules at the top of the package, never from a layer after it.
LAYERS = ("store", "agent", "analysis", "peers", "tuning", "advisor", "report", "mcp", "cli")
# The shared modules every layer may use; they import only from each other.
SHARED = ("errors", "validation", "frames", "_docs", "_plotting", "_progress", "_sql")
# The package's own entry points: they gather the public names of every layer.
ENTRY_POINTS = ("htm_analytics", "htm_analytics.__main__", "htm_analytics._moved")
# Only the store opens connections or runs SQL: nothing else imports a database driver.
DRIVERS = ("psycopg", "psycopg_pool", "pgvector", "sqlite3", "duckdb")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in (ROOT / "htm_analytics").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every import of ``name``'s source, wherever it stands (functions and TYPE_CHECKING
    blocks included), as absolute module names."""
    import ast

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            # `from x import y` imports the module x.y where there is one
            found.update(f"{target}.{alias.name}" for alias in node.names
                         if f"{target}.{alias.name}" in modules)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _module_imports() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_modules_import_without_cycles() -> None:
    import networkx as nx

    graph = _module_imports()
    edges = nx.DiGraph([(a, b) for a, targets in graph.items() for b in targets
                        if b in graph and a != b])
    assert len(graph) > 60 and "htm_analytics.store.search" in graph
    assert nx.is_directed_acyclic_graph(edges), nx.find_cycle(edges)


def test_every_module_is_in_a_layer() -> None:
    for name in _modules():
        assert name in ENTRY_POINTS or _layer(name) in LAYERS or _layer(name) in SHARED, name


def test_layers_import_only_downwards() -> None:
    graph = _module_imports()
    for module, targets in graph.items():
        if module in ENTRY_POINTS:
            continue
        layer = _layer(module)
        for target in (t for t in targets if t.startswith("htm_analytics")):
            below = _layer(target)
            if layer in SHARED:
                allowed = below in SHARED
            else:
                allowed = below in SHARED or (
                    below in LAYERS and LAYERS.index(below) <= LAYERS.index(layer))
            assert allowed, f"{module} ({layer}) imports {target}"


def test_only_the_store_talks_to_databases() -> None:
    """No module outside ``htm_analytics/store/`` imports a database driver, nor the store's
    private modules (``store._base``, ``store._search_sql``...)."""
    graph = _module_imports()
    for module, targets in graph.items():
        if _layer(module) == "store":
            continue
        drivers = {t for t in targets if t.split(".")[0] in DRIVERS}
        assert not drivers, f"{module} imports {drivers}"
        internals = {t for t in targets if t.startswith("htm_analytics.store._")}
        assert not internals, f"{module} imports the store's modules {internals}"


def test_no_layer_imports_another_layers_private_names() -> None:
    """A name with a leading underscore is its layer's own: another layer that needs it
    gets a public name, so that the layer can change it without breaking its neighbours."""
    import ast

    found = []
    for module, path in _modules().items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package.split(".")[: len(package.split(".")) - node.level + 1] \
                if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            if target.startswith("htm_analytics") and _layer(target) != _layer(module):
                found += [f"{module} imports {target}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, found


MAX_MODULE_LINES = 500  # the house rule: a longer module is split by theme


def test_no_module_is_over_the_size_rule() -> None:
    """The package's, the tests' and the benchmarks' modules stay short enough to read."""
    long = {str(path.relative_to(ROOT)): lines
            for folder in ("htm_analytics", "tests", "benchmarks", "scripts")
            for path in (ROOT / folder).rglob("*.py")
            if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def test_the_layering_test_sees_what_it_checks() -> None:
    """The checks above are only as good as the import graph: it must hold the imports
    made in functions and under TYPE_CHECKING, and edges between sibling modules."""
    graph = _module_imports()
    assert "htm_analytics.store.memory" in graph["htm_analytics.agent.datasets"] \
        or "htm_analytics.store" in graph["htm_analytics.agent.datasets"]  # TYPE_CHECKING
    assert "htm_analytics.peers" in graph["htm_analytics.cli.imports"]  # inside a function
    assert "htm_analytics.tuning.plots" in graph["htm_analytics.tuning.benchmark"]


def test_modules_of_the_previous_release_import_with_a_warning() -> None:
    """Each moved module imports by its old path (and as an attribute of the package), is the
    module at its new path, and says where it moved."""
    script = """
import importlib, json, warnings
import htm_analytics
from htm_analytics._moved import MOVED_MODULES
found = {}
for old, new in MOVED_MODULES.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    found[old] = [module is importlib.import_module(new),
                  [str(w.message) for w in caught if w.category is DeprecationWarning],
                  getattr(htm_analytics, old.rpartition(".")[2]) is module]
print(json.dumps(found))
"""
    import json

    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, check=True)
    found = json.loads(result.stdout)
    assert len(found) >= 20
    for old, (same, warnings, attribute) in found.items():
        assert same and attribute, old
        assert len(warnings) == 1 and "moved to htm_analytics." in warnings[0], old


def test_docstring_examples_run() -> None:
    # numpydoc "Examples" sections that need no database are doctests: run them, so that the
    # sentences they show stay the ones the code writes.
    import doctest
    import importlib

    attempted = 0
    for name, path in _modules().items():
        if ">>>" not in path.read_text():
            continue
        result = doctest.testmod(importlib.import_module(name), report=False,
                                 optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
        assert result.failed == 0, name
        attempted += result.attempted
    assert attempted >= 4


def test_module_level_imports_are_declared_dependencies() -> None:
    # What a module imports when it loads must come with `pip install htm-analytics`: a
    # package of an extra (test, minilm...) may only be imported where it is used, or by a
    # module of that extra's own (the MCP server, loaded by `htm-analytics mcp` alone).
    extras = {"htm_analytics.mcp.server": {"mcp"}}
    import ast
    import re
    import sys
    import tomllib
    from importlib.metadata import packages_distributions

    def normal(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {normal(re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0])
                for spec in project["dependencies"]}
    distributions = packages_distributions()
    undeclared = []
    for name, path in _modules().items():
        for node in ast.parse(path.read_text()).body:  # the module's own level only
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top in sys.stdlib_module_names or top in ("htm_analytics", "__future__") \
                        or top in extras.get(name, ()):
                    continue
                if not {normal(d) for d in distributions.get(top, [top])} & declared:
                    undeclared.append(f"{name}: {top}")
    assert not undeclared, undeclared
