"""The store's floor: the connection pool, transactions, statement tracing and the cache.

Every other module of the store is a mixin over :class:`StoreBase`: it runs its SQL through
:meth:`StoreBase._transaction` (one transaction, errors mapped to the ``HTMError`` tree) or
:meth:`StoreBase._fetch`, and nothing else opens connections.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self

import pandas as pd
import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row

from ..cache import QueryCache
from ..connection import mask_url, resolve_database_url
from ..display import SearchResults
from ..errors import (
    DatabaseConnectionError,
    DatabaseError,
    SchemaError,
    ValidationError,
    translate_database_error,
)
from ..frames import coerce_frame, load_analytics_query
from ..validation import validate_positive_int
from ._common import LOG_EVENTS
from .schema import apply_migrations, native_index_dimensions
from .schema_info import SchemaInfo, detect_schema
from .tracing import Tracer, tracing_cursor_class

__all__ = ["StoreBase"]

Rows = list[dict[str, Any]]

_LEADING_COMMENTS = re.compile(r"^(?:\s+|--[^\n]*\n)*")
_WITH = re.compile(r"^WITH(\s+RECURSIVE)?\s", re.IGNORECASE)


def prefix_read(statement: str | sql.Composable, prefix: str) -> str | sql.Composable:
    """``statement`` (a SELECT or WITH ... SELECT) with the CTEs of ``prefix`` before its own.

    Other statements, and every statement when ``prefix`` is empty, come back unchanged.
    """
    if not prefix:
        return statement
    text = statement.as_string(None) if isinstance(statement, sql.Composable) else statement
    leading = _LEADING_COMMENTS.match(text)
    body = text[leading.end():] if leading else text
    if match := _WITH.match(body):
        return f"WITH{match.group(1) or ''} {prefix}, {body[match.end():]}"
    if body[:6].upper() == "SELECT":
        return f"WITH {prefix} {body}"
    return statement


class StoreBase:
    """Pool, transactions, tracing and cache; see :class:`~htm_analytics.LongTermMemory`."""

    def __init__(
        self,
        config_or_url: str | Mapping[str, Any] | None = None,
        *,
        pool_size: int | None = None,
        query_timeout: int = 30_000,
        cache_size: int = 1000,
        cache_ttl: float = 300,
        init_schema: bool = False,
        tracer: Tracer | None = None,
    ) -> None:
        if pool_size is not None:
            pool_size = validate_positive_int(pool_size, field="pool_size", maximum=1000)
        self.query_timeout = validate_positive_int(query_timeout, field="query_timeout")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValidationError(f"must be an integer >= 0, got {cache_size!r}",
                                  field="cache_size")
        if isinstance(cache_ttl, bool) or not isinstance(cache_ttl, (int, float)) \
                or not cache_ttl > 0:
            raise ValidationError(f"must be a number of seconds > 0, got {cache_ttl!r}",
                                  field="cache_ttl")
        if tracer is not None and not callable(tracer):
            raise ValidationError("must be callable as tracer(sql, params, seconds)",
                                  field="tracer")
        self._cursor_class = tracing_cursor_class(tracer)
        self._url = resolve_database_url(config_or_url)
        self.url = mask_url(self._url)
        self.schema_info: SchemaInfo
        self.server_info = self._prepare_database(init_schema)
        self._read_prefix = self.schema_info.read_prefix()
        self._native_dimensions = set(self.server_info.pop("native_dimensions"))
        # cache of embedding_models() as (provider, model, dimension, nodes) tuples
        self._embedding_models: list[tuple[Any, Any, int, int]] | None = None
        self._pool = psycopg_pool.ConnectionPool(
            self._url,
            min_size=1,
            max_size=pool_size or 5,
            configure=self._configure_connection,
            open=False,
            name="htm_analytics",
        )
        try:
            self._pool.open(wait=True, timeout=30)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            raise DatabaseConnectionError(
                f"could not open a connection pool to {self.url}: {exc}") from exc
        self._cache = QueryCache(cache_size, cache_ttl)
        self._closed = False

    # -- connections ----------------------------------------------------------------------

    def _prepare_database(self, init_schema: bool) -> dict[str, Any]:
        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=10,
                                 cursor_factory=self._cursor_class) as conn:
                applied = apply_migrations(conn) if init_schema else []
                info = conn.execute(
                    """SELECT current_setting('server_version') AS server_version,
                              current_setting('server_version_num')::int AS server_version_num,
                              current_database() AS database,
                              (SELECT extversion FROM pg_extension WHERE extname = 'vector')
                                  AS pgvector_version,
                              (SELECT extversion FROM pg_extension WHERE extname = 'pg_trgm')
                                  AS pg_trgm_version,
                              to_regclass('public.nodes') IS NOT NULL AS has_schema,
                              to_regclass('public.htm_analytics_migrations') IS NOT NULL
                                  AS has_migrations""").fetchone()
                assert info is not None
                names = ["server_version", "server_version_num", "database",
                         "pgvector_version", "pg_trgm_version", "has_schema", "has_migrations"]
                result = dict(zip(names, info))
                if result["pgvector_version"] is None:
                    raise SchemaError(
                        f"the pgvector extension is not installed in {self.url}; run "
                        "`htm-analytics init-db` (needs pgvector available on the server)")
                if not result.pop("has_schema"):
                    raise SchemaError(f"the HTM tables do not exist in {self.url}; run "
                                      "`htm-analytics init-db`")
                result.pop("has_migrations")
                self.schema_info = detect_schema(conn)
                result["schema_version"] = self.schema_info.additions_version
                result["native_dimensions"] = native_index_dimensions(conn)
                result["migrations_applied"] = applied
                return result
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=self.url) from exc

    def _log_events(self, cur: psycopg.Cursor[Any], kind: str, robot_id: int | None,
                    node_ids: list[int]) -> None:
        """Append events to the log, where there is one and the database does not already.

        From migration 7 on, triggers log remembers and deletes for every writer; logging them
        here too would count them twice.
        """
        info = self.schema_info
        if not info.has_event_log or (kind in ("remember", "delete") and info.event_triggers):
            return
        cur.execute(LOG_EVENTS, {"kind": kind, "robot_id": robot_id, "node_ids": node_ids})

    def _claim_event_logging(self, cur: psycopg.Cursor[Any]) -> None:
        """When this store logs remembers and deletes itself, tell the triggers not to.

        The triggers of migration 7 may have been installed after this store opened (by
        ``init-db`` elsewhere); without this, this transaction's events would count twice.
        """
        if self.schema_info.has_event_log and not self.schema_info.event_triggers:
            cur.execute("SELECT set_config('htm_analytics.events_written', 'on', true)")

    def _configure_connection(self, conn: psycopg.Connection[Any]) -> None:
        conn.cursor_factory = self._cursor_class
        register_vector(conn)
        conn.execute("SELECT set_config('statement_timeout', %s, false),"
                     "       set_config('TimeZone', 'UTC', false)",
                     (str(self.query_timeout),))
        conn.commit()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor in one transaction: committed on success, rolled back on any error."""
        if self._closed:
            raise DatabaseError("this LongTermMemory is closed")
        try:
            with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                yield cur
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=self.url) from exc
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseConnectionError(
                f"no pooled connection to {self.url} became free: {exc}") from exc

    def _read(self, query: str | sql.Composable) -> Any:
        """A read statement as this database needs it: see :meth:`SchemaInfo.read_prefix`."""
        return prefix_read(query, self._read_prefix)

    def _fetch(self, query: str | sql.Composable, params: Any = None) -> list[dict[str, Any]]:
        with self._transaction() as cur:
            cur.execute(self._read(query), params)
            return cur.fetchall() if cur.description else []

    def fetch_frame(self, query: str | sql.Composable, params: Any = None,
                    *, dtypes: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Run one read-only statement and return its rows as a DataFrame.

        For the analysis helpers of this package; ``params`` are bound, never interpolated.
        Columns keep the statement's order even when there are no rows; ``dtypes`` is applied
        with :meth:`pandas.DataFrame.astype`.
        """
        with self._transaction() as cur:
            cur.execute(self._read(query), params)
            columns = [c.name for c in cur.description or []]
            frame = pd.DataFrame(cur.fetchall(), columns=columns)
        return coerce_frame(frame, dtypes) if dtypes else frame

    def analytics_frame(self, name: str, params: Mapping[str, Any],
                        dtypes: Mapping[str, Any]) -> pd.DataFrame:
        """Run the analytics query ``sql/analytics/<name>.sql``; see :mod:`htm_analytics.frames`."""
        return self.fetch_frame(load_analytics_query(name), params, dtypes=dtypes)

    def close(self) -> None:
        """Close the connection pool. The embedded server stops when the process exits."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(url={self.url!r}, "
                f"postgresql={self.server_info['server_version']!r}, "
                f"pgvector={self.server_info['pgvector_version']!r})")

    @property
    def supports_iterative_scan(self) -> bool:
        """Whether the server's pgvector (>= 0.8.0) has ``hnsw.iterative_scan``."""
        version = tuple(int(p) for p in re.findall(r"\d+", self.server_info["pgvector_version"]))
        return version >= (0, 8, 0)

    @property
    def native_dimensions(self) -> frozenset[int]:
        """Dimensions that have a native HNSW index (:meth:`create_native_index`)."""
        return frozenset(self._native_dimensions)

    @property
    def _server_version_num(self) -> int:
        return int(self.server_info["server_version_num"])

    # -- the query cache ------------------------------------------------------------------

    @property
    def cache(self) -> QueryCache:
        """The query cache (``cache.stats()``, ``cache.clear()``)."""
        return self._cache

    def clear_cache(self) -> None:
        """Drop every cached search result."""
        self._cache.clear()

    def _cached(self, key: tuple[Any, ...], compute: Callable[[], Rows]) -> SearchResults:
        if not self._cache.enabled:
            return SearchResults(compute())
        hit, value = self._cache.get(key)
        if not hit:
            value = compute()
            self._cache.put(key, value)
        return SearchResults(dict(row) for row in value)  # callers may mutate their rows
