"""Tuning: recall and latency of HNSW settings, index builds, the ef_search
recommendation and the concurrency sweep, and retrieval-quality evaluation.
"""

from ._ground_truth import stable_sample
from .advice import (
    EfSearchAdvice,
    compare_latency,
    concurrency_sweep,
    describe_concurrency,
    plot_concurrency,
    recommend_ef_search,
)
from .benchmark import (
    DEFAULT_EF_SEARCH_SWEEP,
    benchmark_index_build,
    benchmark_recall,
    exact_neighbors,
    plot_recall_by_ef,
    plot_recall_latency,
)
from .conversation_formats import (
    BENCHMARK_FORMATS,
    LOCOMO_CATEGORIES,
    BenchmarkFormat,
    Conversation,
    Question,
    Turn,
    detect_format,
    read_conversations,
)
from .conversations import (
    CONVERSATION_SCOPES,
    ConversationEvaluation,
    evaluate_conversations,
    plot_conversations,
)
from .evaluation import (
    EVALUATED_STRATEGIES,
    RetrievalEvaluation,
    evaluate_retrieval,
    plot_retrieval,
    plot_retrieval_quality,
    read_labelled_queries,
    retrieval_quality,
)

__all__ = [
    "EfSearchAdvice",
    "recommend_ef_search",
    "compare_latency",
    "concurrency_sweep",
    "describe_concurrency",
    "plot_concurrency",
    "DEFAULT_EF_SEARCH_SWEEP",
    "benchmark_recall",
    "benchmark_index_build",
    "exact_neighbors",
    "plot_recall_latency",
    "plot_recall_by_ef",
    "stable_sample",
    "Turn",
    "Question",
    "Conversation",
    "BenchmarkFormat",
    "BENCHMARK_FORMATS",
    "LOCOMO_CATEGORIES",
    "read_conversations",
    "detect_format",
    "ConversationEvaluation",
    "evaluate_conversations",
    "plot_conversations",
    "CONVERSATION_SCOPES",
    "EVALUATED_STRATEGIES",
    "RetrievalEvaluation",
    "evaluate_retrieval",
    "read_labelled_queries",
    "plot_retrieval",
    "retrieval_quality",
    "plot_retrieval_quality",
]
