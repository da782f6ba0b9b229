"""htm_analytics: the HTM memory store on PostgreSQL + pgvector, and analytics over it.

The names below are imported when first used (PEP 562), so that ``import htm_analytics``
and ``htm-analytics --help`` do not load pandas, matplotlib and scipy before they are
needed; type checkers see the plain imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .advisor import AdvisorThresholds, advise
    from .cache import QueryCache
    from .connection import embedded_server_url, mask_url, resolve_database_url
    from .demo import demo_database_url, load_demo, run_demo
    from .embeddings import get_embedder
    from .errors import (
        ConcurrencyError,
        DatabaseConnectionError,
        DatabaseError,
        EmbeddingError,
        HTMError,
        NotFoundError,
        QueryTimeoutError,
        SchemaError,
        ValidationError,
    )
    from .evaluation import (
        RetrievalEvaluation,
        evaluate_retrieval,
        plot_retrieval,
        plot_retrieval_quality,
        read_labelled_queries,
        retrieval_quality,
    )
    from .htm import HTM
    from .indexes import index_usage, index_usage_delta, plot_index_usage, table_health
    from .report import Report, build_report
    from .robots import plot_robot_activity, plot_robot_overlap, robot_activity, robot_overlap
    from .snapshot import Snapshot, export_snapshot
    from .store import SCHEMA_VERSION, LongTermMemory, content_hash
    from .tags import (
        plot_popular_tags,
        plot_tag_cooccurrence,
        plot_tag_graph,
        plot_tag_hierarchy,
        popular_tags,
        tag_cooccurrence,
        tag_graph,
        tag_hierarchy,
        write_tag_graph,
    )
    from .timeframes import parse_timeframe
    from .tokens import count_tokens
    from .trends import (
        most_reinforced,
        plot_remember_count_distribution,
        plot_remember_trends,
        remember_count_distribution,
        remember_trends,
    )
    from .tuning import (
        benchmark_index_build,
        benchmark_recall,
        exact_neighbors,
        plot_recall_by_ef,
        plot_recall_latency,
    )
    from .tuning_advice import (
        EfSearchAdvice,
        concurrency_sweep,
        plot_concurrency,
        recommend_ef_search,
    )
    from .working_memory import WorkingMemory

# Where each public name lives: module -> names.
_LAZY: dict[str, tuple[str, ...]] = {
    "advisor": ("AdvisorThresholds", "advise",),
    "cache": ("QueryCache",),
    "connection": ("embedded_server_url", "mask_url", "resolve_database_url",),
    "demo": ("demo_database_url", "load_demo", "run_demo",),
    "embeddings": ("get_embedder",),
    "errors": (
        "ConcurrencyError", "DatabaseConnectionError", "DatabaseError", "EmbeddingError",
        "HTMError", "NotFoundError", "QueryTimeoutError", "SchemaError", "ValidationError",
    ),
    "evaluation": (
        "RetrievalEvaluation", "evaluate_retrieval", "plot_retrieval", "plot_retrieval_quality",
        "read_labelled_queries", "retrieval_quality",
    ),
    "htm": ("HTM",),
    "indexes": ("index_usage", "index_usage_delta", "plot_index_usage", "table_health",),
    "report": ("Report", "build_report",),
    "robots": ("plot_robot_activity", "plot_robot_overlap", "robot_activity", "robot_overlap",),
    "snapshot": ("Snapshot", "export_snapshot",),
    "store": ("SCHEMA_VERSION", "LongTermMemory", "content_hash",),
    "tags": (
        "plot_popular_tags", "plot_tag_cooccurrence", "plot_tag_graph", "plot_tag_hierarchy",
        "popular_tags", "tag_cooccurrence", "tag_graph", "tag_hierarchy", "write_tag_graph",
    ),
    "timeframes": ("parse_timeframe",),
    "tokens": ("count_tokens",),
    "trends": (
        "most_reinforced", "plot_remember_count_distribution", "plot_remember_trends",
        "remember_count_distribution", "remember_trends",
    ),
    "tuning": (
        "benchmark_index_build", "benchmark_recall", "exact_neighbors", "plot_recall_by_ef",
        "plot_recall_latency",
    ),
    "tuning_advice": (
        "EfSearchAdvice", "concurrency_sweep", "plot_concurrency", "recommend_ef_search",
    ),
    "working_memory": ("WorkingMemory",),
}
_MODULE_OF = {name: module for module, names in _LAZY.items() for name in names}


__version__ = "0.1.0"

__all__ = [
    "advise",
    "AdvisorThresholds",
    "recommend_ef_search",
    "EfSearchAdvice",
    "concurrency_sweep",
    "plot_concurrency",
    "HTM",
    "WorkingMemory",
    "get_embedder",
    "parse_timeframe",
    "LongTermMemory",
    "QueryCache",
    "HTMError",
    "ValidationError",
    "NotFoundError",
    "DatabaseError",
    "ConcurrencyError",
    "DatabaseConnectionError",
    "QueryTimeoutError",
    "SchemaError",
    "EmbeddingError",
    "index_usage",
    "index_usage_delta",
    "table_health",
    "plot_index_usage",
    "tag_cooccurrence",
    "tag_graph",
    "write_tag_graph",
    "tag_hierarchy",
    "popular_tags",
    "plot_tag_cooccurrence",
    "plot_tag_graph",
    "plot_tag_hierarchy",
    "plot_popular_tags",
    "remember_trends",
    "remember_count_distribution",
    "most_reinforced",
    "plot_remember_trends",
    "plot_remember_count_distribution",
    "robot_overlap",
    "robot_activity",
    "plot_robot_overlap",
    "plot_robot_activity",
    "export_snapshot",
    "benchmark_recall",
    "benchmark_index_build",
    "exact_neighbors",
    "plot_recall_latency",
    "plot_recall_by_ef",
    "retrieval_quality",
    "evaluate_retrieval",
    "RetrievalEvaluation",
    "read_labelled_queries",
    "plot_retrieval",
    "plot_retrieval_quality",
    "build_report",
    "Report",
    "load_demo",
    "demo_database_url",
    "run_demo",
    "count_tokens",
    "Snapshot",
    "SCHEMA_VERSION",
    "content_hash",
    "embedded_server_url",
    "mask_url",
    "resolve_database_url",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        if name.startswith("__"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:  # a submodule (``htm_analytics.store``), as an eager import made it available
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the submodule exists but needs something missing
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
