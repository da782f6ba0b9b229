"""Old module paths, kept importable for one release.

The modules moved into packages by layer (``store``, ``agent``, ``analysis``, ``tuning``,
``report``); importing one by its old path (``htm_analytics.tags``) gives the module at its
new path (``htm_analytics.analysis.tags``) with a :class:`DeprecationWarning` naming it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

__all__ = ["MOVED_MODULES", "install"]

MOVED_MODULES = {
    f"htm_analytics.{old}": f"htm_analytics.{new}" for old, new in {
        "connection": "store.connection", "cache": "store.cache", "display": "store.display",
        "snapshot": "store.snapshot", "table_recall": "store.table_recall",
        "htm": "agent.htm", "working_memory": "agent.working_memory",
        "embeddings": "agent.embeddings", "tokens": "agent.tokens",
        "timeframes": "agent.timeframes", "datasets": "agent.datasets",
        "tags": "analysis.tags", "trends": "analysis.trends", "robots": "analysis.robots",
        "indexes": "analysis.indexes",
        "tuning_advice": "tuning.advice", "tuning_plots": "tuning.plots",
        "evaluation": "tuning.evaluation",
        "report_render": "report.render", "report_advice": "report.advice",
        "widgets": "report.widgets", "demo": "report.demo",
    }.items()
}
"""Old module path -> the path it moved to."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of old paths with the module at its new path."""

    def find_spec(self, fullname: str, path: Any, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there (or from "
                      "htm_analytics)", DeprecationWarning, stacklevel=2)
        # The module itself: its attributes are kept, as it has them all already.
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported at its new path."""


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
