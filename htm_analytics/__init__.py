"""htm_analytics: the HTM memory store on PostgreSQL + pgvector, and analytics over it.

The package is built in layers, each importing only from those before it: ``store`` (every
read, write and search), ``agent`` (robots that remember and recall), ``analysis``
(DataFrames and plots), ``peers`` (other memory systems), ``tuning``, ``advisor``, ``report``,
``mcp`` and ``cli``. Every public name is importable from here, imported when first used
(PEP 562), so that ``import htm_analytics`` and ``htm-analytics --help`` do not load pandas,
matplotlib and scipy before they are needed; type checkers see the plain imports. See
docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _moved

if TYPE_CHECKING:
    from .advisor import (
        AdvisorThresholds,
        DriftThresholds,
        advise,
        collect_sample,
        drift_findings,
        history,
    )
    from .agent import (
        HTM,
        WorkingMemory,
        count_tokens,
        get_embedder,
        parse_timeframe,
    )
    from .analysis import (
        DecayPolicy,
        ExpiryPolicy,
        HygieneResult,
        index_usage,
        index_usage_delta,
        memory_growth,
        memory_hygiene,
        most_reinforced,
        near_duplicates,
        plot_index_usage,
        plot_popular_tags,
        plot_remember_count_distribution,
        plot_remember_trends,
        plot_robot_activity,
        plot_robot_overlap,
        plot_tag_cooccurrence,
        plot_tag_graph,
        plot_tag_hierarchy,
        popular_tags,
        remember_count_distribution,
        remember_trends,
        retention_what_if,
        robot_activity,
        robot_overlap,
        sensitive_memories,
        stale_memories,
        supersession_candidates,
        table_health,
        tag_cooccurrence,
        tag_graph,
        tag_graph_view,
        tag_hierarchy,
        unreachable_memories,
        write_tag_graph,
    )
    from .errors import (
        BenchmarkFormatError,
        ConcurrencyError,
        DatabaseConnectionError,
        DatabaseError,
        EmbeddingError,
        EmbeddingMismatchError,
        HistoryVersionError,
        HTMError,
        NoSoftDeleteError,
        NotAHistoryError,
        NotFoundError,
        QueryTimeoutError,
        SchemaError,
        ValidationError,
    )
    from .report import (
        Report,
        build_report,
        demo_database_url,
        load_demo,
        run_demo,
    )
    from .store import (
        SCHEMA_VERSION,
        LongTermMemory,
        QueryCache,
        Snapshot,
        content_hash,
        embedded_server_url,
        export_snapshot,
        mask_url,
        resolve_database_url,
    )
    from .tuning import (
        ConversationEvaluation,
        EfSearchAdvice,
        RetrievalEvaluation,
        benchmark_index_build,
        benchmark_recall,
        concurrency_sweep,
        describe_concurrency,
        evaluate_conversations,
        evaluate_retrieval,
        exact_neighbors,
        plot_concurrency,
        plot_conversations,
        plot_recall_by_ef,
        plot_recall_latency,
        plot_retrieval,
        plot_retrieval_quality,
        read_conversations,
        read_labelled_queries,
        recommend_ef_search,
        retrieval_quality,
    )

# Where each public name lives: package -> names.
_LAZY: dict[str, tuple[str, ...]] = {
    'advisor': (
        "AdvisorThresholds", "DriftThresholds", "advise", "collect_sample", "drift_findings",
        "history",
    ),
    'agent': (
        "HTM", "WorkingMemory", "count_tokens", "get_embedder", "parse_timeframe",
    ),
    'analysis': (
        "index_usage", "index_usage_delta", "most_reinforced", "plot_index_usage",
        "plot_popular_tags", "plot_remember_count_distribution", "plot_remember_trends",
        "plot_robot_activity", "plot_robot_overlap", "plot_tag_cooccurrence", "plot_tag_graph",
        "plot_tag_hierarchy", "popular_tags", "remember_count_distribution", "remember_trends",
        "robot_activity", "robot_overlap", "table_health", "tag_cooccurrence", "tag_graph",
        "tag_graph_view", "tag_hierarchy", "write_tag_graph", "HygieneResult", "memory_growth",
        "memory_hygiene", "near_duplicates", "sensitive_memories", "stale_memories",
        "unreachable_memories", "supersession_candidates", "retention_what_if",
        "ExpiryPolicy", "DecayPolicy",
    ),
    'errors': (
        "ConcurrencyError", "DatabaseConnectionError", "DatabaseError", "EmbeddingError",
        "EmbeddingMismatchError", "HTMError", "HistoryVersionError", "NoSoftDeleteError",
        "NotAHistoryError", "NotFoundError", "QueryTimeoutError", "SchemaError",
        "ValidationError", "BenchmarkFormatError",
    ),
    'report': (
        "Report", "build_report", "demo_database_url", "load_demo", "run_demo",
    ),
    'store': (
        "SCHEMA_VERSION", "LongTermMemory", "QueryCache", "Snapshot", "content_hash",
        "embedded_server_url", "export_snapshot", "mask_url", "resolve_database_url",
    ),
    'tuning': (
        "EfSearchAdvice", "RetrievalEvaluation", "benchmark_index_build", "benchmark_recall",
        "concurrency_sweep", "describe_concurrency", "evaluate_retrieval", "exact_neighbors",
        "plot_concurrency", "plot_recall_by_ef", "plot_recall_latency", "plot_retrieval",
        "plot_retrieval_quality", "read_labelled_queries", "recommend_ef_search",
        "retrieval_quality", "ConversationEvaluation", "evaluate_conversations",
        "plot_conversations", "read_conversations",
    ),
}
_MODULE_OF = {name: module for module, names in _LAZY.items() for name in names}

__version__ = "0.1.0"

__all__ = [
    "advise",
    "collect_sample",
    "drift_findings",
    "history",
    "DriftThresholds",
    "AdvisorThresholds",
    "recommend_ef_search",
    "EfSearchAdvice",
    "concurrency_sweep",
    "describe_concurrency",
    "plot_concurrency",
    "HTM",
    "WorkingMemory",
    "get_embedder",
    "parse_timeframe",
    "LongTermMemory",
    "QueryCache",
    "HTMError",
    "ValidationError",
    "BenchmarkFormatError",
    "NotFoundError",
    "HistoryVersionError",
    "NotAHistoryError",
    "DatabaseError",
    "ConcurrencyError",
    "DatabaseConnectionError",
    "QueryTimeoutError",
    "SchemaError",
    "NoSoftDeleteError",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "index_usage",
    "index_usage_delta",
    "table_health",
    "plot_index_usage",
    "tag_cooccurrence",
    "tag_graph",
    "tag_graph_view",
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
    "evaluate_conversations",
    "ConversationEvaluation",
    "plot_conversations",
    "read_conversations",
    "evaluate_retrieval",
    "RetrievalEvaluation",
    "read_labelled_queries",
    "plot_retrieval",
    "plot_retrieval_quality",
    "near_duplicates",
    "memory_growth",
    "stale_memories",
    "unreachable_memories",
    "supersession_candidates",
    "retention_what_if",
    "ExpiryPolicy",
    "DecayPolicy",
    "memory_hygiene",
    "HygieneResult",
    "sensitive_memories",
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

_moved.install()


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    if f"{__name__}.{name}" in _moved.MOVED_MODULES or not name.startswith("__"):
        # a subpackage (``htm_analytics.store``), or a module of the previous release
        # (``htm_analytics.tags``, with its DeprecationWarning)
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the module exists but needs something missing
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
