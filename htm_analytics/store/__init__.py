"""The memory store: every read, write and search of the HTM tables goes through here.

:class:`LongTermMemory` implements the LongTermMemory API of the reference documents on
PostgreSQL + pgvector: content-addressed nodes shared by robots (SHA-256 dedup with a per-robot
``remember_count``), hierarchical tags, vector / full-text / fuzzy / hybrid search and an LRU+TTL
query cache. SQL lives in this package and in the package's ``sql/`` migrations; user input only
ever reaches PostgreSQL as bound parameters. See ``docs/architecture.md`` for the layout.
"""

from ._common import (
    MAX_LIMIT,
    TextMatch,
    Timeframe,
    content_hash,
    quote_identifier,
    quote_literal,
)
from ._errors import translate_database_error
from ._search_sql import HYBRID_SIMILARITY_WEIGHT, HYBRID_TAG_WEIGHT, RRF_K
from ._vectors import PADDED_INDEX, vector_index_name
from .cache import QueryCache
from .catalog import MEMORY_TABLES
from .connection import (
    URL_ENVIRONMENT_VARIABLES,
    embedded_server_url,
    mask_secrets,
    mask_url,
    resolve_database_url,
)
from .databases import (
    claimed_database,
    create_database,
    database_exists,
    database_name,
    drop_database,
    drop_unused_databases,
    ensure_database,
    replace_database,
    scratch_database,
    with_database,
)
from .forgetting import CONFIRMATION
from .indexing import hnsw_graph_bytes
from .memory import LongTermMemory, live_store
from .schema import SCHEMA_VERSION, apply_migrations, create_statement_statistics
from .schema_info import SchemaInfo
from .search import SEARCH_STRATEGIES, VECTOR_STRATEGIES, SearchStrategy
from .search_pool import DEFAULT_EF_SEARCH
from .server import PGVECTOR_INSTALL_HINT, missing_schema_error, server_overview, server_sessions
from .snapshot import Snapshot, export_snapshot, write_parquet
from .table_recall import benchmark_table_recall
from .tracing import CURSOR_PREFIX, SQL_LOGGER, STATEMENT_MARKER, Tracer
from .tuning_session import TuningSession

__all__ = [
    "CONFIRMATION",
    "DEFAULT_EF_SEARCH",
    "HYBRID_SIMILARITY_WEIGHT",
    "HYBRID_TAG_WEIGHT",
    "MAX_LIMIT",
    "MEMORY_TABLES",
    "RRF_K",
    "SCHEMA_VERSION",
    "SEARCH_STRATEGIES",
    "SQL_LOGGER",
    "STATEMENT_MARKER",
    "CURSOR_PREFIX",
    "VECTOR_STRATEGIES",
    "LongTermMemory",
    "live_store",
    "SchemaInfo",
    "SearchStrategy",
    "TextMatch",
    "Timeframe",
    "Tracer",
    "TuningSession",
    "apply_migrations",
    "create_statement_statistics",
    "content_hash",
    "create_database",
    "database_exists",
    "database_name",
    "drop_database",
    "ensure_database",
    "replace_database",
    "drop_unused_databases",
    "claimed_database",
    "scratch_database",
    "with_database",
    "QueryCache",
    "URL_ENVIRONMENT_VARIABLES",
    "embedded_server_url",
    "mask_secrets",
    "mask_url",
    "resolve_database_url",
    "Snapshot",
    "export_snapshot",
    "benchmark_table_recall",
    "translate_database_error",
    "quote_identifier",
    "PADDED_INDEX",
    "vector_index_name",
    "quote_literal",
    "hnsw_graph_bytes",
    "write_parquet",
    "server_overview",
    "server_sessions",
    "missing_schema_error",
    "PGVECTOR_INSTALL_HINT",
]
