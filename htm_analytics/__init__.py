"""htm_analytics: the HTM memory store on PostgreSQL + pgvector, and analytics over it."""

from .cache import QueryCache
from .connection import embedded_server_url, mask_url, resolve_database_url
from .errors import (
    DatabaseConnectionError,
    DatabaseError,
    EmbeddingError,
    HTMError,
    NotFoundError,
    QueryTimeoutError,
    SchemaError,
    ValidationError,
)
from .indexes import index_usage, index_usage_delta, plot_index_usage, table_health
from .store import SCHEMA_VERSION, LongTermMemory, content_hash

__version__ = "0.1.0"

__all__ = [
    "LongTermMemory",
    "QueryCache",
    "HTMError",
    "ValidationError",
    "NotFoundError",
    "DatabaseError",
    "DatabaseConnectionError",
    "QueryTimeoutError",
    "SchemaError",
    "EmbeddingError",
    "index_usage",
    "index_usage_delta",
    "table_health",
    "plot_index_usage",
    "SCHEMA_VERSION",
    "content_hash",
    "embedded_server_url",
    "mask_url",
    "resolve_database_url",
    "__version__",
]
