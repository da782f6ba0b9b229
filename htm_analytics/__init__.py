"""htm_analytics: the HTM memory store on PostgreSQL + pgvector, and analytics over it."""

from .advisor import AdvisorThresholds, advise
from .cache import QueryCache
from .connection import embedded_server_url, mask_url, resolve_database_url
from .conversation_formats import read_conversations
from .conversations import ConversationEvaluation, evaluate_conversations, plot_conversations
from .demo import demo_database_url, load_demo, run_demo
from .embeddings import get_embedder
from .errors import (
    BenchmarkFormatError,
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
    "BenchmarkFormatError",
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
    "evaluate_conversations",
    "ConversationEvaluation",
    "plot_conversations",
    "read_conversations",
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
