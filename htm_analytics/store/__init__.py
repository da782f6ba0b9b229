"""The memory store: every read, write and search of the HTM tables goes through here.

:class:`LongTermMemory` implements the LongTermMemory API of the reference documents on
PostgreSQL + pgvector: content-addressed nodes shared by robots (SHA-256 dedup with a per-robot
``remember_count``), hierarchical tags, vector / full-text / fuzzy / hybrid search and an LRU+TTL
query cache. SQL lives in this package and in the package's ``sql/`` migrations; user input only
ever reaches PostgreSQL as bound parameters. See ``docs/architecture.md`` for the layout.
"""

from ._common import MAX_LIMIT, TextMatch, Timeframe, content_hash
from ._search_sql import HYBRID_SIMILARITY_WEIGHT, HYBRID_TAG_WEIGHT, RRF_K
from .catalog import MEMORY_TABLES
from .databases import (
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
from .memory import LongTermMemory
from .schema import SCHEMA_VERSION, apply_migrations
from .schema_info import SchemaInfo
from .search import SEARCH_STRATEGIES, VECTOR_STRATEGIES, SearchStrategy
from .search_pool import DEFAULT_EF_SEARCH
from .server import PGVECTOR_INSTALL_HINT, missing_schema_error, server_overview, server_sessions
from .tracing import SQL_LOGGER, Tracer
from .tuning_session import TuningSession

__all__ = [
    "DEFAULT_EF_SEARCH",
    "HYBRID_SIMILARITY_WEIGHT",
    "HYBRID_TAG_WEIGHT",
    "MAX_LIMIT",
    "MEMORY_TABLES",
    "RRF_K",
    "SCHEMA_VERSION",
    "SEARCH_STRATEGIES",
    "SQL_LOGGER",
    "VECTOR_STRATEGIES",
    "LongTermMemory",
    "SchemaInfo",
    "SearchStrategy",
    "TextMatch",
    "Timeframe",
    "Tracer",
    "TuningSession",
    "apply_migrations",
    "content_hash",
    "create_database",
    "database_exists",
    "database_name",
    "drop_database",
    "ensure_database",
    "replace_database",
    "drop_unused_databases",
    "scratch_database",
    "with_database",
    "server_overview",
    "server_sessions",
    "missing_schema_error",
    "PGVECTOR_INSTALL_HINT",
]
