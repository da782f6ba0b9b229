"""The agent's side: robots that remember and recall (:class:`HTM`), working memory,
embedding providers, token counts, time phrases and the corpus datasets.
"""

from .datasets import (
    CORPUS_ENVIRONMENT_VARIABLE,
    DEMO_ROBOTS,
    find_corpus,
    normalize_tag,
    read_corpus,
    read_demo,
    read_dev_queries,
    remember_history,
    simulate_remembers,
)
from .embeddings import (
    PROVIDERS,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    get_embedder,
)
from .htm import (
    HTM,
)
from .timeframes import (
    TIMEFRAME_PHRASES,
    parse_timeframe,
)
from .tokens import (
    count_tokens,
)
from .working_memory import (
    WorkingMemory,
    entry_value,
)

__all__ = [
    "CORPUS_ENVIRONMENT_VARIABLE",
    "find_corpus",
    "read_corpus",
    "read_dev_queries",
    "normalize_tag",
    "DEMO_ROBOTS",
    "simulate_remembers",
    "remember_history",
    "read_demo",
    "Embedder",
    "HashingEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "MiniLMEmbedder",
    "get_embedder",
    "PROVIDERS",
    "HTM",
    "parse_timeframe",
    "TIMEFRAME_PHRASES",
    "count_tokens",
    "WorkingMemory",
    "entry_value",
]
