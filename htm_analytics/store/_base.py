"""The store's floor: the connection pool, transactions, statement tracing and the cache's state.

Every other module of the store is a mixin over :class:`StoreBase`: it runs its SQL through
:meth:`StoreBase._transaction` (one transaction, errors mapped to the ``HTMError`` tree) or
:meth:`StoreBase._fetch`, and nothing else opens connections. Searches run through the
query cache in :mod:`.cached_search`.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self

import pandas as pd
import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.rows import dict_row, tuple_row

from ..errors import (
    DatabaseConnectionError,
    DatabaseError,
    HTMError,
    SchemaError,
    ValidationError,
)
from ..frames import analytics_work_mem, coerce_frame, load_analytics_query
from ..validation import validate_number
from ._common import LOG_EVENTS, StoredModel
from ._errors import translate_database_error
from .adapters import session_adapters
from .cache import QueryCache
from .cache_generation import has_shared_generation
from .connection import mask_url, resolve_database_url
from .recall_buffer import FLUSH_RECALL_WRITES, RecallBuffer
from .schema import native_index_dimensions, set_up_schema
from .schema_info import FORGET_EVENTS_VERSION, SchemaInfo, detect_schema, prefix_read
from .search_pool import SearchConnections, idle_check_hooks, returning
from .server import missing_schema_error, read_overview
from .speakers import SpeakerIndex
from .tracing import Tracer, tracing_cursor_classes

__all__ = ["StoreBase", "WRITER_TIMEZONE_VARIABLE"]

WRITER_TIMEZONE_VARIABLE = "HTM_WRITER_TIMEZONE"
"""The environment variable naming the time zone of ``timestamp without time zone`` columns."""

# work_mem for one transaction: the larger of the session's and the one asked for.
_RAISE_WORK_MEM = """
SELECT set_config('work_mem', greatest(pg_size_bytes(current_setting('work_mem')),
                                       pg_size_bytes(%(wanted)s)) / 1024 || 'kB', true)"""

# Kinds of event the triggers of migration 7 (and 10) write for every writer.
_TRIGGER_LOGGED = ("remember", "delete", "restore", "purge")


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
        writer_timezone: str | None = None,
        read_only: bool = False,
    ) -> None:
        if not isinstance(read_only, bool):
            raise ValidationError(f"must be True or False, got {read_only!r}", field="read_only")
        if read_only and init_schema:
            raise ValidationError("a read-only store cannot install the schema",
                                  field="init_schema")
        self.read_only = read_only
        if pool_size is not None:
            pool_size = validate_number(pool_size, field="pool_size", minimum=1, maximum=1000,
                                        integer=True)
        # statement_timeout is an int of milliseconds on the server
        self.query_timeout = validate_number(query_timeout, field="query_timeout", minimum=1,
                                             maximum=2**31 - 1, integer=True)
        cache_size = validate_number(cache_size, field="cache_size", minimum=0, integer=True)
        cache_ttl = validate_number(cache_ttl, field="cache_ttl", minimum=0, exclusive=True)
        if tracer is not None and not callable(tracer):
            raise ValidationError("must be callable as tracer(sql, params, seconds)",
                                  field="tracer")
        if writer_timezone is None:
            writer_timezone = os.environ.get(WRITER_TIMEZONE_VARIABLE) or None
        if writer_timezone is not None and (
                not isinstance(writer_timezone, str) or not writer_timezone.strip()
                or "\x00" in writer_timezone or len(writer_timezone) > 100):
            raise ValidationError(f"must be a time zone name, got {writer_timezone!r}",
                                  field="writer_timezone")
        # Statements on the pool are marked as the toolkit's own, except in the memory
        # operations' transactions; searches, which agents run, on connections unmarked.
        self._cursor_classes = tracing_cursor_classes(tracer, marked=True)
        self._search_cursor_classes = tracing_cursor_classes(tracer, marked=False)
        self._url = resolve_database_url(config_or_url)
        self.url = mask_url(self._url)
        # What the database has, read once at open (see _prepare_database).
        self.schema_info: SchemaInfo
        self._native_dimensions: set[int] = set()
        self._has_shared_generation = False
        self.server_info = self._prepare_database(init_schema, writer_timezone)
        self._read_prefix = self.schema_info.read_prefix()
        # Caches of facts this store changes itself: the stored vectors' models (None until
        # read at the first vector search, again after cache_ttl; what this store adds is
        # counted in) and whether any memory was stored with surrounding white space (None
        # until a remember needs to know).
        self._embedding_models: list[StoredModel] | None = None
        self._embedding_models_read_at = 0.0
        self._unstripped_content: bool | None = None
        # The robots a question may name, by a word of their name (read at the first search
        # that boosts named robots, and again after cache_ttl).
        self._speakers: SpeakerIndex | None = None
        check, self._note_returned = idle_check_hooks()
        self._pool = psycopg_pool.ConnectionPool(
            self._url, min_size=1, max_size=pool_size or 5,
            kwargs={"context": self._adapters}, configure=self._configure_connection,
            check=check, open=False,
            name="htm_analytics")
        try:
            self._pool.open(wait=True, timeout=30)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            raise DatabaseConnectionError(
                f"could not open a connection pool to {self.url}: {exc}") from exc
        # Searches run on connections of their own (opened at the first search).
        self._search = SearchConnections(self._url, self._configure_search_connection,
                                         self._pool.max_size, self._adapters)
        self._recall_buffer = RecallBuffer()
        self._cache = QueryCache(cache_size, cache_ttl)
        self._atomic = threading.local()  # the cursor of this thread's atomic() block
        self._closed = False

    # -- connections ----------------------------------------------------------------------

    def _prepare_database(self, init_schema: bool,
                          writer_timezone: str | None) -> dict[str, Any]:
        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=10,
                                 cursor_factory=self._cursor_classes[0]) as conn:
                overview = read_overview(conn)
                if init_schema and overview["pgvector_available"] is None:
                    raise missing_schema_error(overview, self._url) or SchemaError("pgvector")
                applied = set_up_schema(conn) if init_schema else []
                info = conn.execute(
                    """SELECT current_setting('server_version') AS server_version,
                              current_setting('server_version_num')::int AS server_version_num,
                              current_database() AS database,
                              (SELECT extversion FROM pg_extension WHERE extname = 'vector')
                                  AS pgvector_version,
                              (SELECT extversion FROM pg_extension WHERE extname = 'pg_trgm')
                                  AS pg_trgm_version""").fetchone()
                assert info is not None
                names = ["server_version", "server_version_num", "database",
                         "pgvector_version", "pg_trgm_version"]
                result = dict(zip(names, info))
                if not init_schema:
                    problem = missing_schema_error(overview, self._url)
                    if problem is not None:
                        raise problem
                self.schema_info = detect_schema(conn)
                if writer_timezone is not None:
                    known = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_timezone_names "
                                         "WHERE name = %s)", (writer_timezone,)).fetchone()
                    if not (known and known[0]):
                        raise ValidationError(
                            f"is not a time zone the server knows: {writer_timezone!r} "
                            "(see pg_timezone_names)", field="writer_timezone")
                    self.schema_info = self.schema_info.with_writer_timezone(
                        writer_timezone, given=True)
                result["schema_version"] = self.schema_info.additions_version
                result["migrations_applied"] = applied
                self._native_dimensions = set(native_index_dimensions(conn))
                self._has_shared_generation = has_shared_generation(conn)
                self._adapters = session_adapters(conn)
                return result
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=self._url) from exc

    def _log_events(self, cur: psycopg.Cursor[Any], kind: str, robot_id: int | None,
                    node_ids: list[int]) -> None:
        """Append events to the log, where there is one and the database does not already.

        From migration 7 on, triggers log remembers and deletes for every writer; logging them
        here too would count them twice.
        """
        info = self.schema_info
        if not info.has_event_log or (kind in _TRIGGER_LOGGED and info.event_triggers):
            return
        if kind in ("restore", "purge") and FORGET_EVENTS_VERSION not in info.applied_migrations:
            if kind == "restore":  # a kind the log before migration 10 does not accept
                return
            kind = "delete"
        cur.execute(LOG_EVENTS, {"kind": kind, "robot_id": robot_id, "node_ids": node_ids})

    def _claim_event_logging(self, cur: psycopg.Cursor[Any]) -> None:
        """When this store logs remembers and deletes itself, tell the triggers not to.

        The triggers of migration 7 may have been installed after this store opened (by
        ``init-db`` elsewhere); without this, this transaction's events would count twice.
        """
        if self.schema_info.has_event_log and not self.schema_info.event_triggers:
            cur.execute("SELECT set_config('htm_analytics.events_written', 'on', true)")

    def _configure_search_connection(self, conn: psycopg.Connection[Any]) -> None:
        self._configure_connection(conn, self._search_cursor_classes)

    def _configure_connection(self, conn: psycopg.Connection[Any],
                              cursor_classes: tuple[type, type] | None = None) -> None:
        # One statement, in autocommit: the pool runs this in its own thread while the store
        # works, and a setup in a transaction shows meanwhile as 'idle in transaction'. The
        # types' loaders come with the connection (``context``), looked up once per store.
        conn.cursor_factory, conn.server_cursor_factory = cursor_classes or self._cursor_classes
        autocommit, conn.autocommit = conn.autocommit, True
        # UTC, except where the HTM tables keep local time without a zone: there the session
        # runs in the writer's zone, so that what the store writes (CURRENT_TIMESTAMP into
        # such a column) is the same local time as the writer's, and reads convert both.
        zone = self.schema_info.writer_timezone if self.schema_info.reads_local_time else "UTC"
        # jit off: on a server built with LLVM (PostgreSQL's Debian, Ubuntu and PGDG packages
        # turn JIT on), the searches' and analyses' plans cost past jit_above_cost (before
        # PostgreSQL 18 enable_seqscan = off adds 1e10 to a plan that must scan a table), and
        # compiling them took longer than running them (docs/benchmarks.md).
        conn.execute("SELECT set_config('statement_timeout', %s, false),"
                     "       set_config('TimeZone', %s, false),"
                     "       set_config('jit', 'off', false),"
                     # never turned off here: a role's or server's setting stays
                     "       CASE WHEN %s THEN set_config("
                     "           'default_transaction_read_only', 'on', false) END",
                     (str(self.query_timeout), zone, self.read_only))
        conn.autocommit = autocommit

    @contextmanager
    def _transaction(self, *, memory_operation: bool = False
                     ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor in one transaction: committed on success, rolled back on any error.

        Inside :meth:`atomic` (on this thread) it is a savepoint of the atomic transaction.
        Its statements are marked as the toolkit's own (:mod:`.tracing`) unless it is a
        ``memory_operation``: one an agent runs (remember, retrieve, tag, forget).
        """
        self._check_open()
        outer: psycopg.Cursor[dict[str, Any]] | None = getattr(self._atomic, "cursor", None)
        with self._translated_errors():
            if outer is not None:
                marked = outer.marked  # type: ignore[attr-defined]
                outer.marked = not memory_operation  # type: ignore[attr-defined]
                try:
                    with outer.connection.transaction():
                        yield outer
                finally:
                    outer.marked = marked  # type: ignore[attr-defined]
                return
            with self._pool.connection() as conn, returning(conn, self._note_returned), \
                    conn.cursor(row_factory=dict_row) as cur:
                cur.marked = not memory_operation  # type: ignore[attr-defined]
                yield cur

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseError("this LongTermMemory is closed")

    @contextmanager
    def _translated_errors(self, connection: str = "pooled connection") -> Iterator[None]:
        """Driver and pool errors raised inside, as the ``HTMError`` tree (by SQLSTATE)."""
        try:
            yield
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise self._translated(exc, connection) from exc

    def _translated(self, exc: psycopg.Error | psycopg_pool.PoolTimeout,
                    connection: str) -> HTMError:
        """A driver or pool error as the ``HTMError`` tree (see :meth:`_translated_errors`)."""
        if isinstance(exc, psycopg_pool.PoolClosed):  # close() while this call waited for it
            return DatabaseError("this LongTermMemory is closed")
        if isinstance(exc, psycopg_pool.PoolTimeout):
            return DatabaseConnectionError(
                f"no {connection} to {self.url} became free: {exc}")
        error = translate_database_error(exc, url=self._url, query_timeout=self.query_timeout)
        if isinstance(error, DatabaseConnectionError) and not self._closed:
            # The server went away: test the idle connections now (the search connections
            # at their next use), so that the calls after this one do not meet the other
            # dead ones.
            self._pool.check()
            self._search.check()
        return error

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Run the store calls made inside the block, on this thread, in one transaction.

        Everything is committed when the block ends, or nothing if it raises: for writes that
        belong together across several calls (an importer's memories and the records of
        their source rows). Calls inside run on one pooled connection, each as a savepoint;
        an ``atomic`` inside another is a savepoint too. Other threads are not affected, and
        searches, which run on connections of their own, see the block's writes only once
        it has committed.
        """
        # Recall writes flushed inside the block (one list per level): its rollback undoes
        # them, and they must then be pending again, not lost.
        flushed: list[Any] = []
        levels = self._atomic.__dict__.setdefault("flushed", [])
        levels.append(flushed)
        try:
            if getattr(self._atomic, "cursor", None) is not None:
                with self._transaction():
                    yield
            else:
                # An explicit transaction block, so that the calls inside are its savepoints.
                with self._transaction() as cur, cur.connection.transaction():
                    self._atomic.cursor = cur
                    try:
                        yield
                    finally:
                        self._atomic.cursor = None
        except BaseException:
            self._forget_stored_models()  # they counted vectors the block rolled back
            self._recall_buffer.written_undone(flushed)
            raise
        else:
            if len(levels) > 1:  # committed with the enclosing block, or undone with it
                levels[-2].extend(flushed)
        finally:
            levels.pop()
            # Searches that ran while the block was uncommitted may have cached what it
            # changed, or what it then rolled back.
            self._cache.clear()

    def _read(self, query: str | sql.Composable) -> Any:
        """A read statement as this database needs it: see :meth:`SchemaInfo.read_prefix`."""
        return prefix_read(query, self._read_prefix)

    def _fetch(self, query: str | sql.Composable, params: Any = None, *,
               memory_operation: bool = False) -> list[dict[str, Any]]:
        with self._transaction(memory_operation=memory_operation) as cur:
            cur.execute(self._read(query), params)
            return cur.fetchall() if cur.description else []

    def fetch_frame(self, query: str | sql.Composable, params: Any = None,
                    *, dtypes: Mapping[str, Any] | None = None,
                    work_mem: str | None = None) -> pd.DataFrame:
        """Run one read-only statement and return its rows as a DataFrame.

        For the analysis helpers of this package; ``params`` are bound, never interpolated.
        Columns keep the statement's order even when there are no rows; ``dtypes`` is applied
        with :meth:`pandas.DataFrame.astype`. ``work_mem`` (``"256MB"``) raises the setting
        for this statement's transaction only (``SET LOCAL``), never below the server's.
        """
        with self._transaction() as cur:
            if work_mem is not None:
                cur.execute(_RAISE_WORK_MEM, {"wanted": work_mem})
            # Rows as tuples: pandas builds a frame from them in half the time of dicts.
            with cur.connection.cursor(row_factory=tuple_row) as rows:
                rows.execute(self._read(query), params)
                columns = [c.name for c in rows.description or []]
                frame = pd.DataFrame(rows.fetchall(), columns=columns)
        return coerce_frame(frame, dtypes) if dtypes else frame

    def analytics_frame(self, name: str, params: Mapping[str, Any],
                        dtypes: Mapping[str, Any]) -> pd.DataFrame:
        """Run the analytics query ``sql/analytics/<name>.sql`` (with the ``work_mem`` its file
        asks for); see :mod:`htm_analytics.frames`. Raises ``ValidationError`` (``name``)
        unless ``name`` is one of :func:`~htm_analytics.frames.analytics_query_names`."""
        return self.fetch_frame(load_analytics_query(name), params, dtypes=dtypes,
                                work_mem=analytics_work_mem(name))

    def close(self) -> None:
        """Write the buffered recall writes, then close the connection pools. The embedded
        server stops when the process exits."""
        if self._closed:
            return
        self._recall_buffer.stop()
        try:
            self.flush_recall_writes()
        finally:
            self._closed = True
            self._search.close()
            self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(url={self.url!r}, "
                f"postgresql={self.server_info['server_version']!r}, "
                f"pgvector={self.server_info['pgvector_version']!r})")

    def ensure_pool_size(self, size: int) -> int:
        """Let the connection pool hold at least ``size`` connections.

        For measurements with several client threads, each taking its own pooled connection
        (:func:`htm_analytics.concurrency_sweep`); a smaller pool would make threads queue.

        Returns
        -------
        int
            The pool's maximum size now.
        """
        size = validate_number(size, field="size", minimum=1, maximum=1000, integer=True)
        self._check_open()
        if size > self._pool.max_size:
            self._pool.resize(self._pool.min_size, size)
            self._search.resize(size)
            # The pool grows when a caller asks; callers already waiting asked before the
            # resize and would wait for a connection to come back: grow for them now.
            if self._pool.get_stats().get("requests_waiting"):
                self._pool.check()
        return self._pool.max_size

    @functools.cached_property
    def supports_iterative_scan(self) -> bool:
        """Whether the server's pgvector (>= 0.8.0) has ``hnsw.iterative_scan`` (filtered
        searches ask on every call: parsed once)."""
        version = tuple(int(p) for p in re.findall(r"\d+", self.server_info["pgvector_version"]))
        return version >= (0, 8, 0)

    @property
    def native_dimensions(self) -> frozenset[int]:
        """Dimensions that have a native HNSW index (:meth:`create_native_index`)."""
        return frozenset(self._native_dimensions)

    @property
    def _server_version_num(self) -> int:
        return int(self.server_info["server_version_num"])

    # -- recall writes (see recall_buffer) ------------------------------------------------

    @property
    def recall_buffer(self) -> RecallBuffer:
        """The write-behind buffer of :meth:`buffer_working_memory` (its settings, counts)."""
        return self._recall_buffer

    def flush_recall_writes(self) -> int:
        """Write every buffered working-memory step now; returns the steps written.

        One statement per :data:`~.recall_buffer.FLUSH_CHUNK` nodes (each its own
        transaction, so that a large backlog neither holds its row locks long nor meets
        ``query_timeout``). On failure the steps not written stay buffered (nothing is
        lost) and the error is raised.
        """
        return self._recall_buffer.flush(self._write_recall_part)

    def _write_recall_part(self, part: Any) -> None:
        with self._transaction(memory_operation=True) as cur:
            cur.execute(FLUSH_RECALL_WRITES, part.parameters())
        levels = getattr(self._atomic, "flushed", None)
        if levels:  # written in this thread's atomic block: committed only with it
            levels[-1].append(part)

    def _flush_before_direct_write(self) -> None:
        # A direct write of flags must not be overtaken by an older buffered one.
        if self._recall_buffer.pending:
            self.flush_recall_writes()

    # -- facts this store changes itself --------------------------------------------------

    def _vectors_added(self, provider: str | None, model: str | None, dimension: int | None,
                       count: int) -> None:
        """Count ``count`` vectors of ``provider``/``model`` this store has just stored in the
        stored models it read, if it read them: its next search need not read them again
        (a scan of every memory: over a second at a million)."""
        models = self._embedding_models
        if models is None or not count or dimension is None:
            return
        if not self.schema_info.has_table("node_embedding_models"):
            provider = model = None  # not recorded: as the stored models read them
        key = (provider, model, dimension)
        if any(stored[:3] == key for stored in models):
            models = [(*stored[:3], stored[3] + count) if stored[:3] == key else stored
                      for stored in models]
        else:
            models = [*models, (*key, count)]
        self._embedding_models = sorted(models, key=lambda m: -m[3])

    def _forget_stored_models(self) -> None:
        """Forget the stored vectors' models (read again at the next vector search): this
        store has just deleted, forgotten, restored or purged memories and their vectors, or
        rolled back vectors it had counted in."""
        self._embedding_models = None

    def _native_index_added(self, dimension: int) -> None:
        self._native_dimensions.add(dimension)
