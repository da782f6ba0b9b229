"""The memory store: every read, write and search of the HTM tables goes through here.

:class:`LongTermMemory` implements the LongTermMemory API of the reference documents on
PostgreSQL + pgvector: content-addressed nodes shared by robots (SHA-256 dedup with a per-robot
``remember_count``), hierarchical tags, vector / full-text / fuzzy / hybrid search and an LRU+TTL
query cache. SQL lives in this module and in the package's ``sql/`` migrations; user input only
ever reaches PostgreSQL as bound parameters.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.resources
import os
import re
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
import pandas as pd
import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .cache import QueryCache
from .connection import mask_url, resolve_database_url
from .display import MemoryStats, SearchResults
from .errors import (
    DatabaseConnectionError,
    DatabaseError,
    EmbeddingError,
    HTMError,
    NotFoundError,
    SchemaError,
    ValidationError,
    translate_database_error,
)
from .frames import coerce_frame, load_analytics_query
from .validation import (
    MAX_EMBEDDING_DIMENSION,
    prepare_embedding,
    tag_ancestors,
    validate_content,
    validate_id,
    validate_ids,
    validate_positive_int,
    validate_tag,
    validate_timeframe,
)

__all__ = [
    "LongTermMemory",
    "SCHEMA_VERSION",
    "apply_migrations",
    "content_hash",
    "RRF_K",
    "HYBRID_SIMILARITY_WEIGHT",
    "HYBRID_TAG_WEIGHT",
]

RRF_K = 60
HYBRID_SIMILARITY_WEIGHT = 0.7
HYBRID_TAG_WEIGHT = 0.3
MAX_LIMIT = 1000
SEARCH_STRATEGIES = ("vector", "fulltext", "fulltext_any", "fuzzy", "hybrid", "rrf")
MEMORY_TABLES = ("robots", "nodes", "robot_nodes", "tags", "node_tags", "memory_events")
# Index usage and table health also cover the tables that serve searches.
_STATISTICS_TABLES = (*MEMORY_TABLES, "node_search_vectors", "node_embedding_models")

# What a snapshot keeps of each table (htm_analytics.snapshot creates the matching tables).
_EXPORT_COLUMNS = {
    "robots": "id, name, created_at, last_active, metadata::text AS metadata",
    "nodes": """id, content, content_hash, access_count, created_at, updated_at, last_accessed,
                token_count, in_working_memory, embedding_dimension,
                CASE WHEN embedding_dimension IS NOT NULL
                     THEN subvector(embedding, 1, embedding_dimension) END AS embedding""",
    "robot_nodes": """id, robot_id, node_id, first_remembered_at, last_remembered_at,
                      remember_count, created_at, updated_at""",
    "tags": "id, name, created_at",
    "node_tags": "id, node_id, tag_id, created_at",
    "memory_events": "id, occurred_at, kind, robot_id, node_id",
}
DEFAULT_EF_SEARCH = 40
_ADVISORY_LOCK_MIGRATIONS = 7_438_001  # arbitrary, constant: serialises concurrent init-db
_MIGRATION_FILE = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")

Timeframe = tuple[dt.datetime | dt.date, dt.datetime | dt.date] | None
TextMatch = Literal["all", "any", "websearch"]


def content_hash(content: str) -> str:
    """SHA-256 hex digest of ``content`` (UTF-8), the key of content deduplication."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# Schema and migrations
# --------------------------------------------------------------------------------------------

def _migrations() -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` of every migration shipped in the package, in order."""
    found = []
    for entry in importlib.resources.files("htm_analytics").joinpath("sql").iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return sorted(found)


SCHEMA_VERSION = max(version for version, _, _ in _migrations())

_CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS public.htm_analytics_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP
)"""


def apply_migrations(conn: psycopg.Connection[Any]) -> list[int]:
    """Create the extensions and schema, applying each pending migration once.

    Runs in one transaction under an advisory lock, so concurrent callers are safe and a
    failed migration leaves nothing behind. The seed migration is itself idempotent
    (``IF NOT EXISTS`` throughout), so it also adopts a database that already has the HTM
    tables without changing them.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection not in a transaction.

    Returns
    -------
    list of int
        The versions applied now (empty when the schema was current).
    """
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_LOCK_MIGRATIONS,))
        conn.execute(_CREATE_MIGRATIONS_TABLE)
        done = {row[0] for row in conn.execute(
            "SELECT version FROM public.htm_analytics_migrations")}
        for version, name, script in _migrations():
            if version in done:
                continue
            conn.execute(script.encode("utf-8"))  # bytes: a script without parameters
            conn.execute(
                "INSERT INTO public.htm_analytics_migrations (version, name) VALUES (%s, %s)",
                (version, name),
            )
            applied_now.append(version)
    return applied_now


# --------------------------------------------------------------------------------------------
# SQL statements
# --------------------------------------------------------------------------------------------

_INSERT_NODE = """
INSERT INTO nodes (content, content_hash, token_count, embedding, embedding_dimension)
VALUES (%(content)s, %(hash)s, %(token_count)s, %(embedding)s, %(dimension)s)
ON CONFLICT (content_hash) DO NOTHING
RETURNING id"""

_FIND_NODE_BY_HASH = "SELECT id FROM nodes WHERE content_hash = %s"

_RECORD_EMBEDDING_MODEL = """
INSERT INTO node_embedding_models (node_id, provider, model, dimension)
VALUES (%(node_id)s, %(provider)s, %(model)s, %(dimension)s)
ON CONFLICT (node_id) DO NOTHING"""

_FILL_MISSING_EMBEDDING = """
UPDATE nodes SET embedding = %(embedding)s, embedding_dimension = %(dimension)s,
                 updated_at = CURRENT_TIMESTAMP
WHERE id = %(node_id)s AND embedding IS NULL"""

_LINK_ROBOT = """
INSERT INTO robot_nodes AS rn (robot_id, node_id)
VALUES (%(robot_id)s, %(node_id)s)
ON CONFLICT (robot_id, node_id) DO UPDATE
   SET remember_count = rn.remember_count + 1,
       last_remembered_at = CURRENT_TIMESTAMP,
       updated_at = CURRENT_TIMESTAMP
RETURNING id, robot_id, node_id, first_remembered_at, last_remembered_at, remember_count,
          created_at, updated_at"""

_LOG_EVENTS = """
INSERT INTO memory_events (kind, robot_id, node_id)
SELECT %(kind)s, %(robot_id)s, unnest(%(node_ids)s::bigint[])"""

# Counts recalls and sets working-memory flags in one rewrite per node, skipping rows that
# would not change (a NULL held flag leaves the flag as it is).
_UPDATE_WORKING_MEMORY = """
UPDATE nodes AS n
SET access_count = n.access_count + c.recalled::int,
    last_accessed = CASE WHEN c.recalled THEN CURRENT_TIMESTAMP ELSE n.last_accessed END,
    in_working_memory = coalesce(c.held, n.in_working_memory)
FROM unnest(%(ids)s::bigint[], %(recalled)s::boolean[], %(held)s::boolean[])
     AS c(id, recalled, held)
WHERE n.id = c.id AND (c.recalled OR n.in_working_memory IS DISTINCT FROM c.held)"""

_NODE_COLUMNS = """id, content, content_hash, access_count, created_at, updated_at, last_accessed,
       token_count, in_working_memory, embedding_dimension"""

_RETRIEVE = f"""
UPDATE nodes SET access_count = access_count + 1, last_accessed = CURRENT_TIMESTAMP
WHERE id = %s
RETURNING {_NODE_COLUMNS},
       CASE WHEN embedding_dimension IS NOT NULL
            THEN subvector(embedding, 1, embedding_dimension) END AS embedding"""

_SEARCH_COLUMNS = "n.id, n.content, n.access_count, n.created_at, n.token_count"

_TIMEFRAME = " AND n.created_at BETWEEN %(start)s AND %(end)s"

_TSQUERY = {
    "all": "plainto_tsquery('english', %(query)s)",
    # plainto_tsquery's lexemes joined by OR; the ::tsquery cast keeps them as stemmed.
    "any": "replace(plainto_tsquery('english', %(query)s)::text, ' & ', ' | ')::tsquery",
    "websearch": "websearch_to_tsquery('english', %(query)s)",
}

_ENSURE_TAGS = """
INSERT INTO tags (name) SELECT unnest(%(names)s::text[])
ON CONFLICT (name) DO NOTHING"""

_TAG_IDS = "SELECT id, name FROM tags WHERE name = ANY(%(names)s::text[])"

_TAG_NODE = """
INSERT INTO node_tags (node_id, tag_id)
SELECT %(node_id)s, unnest(%(tag_ids)s::bigint[])
ON CONFLICT (node_id, tag_id) DO NOTHING"""


class LongTermMemory:
    """PostgreSQL-backed permanent memory with deduplication, tags, search and a query cache.

    Parameters
    ----------
    config_or_url : str, mapping or None
        A PostgreSQL URL, a mapping of libpq settings (``host``, ``port``, ``dbname``, ``user``,
        ``password``, ``sslmode``), or None: then ``HTM_DBURL``, ``HTM_DATABASE__URL`` or
        ``DATABASE_URL`` is used, else an embedded PostgreSQL is started and reused.
    pool_size : int, optional
        Most pooled connections (default 5).
    query_timeout : int
        Milliseconds a statement may run (PostgreSQL ``statement_timeout``) before it is
        cancelled with :class:`~htm_analytics.QueryTimeoutError`.
    cache_size : int
        Entries in the LRU query cache for searches; 0 disables it.
    cache_ttl : float
        Seconds a cached search result stays valid.
    init_schema : bool
        Create the extensions and tables and apply pending migrations (idempotent, additive).
        Pass False to use a database strictly as it is.

    Notes
    -----
    Connections run in UTC and with the given statement timeout. The cache is per process:
    writes from other processes become visible when entries expire (``cache_ttl``).

    Examples
    --------
    >>> with LongTermMemory() as ltm:                                  # doctest: +SKIP
    ...     robot = ltm.register_robot("planner")
    ...     ltm.add(content="PostgreSQL is our primary database", robot_id=robot)
    """

    def __init__(
        self,
        config_or_url: str | Mapping[str, Any] | None = None,
        *,
        pool_size: int | None = None,
        query_timeout: int = 30_000,
        cache_size: int = 1000,
        cache_ttl: float = 300,
        init_schema: bool = True,
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
        self._url = resolve_database_url(config_or_url)
        self.url = mask_url(self._url)
        self.server_info = self._prepare_database(init_schema)
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

    # -- connection plumbing ------------------------------------------------------------------

    def _prepare_database(self, init_schema: bool) -> dict[str, Any]:
        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=10) as conn:
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
                result["schema_version"] = None
                if result.pop("has_migrations"):
                    row = conn.execute(
                        "SELECT max(version) FROM htm_analytics_migrations").fetchone()
                    result["schema_version"] = row[0] if row else None
                result["native_dimensions"] = _native_index_dimensions(conn)
                result["migrations_applied"] = applied
                return result
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=self.url) from exc

    def _configure_connection(self, conn: psycopg.Connection[Any]) -> None:
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
            with self._pool.connection() as conn:
                with conn.cursor(row_factory=dict_row) as cur:
                    yield cur
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=self.url) from exc
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseConnectionError(
                f"no pooled connection to {self.url} became free: {exc}") from exc

    def _fetch(self, query: str | sql.Composable, params: Any = None) -> list[dict[str, Any]]:
        with self._transaction() as cur:
            cur.execute(query, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def fetch_frame(self, query: str | sql.Composable, params: Any = None,
                    *, dtypes: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Run one read-only statement and return its rows as a DataFrame.

        For the analysis helpers of this package; ``params`` are bound, never interpolated.
        Columns keep the statement's order even when there are no rows; ``dtypes`` is applied
        with :meth:`pandas.DataFrame.astype`.
        """
        with self._transaction() as cur:
            cur.execute(query, params)  # type: ignore[arg-type]
            columns = [c.name for c in cur.description or []]
            frame = pd.DataFrame(cur.fetchall(), columns=columns)
        return coerce_frame(frame, dtypes) if dtypes else frame

    def analytics_frame(self, name: str, params: Mapping[str, Any],
                        dtypes: Mapping[str, Any]) -> pd.DataFrame:
        """Run the analytics query ``sql/analytics/<name>.sql``; see :mod:`htm_analytics.frames`."""
        return self.fetch_frame(load_analytics_query(name), params, dtypes=dtypes)

    def iter_table_chunks(self, table: str, *, chunk_rows: int = 20_000) -> Iterator[pd.DataFrame]:
        """Yield a memory table's rows as DataFrames of at most ``chunk_rows`` rows, by id.

        Embeddings come back at their own dimension (the zero padding removed) as float32
        arrays; ``robots.metadata`` as JSON text. All chunks are read in one transaction, so
        together they are one consistent picture of the table.
        """
        if table not in _EXPORT_COLUMNS:
            raise ValidationError(f"must be one of {', '.join(MEMORY_TABLES)}", field="table")
        chunk_rows = validate_positive_int(chunk_rows, field="chunk_rows")
        query = sql.SQL("SELECT {} FROM {} ORDER BY id").format(
            sql.SQL(_EXPORT_COLUMNS[table]), sql.Identifier(table))
        with self._transaction() as cur:
            # A named cursor streams from the server instead of loading the table at once.
            with cur.connection.cursor(name=f"export_{table}", binary=True) as stream:
                stream.execute(query)
                columns = [c.name for c in stream.description or []]
                while rows := stream.fetchmany(chunk_rows):
                    frame = pd.DataFrame(rows, columns=columns)
                    if "embedding" in frame:
                        frame["embedding"] = [None if v is None else _to_numpy(v)
                                              for v in frame["embedding"]]
                    yield frame

    def close(self) -> None:
        """Close the connection pool. The embedded server stops when the process exits."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __enter__(self) -> LongTermMemory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"LongTermMemory(url={self.url!r}, "
                f"postgresql={self.server_info['server_version']!r}, "
                f"pgvector={self.server_info['pgvector_version']!r})")

    @property
    def cache(self) -> QueryCache:
        """The query cache (``cache.stats()``, ``cache.clear()``)."""
        return self._cache

    def clear_cache(self) -> None:
        """Drop every cached search result."""
        self._cache.clear()

    def _cached(self, key: tuple[Any, ...], compute: Any) -> SearchResults:
        if not self._cache.enabled:
            return SearchResults(compute())
        hit, value = self._cache.get(key)
        if not hit:
            value = compute()
            self._cache.put(key, value)
        return SearchResults(dict(row) for row in value)  # callers may mutate their rows

    # -- nodes ----------------------------------------------------------------------------

    def add(
        self,
        *,
        content: str,
        robot_id: int,
        token_count: int = 0,
        embedding: Sequence[float] | np.ndarray | None = None,
        embedding_model: tuple[str, str] | None = None,
        tags: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Remember ``content`` for a robot, storing identical content once.

        The SHA-256 of the content finds an existing node. The same robot remembering it
        again increments its ``remember_count`` and ``last_remembered_at``; another robot gets
        its own ``robot_nodes`` row. One transaction: nothing is half-written, and concurrent
        callers adding the same content end with one node and exact counts.

        Parameters
        ----------
        content : str
            Text of the memory; leading and trailing white space is stripped first.
        robot_id : int
            A registered robot (:meth:`register_robot`).
        token_count : int
            Tokens in the content, for working-memory budgets.
        embedding : sequence of float or numpy.ndarray, optional
            Up to 2000 finite numbers; stored zero-padded to 2000 with its real dimension in
            ``embedding_dimension``. Given for content that is already stored without an
            embedding, it fills the gap.
        embedding_model : (provider, model), optional
            Which model produced ``embedding`` (``("ollama", "nomic-embed-text")``), recorded
            so that searches can refuse query vectors from another model.
        tags : sequence of str
            Tags to attach, with their ancestors, in the same transaction.

        Returns
        -------
        dict
            ``node_id`` (int), ``is_new`` (bool) and ``robot_node`` (dict: the robot's
            ``robot_nodes`` row with ``remember_count``, ``first_remembered_at``,
            ``last_remembered_at``).

        Raises
        ------
        ValidationError
            Empty content, NUL bytes, a bad embedding, a negative token count or an unknown
            robot.
        """
        content = validate_content(content)
        robot_id = validate_id(robot_id, field="robot_id")
        if isinstance(token_count, bool) or not isinstance(token_count, (int, np.integer)) \
                or token_count < 0 or token_count > 2**31 - 1:
            raise ValidationError(f"must be an integer >= 0, got {token_count!r}",
                                  field="token_count")
        vector, dimension = (prepare_embedding(embedding) if embedding is not None
                             else (None, None))
        provider, model = _embedding_model(embedding_model)
        if isinstance(tags, str):
            raise ValidationError("must be a list of tags, not one string", field="tags")
        tag_names = list(dict.fromkeys(a for t in tags for a in tag_ancestors(validate_tag(t))))
        digest = content_hash(content)
        with self._transaction() as cur:
            row = cur.execute(_INSERT_NODE, {
                "content": content, "hash": digest, "token_count": int(token_count),
                "embedding": vector, "dimension": dimension}).fetchone()
            is_new = row is not None
            stored_vector = is_new and vector is not None
            if row is None:
                # A committed twin exists (ON CONFLICT waited for any concurrent insert, and
                # this new statement's snapshot sees it).
                row = cur.execute(_FIND_NODE_BY_HASH, (digest,)).fetchone()
                if row is None:
                    raise DatabaseError("deduplication lost its node; please retry")
                if vector is not None:
                    cur.execute(_FILL_MISSING_EMBEDDING, {
                        "embedding": vector, "dimension": dimension, "node_id": row["id"]})
                    stored_vector = cur.rowcount == 1
            node_id = int(row["id"])
            try:
                robot_node = cur.execute(
                    _LINK_ROBOT, {"robot_id": robot_id, "node_id": node_id}).fetchone()
            except pg_errors.ForeignKeyViolation as exc:
                raise ValidationError(
                    f"no robot with id {robot_id}; register it first with register_robot()",
                    field="robot_id") from exc
            cur.execute(_LOG_EVENTS, {"kind": "remember", "robot_id": robot_id,
                                      "node_ids": [node_id]})
            if stored_vector and provider is not None:
                cur.execute(_RECORD_EMBEDDING_MODEL, {
                    "node_id": node_id, "provider": provider, "model": model,
                    "dimension": dimension})
            if tag_names:
                tag_ids = _ensure_tags(cur, tag_names)
                cur.execute(_TAG_NODE, {"node_id": node_id,
                                        "tag_ids": [tag_ids[n] for n in tag_names]})
        if is_new or tag_names:
            self._cache.clear()
        if vector is not None:
            self._embedding_models = None
        return {"node_id": node_id, "is_new": is_new, "robot_node": dict(robot_node or {})}

    def embedding_models(self) -> pd.DataFrame:
        """Which models produced the stored embeddings.

        Returns
        -------
        pandas.DataFrame
            ``provider``, ``model`` (string, NA for embeddings stored without that
            information), ``dimension`` and ``nodes`` (int64), most nodes first.
        """
        return self.fetch_frame(
            """SELECT m.provider, m.model, n.embedding_dimension AS dimension, count(*) AS nodes
               FROM nodes n LEFT JOIN node_embedding_models m ON m.node_id = n.id
               WHERE n.embedding_dimension IS NOT NULL
               GROUP BY 1, 2, 3 ORDER BY nodes DESC, 1, 2, 3""",
            dtypes={"provider": "string", "model": "string", "dimension": "int64",
                    "nodes": "int64"})

    def check_embedding_model(self, provider: str, model: str, dimension: int) -> None:
        """Refuse to search with vectors of ``provider``/``model`` at ``dimension`` when the
        stored vectors come from another model or have another dimension.

        Embeddings stored without a model name pass if their dimension matches (there is no
        way to tell them apart). The answer is cached until this store adds an embedding.

        Raises
        ------
        EmbeddingError
            Naming the stored models and the query's.
        """
        if self._embedding_models is None:  # plain tuples: recall checks on every query
            stored = self.embedding_models().astype(object)
            self._embedding_models = list(
                stored.where(stored.notna(), None).itertuples(index=False, name=None))
        # Unnamed vectors pass on their dimension alone; named ones must be this model's.
        mismatched = [(p, m, d, n) for p, m, d, n in self._embedding_models
                      if d != dimension or (p is not None and (p, m) != (provider, model))]
        if mismatched:
            found = "; ".join(("unknown model" if p is None else f"{p}/{m}")
                              + f" ({d}-d, {n:,} nodes)" for p, m, d, n in mismatched)
            raise EmbeddingError(
                f"the query is embedded with {provider}/{model} ({dimension}-d) but the stored "
                f"vectors include {found}; vectors of different models are not comparable. "
                "Re-embed the memories, or search with the model that made them "
                "(htm-analytics advise gives the SQL to clear the odd vectors).")

    def retrieve(self, node_id: int) -> dict[str, Any] | None:
        """Return a node and count the access (``access_count + 1``, ``last_accessed = now``).

        Returns
        -------
        dict or None
            Every column of ``nodes``; ``embedding`` is the unpadded float32 vector (or None).
            None when no such node exists.
        """
        node_id = validate_id(node_id, field="node_id")
        with self._transaction() as cur:
            row = cur.execute(_RETRIEVE, (node_id,)).fetchone()
            if row is None:
                return None
            cur.execute(_LOG_EVENTS, {"kind": "retrieve", "robot_id": None,
                                      "node_ids": [node_id]})
        if row["embedding"] is not None:
            row["embedding"] = _to_numpy(row["embedding"])
        return row

    def robots_of_nodes(self, node_ids: Sequence[int]) -> dict[int, list[str]]:
        """The names of the robots that remember each node: ``{node_id: [names]}``."""
        ids = validate_ids(node_ids, field="node_ids")
        rows = self._fetch("""SELECT rn.node_id, array_agg(r.name ORDER BY r.name) AS robots
                              FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
                              WHERE rn.node_id = ANY(%s) GROUP BY rn.node_id""", (ids,))
        found = {int(r["node_id"]): list(r["robots"]) for r in rows}
        return {node: found.get(node, []) for node in ids}

    def node_ids_by_content(self, contents: Sequence[str]) -> list[int | None]:
        """The node id storing each text (compared by SHA-256 of the stripped text), or None."""
        hashes = [content_hash(validate_content(c)) for c in contents]
        rows = self._fetch("SELECT content_hash, id FROM nodes WHERE content_hash = ANY(%s)",
                           (hashes,))
        found = {r["content_hash"]: int(r["id"]) for r in rows}
        return [found.get(h) for h in hashes]

    def exists(self, node_id: int) -> bool:
        """Whether a node with this id exists."""
        node_id = validate_id(node_id, field="node_id")
        return bool(self._fetch("SELECT EXISTS (SELECT 1 FROM nodes WHERE id = %s) AS e",
                                (node_id,))[0]["e"])

    def delete(self, node_id: int) -> bool:
        """Delete a node permanently; its robot links and tag links go with it (cascade).

        The query cache is cleared. Returns True if a node was deleted, False if none existed.
        """
        node_id = validate_id(node_id, field="node_id")
        with self._transaction() as cur:
            deleted = cur.execute("DELETE FROM nodes WHERE id = %s RETURNING id",
                                  (node_id,)).fetchone()
            if deleted:
                cur.execute(_LOG_EVENTS, {"kind": "delete", "robot_id": None,
                                          "node_ids": [node_id]})
        self._cache.clear()
        return deleted is not None

    def track_access(self, node_ids: Sequence[int], *, robot_id: int | None = None,
                     event: Literal["retrieve", "recall"] = "retrieve") -> int:
        """Count one access for each node (bulk ``access_count + 1``, ``last_accessed = now``).

        With ``robot_id``, the accesses also go to the event log as ``event``. Returns the
        number of nodes updated; unknown ids are ignored.
        """
        ids = sorted(set(validate_ids(node_ids, field="node_ids")))
        if event not in ("retrieve", "recall"):
            raise ValidationError("must be 'retrieve' or 'recall'", field="event")
        if not ids:
            return 0
        with self._transaction() as cur:
            cur.execute("""UPDATE nodes SET access_count = access_count + 1,
                                            last_accessed = CURRENT_TIMESTAMP
                           WHERE id = ANY(%s::bigint[])""", (ids,))
            updated = cur.rowcount
            if robot_id is not None:
                cur.execute(_LOG_EVENTS, {"kind": event, "node_ids": ids,
                                          "robot_id": validate_id(robot_id, field="robot_id")})
            return updated

    def mark_evicted(self, node_ids: Sequence[int], *, robot_id: int | None = None) -> int:
        """Flag nodes as no longer in working memory (``in_working_memory = false``).

        ``robot_id``, when given, is recorded in the event log. Returns the rows updated.
        """
        return self._set_working_memory(node_ids, False, robot_id, "evict")

    def mark_in_working_memory(self, node_ids: Sequence[int], *,
                               robot_id: int | None = None) -> int:
        """Flag nodes as held in working memory (``in_working_memory = true``)."""
        return self._set_working_memory(node_ids, True, robot_id, None)

    def update_working_memory(self, robot_id: int, *, held: Sequence[int] = (),
                              evicted: Sequence[int] = (),
                              recalled: Sequence[int] = ()) -> None:
        """One robot's working-memory step, in one transaction.

        ``recalled`` nodes count an access (as :meth:`track_access` with ``event="recall"``),
        ``held`` nodes are flagged in working memory, ``evicted`` ones out (logged as
        ``evict`` events), and the robot's ``last_active`` is set. Each node row is rewritten
        at most once and only if a value changes: the reference schema indexes every column
        touched here, so each rewrite adds entries to every index of ``nodes``, the HNSW
        index included.

        Raises
        ------
        ValidationError
            Bad ids, or a node both held and evicted.
        NotFoundError
            Unknown robot (nothing is written).
        """
        robot_id = validate_id(robot_id, field="robot_id")
        held_ids = set(validate_ids(held, field="held"))
        evicted_ids = set(validate_ids(evicted, field="evicted"))
        recalled_ids = set(validate_ids(recalled, field="recalled"))
        if both := sorted(held_ids & evicted_ids):
            raise ValidationError(f"nodes both held and evicted: {both}", field="evicted")
        ids = sorted(held_ids | evicted_ids | recalled_ids)
        flags = [True if i in held_ids else False if i in evicted_ids else None for i in ids]
        with self._transaction() as cur:
            cur.execute("UPDATE robots SET last_active = CURRENT_TIMESTAMP WHERE id = %s",
                        (robot_id,))
            if cur.rowcount == 0:
                raise NotFoundError(f"no robot with id {robot_id}")
            if ids:
                cur.execute(_UPDATE_WORKING_MEMORY, {
                    "ids": ids, "recalled": [i in recalled_ids for i in ids], "held": flags})
            for kind, node_ids in (("recall", recalled_ids), ("evict", evicted_ids)):
                if node_ids:
                    cur.execute(_LOG_EVENTS, {"kind": kind, "robot_id": robot_id,
                                              "node_ids": sorted(node_ids)})

    def _set_working_memory(self, node_ids: Sequence[int], flag: bool, robot_id: int | None,
                            event: str | None) -> int:
        ids = sorted(set(validate_ids(node_ids, field="node_ids")))
        if robot_id is not None:
            robot_id = validate_id(robot_id, field="robot_id")
        if not ids:
            return 0
        with self._transaction() as cur:
            cur.execute("UPDATE nodes SET in_working_memory = %s WHERE id = ANY(%s::bigint[])",
                        (flag, ids))
            updated = cur.rowcount
            if event:
                cur.execute(_LOG_EVENTS, {"kind": event, "robot_id": robot_id,
                                          "node_ids": ids})
            return updated

    # -- search -----------------------------------------------------------------------------

    def _query_vector(self, query: str | None, embedding: Any,
                      embedding_service: Any) -> tuple[np.ndarray, int]:
        if embedding is None:
            if embedding_service is None or not callable(getattr(embedding_service, "embed",
                                                                 None)):
                raise ValidationError(
                    "needs an object with an embed(text) method, or pass embedding=",
                    field="embedding_service")
            try:
                embedding = embedding_service.embed(query)
            except HTMError:
                raise
            except Exception as exc:
                raise EmbeddingError(
                    f"the embedding service failed on the query: {exc}") from exc
            if hasattr(embedding, "to_numpy"):
                embedding = embedding.to_numpy()
            if isinstance(embedding, (list, tuple, np.ndarray)) and len(embedding) == 1 \
                    and np.ndim(embedding[0]) == 1:  # a batch of one
                embedding = embedding[0]
        return prepare_embedding(embedding, field="embedding")

    def _search_settings(self, cur: psycopg.Cursor[Any], *, ef_search: int,
                         filtered: bool) -> None:
        """Per-transaction HNSW settings: ``SET LOCAL`` never leaks to pooled connections.

        Sequential scans are disabled too: the planner under-costs scans of TOASTed vectors
        (every padded 2000-d vector is TOASTed), and picks an exact scan + sort that reads
        every vector, 30k rows in, instead of the HNSW index.
        """
        cur.execute("SELECT set_config('hnsw.ef_search', %s, true),"
                    "       set_config('enable_seqscan', 'off', true)", (str(ef_search),))
        if filtered and self.supports_iterative_scan:
            cur.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")

    @property
    def supports_iterative_scan(self) -> bool:
        """Whether the server's pgvector (>= 0.8.0) has ``hnsw.iterative_scan``."""
        version = tuple(int(p) for p in re.findall(r"\d+", self.server_info["pgvector_version"]))
        return version >= (0, 8, 0)

    def search(
        self,
        *,
        query: str | None = None,
        limit: int = 20,
        timeframe: Timeframe = None,
        embedding_service: Any = None,
        embedding: Sequence[float] | np.ndarray | None = None,
    ) -> list[dict[str, Any]]:
        """Vector similarity search (cosine) through the HNSW index.

        Parameters
        ----------
        query : str
            Text to embed with ``embedding_service``.
        limit : int
            Most results, 1 to 1000. ``hnsw.ef_search`` is raised to at least ``limit`` for
            this query, since an HNSW scan returns at most ``ef_search`` rows.
        timeframe : (start, end), optional
            Only nodes whose ``created_at`` is in the range. The filter runs with pgvector's
            iterative scan (``relaxed_order``) so that it does not starve the result.
        embedding_service : object with ``embed``, optional
            Turns ``query`` into a vector.
        embedding : sequence of float, optional
            A ready query vector instead of ``query`` + ``embedding_service``.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count`` and
            ``similarity`` (``1 - cosine distance``), most similar first. Searching does not
            count as an access (see :meth:`track_access`).
        """
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        if embedding is None:
            query = validate_content(query, field="query")
        vector, dimension = self._query_vector(query, embedding, embedding_service)
        self._check_query_model(embedding_service if embedding is None else None, dimension)
        key = ("search", query if embedding is None else vector.tobytes(), limit, frame,
               _service_key(embedding_service) if embedding is None else None)
        return self._cached(key, lambda: self._vector_search(vector, dimension, limit, frame))

    def _vector_search(self, vector: np.ndarray, dimension: int, limit: int,
                       frame: tuple[dt.datetime, dt.datetime] | None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if dimension in self._native_dimensions:
            distance = _native_distance(dimension)
            params["q"] = vector[:dimension]
            where = sql.SQL("n.embedding_dimension = {}").format(sql.Literal(dimension))
        else:
            distance = sql.SQL("n.embedding <=> %(q)s")
            params["q"] = vector
            where = sql.SQL("n.embedding IS NOT NULL")
        where = sql.SQL("{}{}").format(where, sql.SQL(_bind_timeframe(params, frame)))
        statement = sql.SQL("""
            SELECT {columns}, 1 - ({distance}) AS similarity
            FROM nodes n WHERE {where}
            ORDER BY {distance} LIMIT %(limit)s""").format(
            columns=sql.SQL(_SEARCH_COLUMNS), distance=distance, where=where)
        with self._transaction() as cur:
            with cur.connection.pipeline():  # settings and query in one round trip
                self._search_settings(cur, ef_search=max(DEFAULT_EF_SEARCH, limit),
                                      filtered=frame is not None)
                cur.execute(statement, params)
            rows = cur.fetchall()
        if frame:  # relaxed_order may return neighbours slightly out of order
            rows.sort(key=lambda r: -r["similarity"])
        return rows

    def search_fulltext(
        self,
        *,
        query: str,
        limit: int = 20,
        timeframe: Timeframe = None,
        match: TextMatch = "all",
    ) -> list[dict[str, Any]]:
        """Full-text search with PostgreSQL's English text search (GIN index).

        Parameters
        ----------
        query : str
            Words to look for.
        limit : int
            Most results, 1 to 1000.
        timeframe : (start, end), optional
            Only nodes created in the range.
        match : {"all", "any", "websearch"}
            ``"all"`` (the reference behaviour, ``plainto_tsquery``) needs every word;
            ``"any"`` needs one and ranks by how many match, which finds far more on natural
            questions; ``"websearch"`` understands quotes, ``or`` and ``-``.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count`` and
            ``rank`` (``ts_rank``), best first.
        """
        query = validate_content(query, field="query")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        tsquery = _tsquery(match)
        key = ("search_fulltext", query, limit, frame, match)
        params: dict[str, Any] = {"query": query, "limit": limit}
        where = _bind_timeframe(params, frame)
        statement = f"""
            SELECT {_SEARCH_COLUMNS}, ts_rank(sv.content_tsv, q) AS rank
            FROM nodes n JOIN node_search_vectors sv ON sv.node_id = n.id
                CROSS JOIN (SELECT {tsquery} AS q) AS tsq
            WHERE sv.content_tsv @@ q{where}
            ORDER BY rank DESC, n.id LIMIT %(limit)s"""
        return self._cached(key, lambda: self._fetch(statement, params))

    def search_fuzzy(
        self,
        *,
        query: str,
        limit: int = 20,
        timeframe: Timeframe = None,
        threshold: float = 0.3,
        method: Literal["word", "whole"] = "word",
    ) -> list[dict[str, Any]]:
        """Typo-tolerant search with pg_trgm trigrams (GIN trigram index).

        Parameters
        ----------
        query : str
            Text to match, typos and all ("semantic retreval").
        limit : int
            Most results, 1 to 1000.
        timeframe : (start, end), optional
            Only nodes created in the range.
        threshold : float
            Lowest trigram similarity kept, in (0, 1].
        method : {"word", "whole"}
            ``"word"`` scores the best-matching stretch of the content
            (``word_similarity``, operator ``<%``), right for a short query against long
            memories; ``"whole"`` compares the whole content (``similarity``, operator ``%``).

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count`` and
            ``similarity`` (0 to 1), best first.
        """
        query = validate_content(query, field="query")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not 0 < threshold <= 1:
            raise ValidationError(f"must be in (0, 1], got {threshold!r}", field="threshold")
        if method == "word":
            setting, score, test = ("pg_trgm.word_similarity_threshold",
                                    "word_similarity(%(query)s, n.content)",
                                    "%(query)s <%% n.content")
        elif method == "whole":
            setting, score, test = ("pg_trgm.similarity_threshold",
                                    "similarity(n.content, %(query)s)",
                                    "n.content %% %(query)s")
        else:
            raise ValidationError(f"must be 'word' or 'whole', got {method!r}", field="method")
        params: dict[str, Any] = {"query": query, "limit": limit}
        where = _bind_timeframe(params, frame)
        statement = f"""
            SELECT {_SEARCH_COLUMNS}, {score} AS similarity
            FROM nodes n WHERE {test}{where}
            ORDER BY similarity DESC, n.id LIMIT %(limit)s"""

        def compute() -> list[dict[str, Any]]:
            with self._transaction() as cur:
                # The operators read the threshold from a setting: set it for this
                # transaction only.
                cur.execute("SELECT set_config(%s, %s, true)", (setting, str(float(threshold))))
                return cur.execute(statement, params).fetchall()

        return self._cached(("search_fuzzy", query, limit, frame, float(threshold), method),
                            compute)

    def search_hybrid(
        self,
        *,
        query: str,
        limit: int = 20,
        timeframe: Timeframe = None,
        embedding_service: Any = None,
        embedding: Sequence[float] | np.ndarray | None = None,
        prefilter_limit: int = 100,
        fusion: Literal["weighted", "rrf"] = "weighted",
        match: TextMatch | None = None,
    ) -> list[dict[str, Any]]:
        """Hybrid search: full text and tags find candidates, vectors (and tags) rank them.

        ``fusion="weighted"`` is the reference algorithm: candidates are up to
        ``prefilter_limit`` full-text matches plus up to ``prefilter_limit`` nodes carrying a
        tag that matches a query word (:meth:`find_query_matching_tags`), all with embeddings;
        each gets ``combined_score = 0.7 * similarity + 0.3 * tag_boost`` where ``tag_boost`` is
        the share of the matching tags the node carries.

        ``fusion="rrf"`` is Reciprocal Rank Fusion (k = 60, the method HTM moved to): the top
        ``prefilter_limit`` of each of three lists (vector neighbours, full-text matches, tag
        matches) are fused by ``sum(1 / (60 + rank))``, so semantically close nodes are found
        even when no word matches.

        Parameters
        ----------
        query : str
            The question.
        limit : int
            Most results, 1 to 1000.
        timeframe : (start, end), optional
            Only nodes created in the range.
        embedding_service, embedding
            As in :meth:`search`.
        prefilter_limit : int
            Candidates taken from each list, 1 to 1000.
        fusion : {"weighted", "rrf"}
            The scoring method.
        match : {"all", "any", "websearch"}, optional
            Full-text matching (see :meth:`search_fulltext`); defaults to ``"all"`` for
            ``"weighted"`` (as the reference) and ``"any"`` for ``"rrf"``.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count``,
            ``similarity``, then for ``"weighted"``: ``tag_boost``, ``combined_score``; for
            ``"rrf"``: ``rrf_score``, ``vector_rank``, ``fulltext_rank``, ``tag_rank`` (None
            where the node was not in that list) and ``sources``. Best first.
        """
        query = validate_content(query, field="query")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        prefilter_limit = validate_positive_int(prefilter_limit, field="prefilter_limit",
                                                maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        if fusion not in ("weighted", "rrf"):
            raise ValidationError(f"must be 'weighted' or 'rrf', got {fusion!r}", field="fusion")
        match = match or ("all" if fusion == "weighted" else "any")
        tsquery = _tsquery(match)
        vector, dimension = self._query_vector(query, embedding, embedding_service)
        key = ("search_hybrid", query, limit, frame, prefilter_limit, fusion, match,
               _service_key(embedding_service) if embedding is None else vector.tobytes())

        def compute() -> list[dict[str, Any]]:
            tags = self.find_query_matching_tags(query)
            params: dict[str, Any] = {"query": query, "limit": limit, "tags": tags,
                                      "prefilter": prefilter_limit, "q": vector,
                                      "q_padded": vector}
            where = _bind_timeframe(params, frame)
            if fusion == "weighted":
                statement = _hybrid_weighted_sql(tsquery, where)
                ef_search = DEFAULT_EF_SEARCH
            else:
                native = dimension in self._native_dimensions
                if native:
                    params["q"] = vector[:dimension]
                statement = _hybrid_rrf_sql(tsquery, where, dimension if native else None)
                ef_search = max(DEFAULT_EF_SEARCH, prefilter_limit)
            with self._transaction() as cur:
                with cur.connection.pipeline():
                    self._search_settings(cur, ef_search=ef_search,
                                          filtered=frame is not None)
                    cur.execute(statement, params)
                rows = cur.fetchall()
            for row in rows:
                if fusion == "rrf":
                    row["sources"] = [name for name in ("vector", "fulltext", "tags")
                                      if row[f"{'tag' if name == 'tags' else name}_rank"]
                                      is not None]
            return rows

        return self._cached(key, compute)

    # -- tags -------------------------------------------------------------------------------

    def search_by_strategy(self, strategy: str, *, query: str, limit: int = 20,
                           timeframe: Timeframe = None, embedding: Any = None,
                           embedding_service: Any = None) -> SearchResults:
        """Any search, by name: what recall, the evaluation and the widgets choose from.

        ``vector`` (:meth:`search`), ``fulltext`` (every word), ``fulltext_any`` (any word,
        ranked), ``fuzzy`` (:meth:`search_fuzzy`), ``hybrid`` (the reference 0.7/0.3
        weighting) and ``rrf`` (reciprocal rank fusion). ``embedding`` or
        ``embedding_service`` is needed by vector, hybrid and rrf and ignored by the others.
        """
        options: dict[str, Any] = {"query": query, "limit": limit, "timeframe": timeframe}
        vectors = {"embedding": embedding, "embedding_service": embedding_service}
        if strategy == "vector":
            return self.search(**options, **vectors)  # type: ignore[return-value]
        if strategy in ("fulltext", "fulltext_any"):
            return self.search_fulltext(  # type: ignore[return-value]
                **options, match="any" if strategy == "fulltext_any" else "all")
        if strategy == "fuzzy":
            return self.search_fuzzy(**options)  # type: ignore[return-value]
        if strategy in ("hybrid", "rrf"):
            return self.search_hybrid(  # type: ignore[return-value]
                **options, **vectors, fusion="rrf" if strategy == "rrf" else "weighted")
        raise ValidationError(f"must be one of {', '.join(SEARCH_STRATEGIES)}, got "
                              f"{strategy!r}", field="strategy")

    def find_query_matching_tags(self, query: str) -> list[str]:
        """Tags in which some hierarchy level matches a word of the query.

        Words are the query's lowercase runs of letters and digits, three or more characters
        long. A tag matches when one of its ``:`` segments, or a ``-`` part of one, equals a
        word: ``"PostgreSQL database"`` finds ``database:postgresql`` and
        ``devel:lang:postgresql-plpython``... but ``"data"`` does not find ``database``.

        Returns
        -------
        list of str
            Matching tag names, sorted.
        """
        if not isinstance(query, str):
            raise ValidationError(f"must be a string, got {type(query).__name__}",
                                  field="query")
        words = sorted({w for w in re.findall(r"[a-z0-9]+", query.lower()) if len(w) >= 3})
        if not words:
            return []
        rows = self._fetch("""SELECT name FROM tags
                              WHERE regexp_split_to_array(name, '[:-]') && %s::text[]
                              ORDER BY name""", (words,))
        return [r["name"] for r in rows]

    def add_tag(self, *, node_id: int, tag: str, ancestors: bool = True) -> list[str]:
        """Tag a node. By default every ancestor is attached too, as HTM does.

        ``add_tag(node_id=7, tag="database:postgresql")`` also tags node 7 with ``database``,
        so that prefix and exact topic queries, popularity and co-occurrence see the whole
        hierarchy. Tagging twice is harmless.

        Returns
        -------
        list of str
            The tag names attached (the tag and, with ``ancestors``, its ancestors).

        Raises
        ------
        ValidationError
            A malformed tag.
        NotFoundError
            No such node.
        """
        node_id = validate_id(node_id, field="node_id")
        names = tag_ancestors(validate_tag(tag)) if ancestors else [validate_tag(tag)]
        with self._transaction() as cur:
            tag_ids = _ensure_tags(cur, names)
            try:
                cur.execute(_TAG_NODE, {"node_id": node_id,
                                        "tag_ids": [tag_ids[n] for n in names]})
            except pg_errors.ForeignKeyViolation as exc:
                raise NotFoundError(f"no node with id {node_id}") from exc
        self._cache.clear()
        return names

    def get_node_tags(self, node_id: int) -> list[str]:
        """Names of the tags on a node, sorted (empty for an unknown node)."""
        node_id = validate_id(node_id, field="node_id")
        rows = self._fetch("""SELECT t.name FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                              WHERE nt.node_id = %s ORDER BY t.name""", (node_id,))
        return [r["name"] for r in rows]

    def node_topics(self, node_id: int) -> list[str]:
        """Alias of :meth:`get_node_tags`."""
        return self.get_node_tags(node_id)

    def nodes_by_topic(self, topic_path: str, *, exact: bool = False,
                       limit: int = 50) -> list[dict[str, Any]]:
        """Nodes carrying a topic, newest first.

        ``exact=False`` matches whole segments: ``database`` finds nodes tagged ``database``
        or ``database:postgresql``, never ``databases``. ``exact=True`` needs the tag itself.

        Returns
        -------
        list of dict
            Every column of ``nodes`` except the vector.
        """
        topic = validate_tag(topic_path, field="topic_path")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        condition = "t.name = %(topic)s"
        if not exact:
            # Tags are validated to [a-z0-9:-], so the LIKE pattern has no wildcards of its own;
            # the text_pattern_ops index serves the prefix.
            condition += " OR t.name LIKE %(prefix)s"
        return self._fetch(f"""
            SELECT {_NODE_COLUMNS} FROM nodes
            WHERE id IN (SELECT nt.node_id FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                         WHERE {condition})
            ORDER BY created_at DESC, id DESC LIMIT %(limit)s""",
            {"topic": topic, "prefix": topic + ":%", "limit": limit})

    def search_by_tags(self, *, tags: Sequence[str], match_all: bool = False,
                       timeframe: Timeframe = None, limit: int = 20) -> list[dict[str, Any]]:
        """Nodes carrying any (or, with ``match_all``, all) of the given tags.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count``,
            ``matched_tags`` (list of the requested tags the node has), ``relevance`` (share
            of the requested tags matched, 0 to 1) and ``tags`` (all the node's tags), most
            relevant then newest first.
        """
        if isinstance(tags, str) or not isinstance(tags, Sequence) or not tags:
            raise ValidationError("must be a non-empty list of tags", field="tags")
        names = sorted({validate_tag(t, field="tags") for t in tags})
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        params: dict[str, Any] = {"tags": names, "limit": limit, "n": len(names)}
        where = _bind_timeframe(params, frame)
        having = "HAVING count(DISTINCT t.name) = %(n)s" if match_all else ""
        return self._fetch(f"""
            WITH matched AS (
                SELECT nt.node_id, array_agg(DISTINCT t.name ORDER BY t.name) AS matched_tags
                FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                WHERE t.name = ANY(%(tags)s::text[])
                GROUP BY nt.node_id {having})
            SELECT {_SEARCH_COLUMNS}, m.matched_tags,
                   cardinality(m.matched_tags)::float8 / %(n)s AS relevance,
                   ARRAY(SELECT t.name FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                         WHERE nt.node_id = n.id ORDER BY t.name) AS tags
            FROM matched m JOIN nodes n ON n.id = m.node_id
            WHERE true{where}
            ORDER BY relevance DESC, n.created_at DESC, n.id DESC LIMIT %(limit)s""", params)

    def popular_tags(self, *, limit: int = 20, timeframe: Timeframe = None) -> list[dict[str, Any]]:
        """Most used tags: ``[{"name": ..., "usage_count": ...}, ...]``, most used first.

        ``timeframe`` counts only nodes created in the range.
        """
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        params: dict[str, Any] = {"limit": limit}
        where = _bind_timeframe(params, frame).replace(" AND", "WHERE", 1)
        return self._fetch(f"""
            SELECT t.name, count(*) AS usage_count
            FROM node_tags nt JOIN tags t ON t.id = nt.tag_id JOIN nodes n ON n.id = nt.node_id
            {where}
            GROUP BY t.name ORDER BY usage_count DESC, t.name LIMIT %(limit)s""", params)

    def topic_relationships(self, *, min_shared_nodes: int = 2,
                            limit: int = 50) -> list[dict[str, Any]]:
        """Pairs of tags found together on nodes: ``topic1 < topic2``, ``shared_nodes``.

        Only pairs sharing at least ``min_shared_nodes`` nodes; most shared first.
        """
        min_shared = validate_positive_int(min_shared_nodes, field="min_shared_nodes")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        return self._fetch("""
            SELECT t1.name AS topic1, t2.name AS topic2,
                   count(DISTINCT nt1.node_id) AS shared_nodes
            FROM node_tags nt1
            JOIN node_tags nt2 ON nt1.node_id = nt2.node_id AND nt1.tag_id <> nt2.tag_id
            JOIN tags t1 ON t1.id = nt1.tag_id
            JOIN tags t2 ON t2.id = nt2.tag_id
            WHERE t1.name < t2.name
            GROUP BY t1.name, t2.name
            HAVING count(DISTINCT nt1.node_id) >= %(min)s
            ORDER BY shared_nodes DESC, topic1, topic2 LIMIT %(limit)s""",
            {"min": min_shared, "limit": limit})

    # -- bulk import ------------------------------------------------------------------------

    def bulk_add(
        self,
        contents: Sequence[str],
        *,
        robots: str | Sequence[str],
        embeddings: np.ndarray | None = None,
        tags: Sequence[Sequence[str]] | None = None,
        token_counts: Sequence[int] | None = None,
        remembered_at: Sequence[dt.datetime] | None = None,
        tag_ancestors_too: bool = True,
        defer_indexes: bool | None = None,
        embedding_model: tuple[str, str] | None = None,
    ) -> pd.DataFrame:
        """Remember many memories at once, with the same deduplication as :meth:`add`.

        Rows go in with one binary ``COPY`` and a few set-based statements, in a single
        transaction: either every row is stored or none is. Repeated content (within the
        batch or already stored) is stored once and counted in ``remember_count``.

        Parameters
        ----------
        contents : sequence of str
            The memories (stripped, validated as in :meth:`add`).
        robots : str or sequence of str
            Robot name for every row, or one name for all; robots are found or created.
        embeddings : numpy.ndarray, optional
            ``(n, d)`` vectors, ``d <= 2000``, finite, no all-zero rows.
        tags : sequence of sequences of str, optional
            Tags per row (ancestors are attached too unless ``tag_ancestors_too=False``).
        token_counts : sequence of int, optional
            Tokens per row (default 0).
        remembered_at : sequence of datetime, optional
            When each row was remembered (default now): sets ``created_at`` of new nodes,
            ``first/last_remembered_at`` and the event log, so that history can be imported.
        defer_indexes : bool, optional
            Drop the vector, full-text and trigram indexes of ``nodes`` before loading and
            rebuild them after, which is far faster than updating an HNSW index row by row.
            The default does so when the batch is larger than the table. Dropping an index
            locks ``nodes`` exclusively until the transaction ends, so other sessions can
            neither read nor write it during such a load. ``query_timeout`` does
            not apply to bulk loads.
        embedding_model : (provider, model), optional
            Which model produced ``embeddings``, recorded for the new nodes (see
            :meth:`check_embedding_model`).

        Returns
        -------
        pandas.DataFrame
            One row per input row: ``node_id`` (int64) and ``is_new`` (bool: this row created
            the node).
        """
        rows = _validate_bulk(contents, robots, embeddings, tags, token_counts, remembered_at,
                              tag_ancestors_too)
        provider, model = _embedding_model(embedding_model)
        n = len(rows.contents)
        if n == 0:
            return pd.DataFrame({"node_id": pd.Series(dtype="int64"),
                                 "is_new": pd.Series(dtype="bool")})
        with self._transaction() as cur:
            _lift_statement_timeout(cur)
            robot_ids = _find_or_create_robots(cur, rows.robot_names, rows.remembered_at)
            if defer_indexes is None:
                existing = cur.execute("SELECT reltuples::bigint AS n FROM pg_class "
                                       "WHERE oid = 'public.nodes'::regclass").fetchone()
                defer_indexes = n > max(int(existing["n"] if existing else 0), 0) and n >= 1000
            rebuild = _drop_search_indexes(cur) if defer_indexes else []
            cur.execute("""CREATE TEMP TABLE htm_bulk_staging (
                               ord int, content text, content_hash text, token_count int,
                               embedding vector, dimension int, robot_id bigint,
                               remembered_at timestamptz) ON COMMIT DROP""")
            with cur.copy("COPY htm_bulk_staging FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "text", "text", "int4", "vector", "int4", "int8",
                                "timestamptz"])
                for i in range(n):
                    vector = rows.embeddings[i] if rows.embeddings is not None else None
                    copy.write_row((i, rows.contents[i], rows.hashes[i], rows.token_counts[i],
                                    vector, rows.dimension if vector is not None else None,
                                    robot_ids[rows.robot_names[i]], rows.remembered_at[i]))
            cur.execute("CREATE INDEX ON htm_bulk_staging (content_hash)")
            cur.execute("ANALYZE htm_bulk_staging")
            new = cur.execute(f"""
                INSERT INTO nodes (content, content_hash, token_count, embedding,
                                   embedding_dimension, created_at, updated_at, last_accessed)
                SELECT DISTINCT ON (content_hash) content, content_hash, token_count,
                       CASE WHEN embedding IS NOT NULL THEN
                           (embedding::real[] || array_fill(0::real,
                               ARRAY[{MAX_EMBEDDING_DIMENSION} - dimension]))::vector
                       END,
                       dimension, remembered_at, remembered_at, remembered_at
                FROM htm_bulk_staging ORDER BY content_hash, remembered_at, ord
                ON CONFLICT (content_hash) DO NOTHING
                RETURNING id, content_hash, embedding_dimension""").fetchall()
            created = {r["content_hash"] for r in new}
            if provider is not None and rows.embeddings is not None:
                cur.execute("""INSERT INTO node_embedding_models (node_id, provider, model,
                                                                  dimension)
                               SELECT unnest(%s::bigint[]), %s, %s, %s""",
                            ([r["id"] for r in new], provider, model, rows.dimension))
            mapping = cur.execute("""
                SELECT s.ord, n.id FROM htm_bulk_staging s
                JOIN nodes n ON n.content_hash = s.content_hash ORDER BY s.ord""").fetchall()
            if len(mapping) != n:
                raise DatabaseError("bulk_add could not resolve every row to a node")
            cur.execute("""
                INSERT INTO robot_nodes AS rn (robot_id, node_id, first_remembered_at,
                    last_remembered_at, remember_count, created_at, updated_at)
                SELECT s.robot_id, n.id, min(s.remembered_at), max(s.remembered_at), count(*),
                       min(s.remembered_at), max(s.remembered_at)
                FROM htm_bulk_staging s JOIN nodes n ON n.content_hash = s.content_hash
                GROUP BY s.robot_id, n.id
                ON CONFLICT (robot_id, node_id) DO UPDATE
                   SET remember_count = rn.remember_count + EXCLUDED.remember_count,
                       last_remembered_at = greatest(rn.last_remembered_at,
                                                     EXCLUDED.last_remembered_at),
                       updated_at = CURRENT_TIMESTAMP""")
            node_of_row = [int(r["id"]) for r in mapping]
            if rows.tag_rows:
                tag_names = sorted({name for _, name in rows.tag_rows})
                tag_ids = _ensure_tags(cur, tag_names)
                # (node, tag) pairs are resolved here rather than with a join on the staging
                # table: ten times faster on 100k links.
                first_tagged: dict[tuple[int, int], dt.datetime] = {}
                for i, name in rows.tag_rows:
                    pair = (node_of_row[i], tag_ids[name])
                    when = rows.remembered_at[i]
                    if pair not in first_tagged or when < first_tagged[pair]:
                        first_tagged[pair] = when
                cur.execute("""CREATE TEMP TABLE htm_bulk_tags (node_id bigint, tag_id bigint,
                                   created_at timestamptz) ON COMMIT DROP""")
                with cur.copy("COPY htm_bulk_tags FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["int8", "int8", "timestamptz"])
                    for (node, tag), when in first_tagged.items():
                        copy.write_row((node, tag, when))
                cur.execute("""INSERT INTO node_tags (node_id, tag_id, created_at)
                               SELECT node_id, tag_id, created_at FROM htm_bulk_tags
                               ON CONFLICT (node_id, tag_id) DO NOTHING""")
            cur.execute("""
                INSERT INTO memory_events (occurred_at, kind, robot_id, node_id)
                SELECT s.remembered_at, 'remember', s.robot_id, n.id
                FROM htm_bulk_staging s JOIN nodes n ON n.content_hash = s.content_hash
                ORDER BY s.remembered_at, s.ord""")
            for statement in rebuild:
                _create_index(cur, statement)
        self._cache.clear()
        self._embedding_models = None
        node_ids = np.array(node_of_row, dtype=np.int64)
        first_seen: set[str] = set()
        is_new = np.zeros(n, dtype=bool)
        for i, digest in enumerate(rows.hashes):
            if digest in created and digest not in first_seen:
                is_new[i] = True
                first_seen.add(digest)
        return pd.DataFrame({"node_id": node_ids, "is_new": is_new})

    # -- robots -----------------------------------------------------------------------------

    def register_robot(self, robot_name: str, *, metadata: Mapping[str, Any] | None = None) -> int:
        """Find or create the robot of this name, mark it active, and return its id.

        Concurrent registrations of one name give one robot (an advisory lock on the name).
        """
        name = validate_content(robot_name, field="robot_name")
        if len(name) > 255:
            raise ValidationError("must be at most 255 characters", field="robot_name")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValidationError("must be a mapping", field="metadata")
        with self._transaction() as cur:
            _lock_robot_name(cur, name)
            row = cur.execute("""UPDATE robots SET last_active = CURRENT_TIMESTAMP
                                 WHERE id = (SELECT min(id) FROM robots WHERE name = %s)
                                 RETURNING id""", (name,)).fetchone()
            if row is None:
                row = cur.execute(
                    "INSERT INTO robots (name, metadata) VALUES (%s, %s) RETURNING id",
                    (name, Jsonb(dict(metadata)) if metadata else None),
                ).fetchone()
            assert row is not None
            return int(row["id"])

    def update_robot_activity(self, robot_id: int) -> None:
        """Set a robot's ``last_active`` to now (NotFoundError for an unknown robot)."""
        robot_id = validate_id(robot_id, field="robot_id")
        with self._transaction() as cur:
            cur.execute("UPDATE robots SET last_active = CURRENT_TIMESTAMP WHERE id = %s",
                        (robot_id,))
            if cur.rowcount == 0:
                raise NotFoundError(f"no robot with id {robot_id}")

    # -- statistics -------------------------------------------------------------------------

    def stats(self) -> MemoryStats:
        """Memory statistics, with the keys of the reference API.

        Returns
        -------
        dict
            ``total_nodes``, ``nodes_by_robot`` ({robot_id: nodes}), ``total_tags``,
            ``oldest_memory``, ``newest_memory``, ``active_robots`` (robots registered),
            ``robot_activity`` ([{id, name, last_active}]), ``database_size`` (bytes), and
            ``cache`` ({hits, misses, hit_rate, size}) only when the cache is enabled.
        """
        with self._transaction() as cur:
            totals = cur.execute("""
                SELECT (SELECT count(*) FROM nodes) AS total_nodes,
                       (SELECT count(*) FROM tags) AS total_tags,
                       (SELECT min(created_at) FROM nodes) AS oldest_memory,
                       (SELECT max(created_at) FROM nodes) AS newest_memory,
                       (SELECT count(*) FROM robots) AS active_robots,
                       pg_database_size(current_database()) AS database_size""").fetchone()
            by_robot = cur.execute("""SELECT robot_id, count(*) AS n FROM robot_nodes
                                      GROUP BY robot_id ORDER BY robot_id""").fetchall()
            activity = cur.execute("""SELECT id, name, last_active FROM robots
                                      ORDER BY last_active DESC NULLS LAST, id""").fetchall()
        assert totals is not None
        result: dict[str, Any] = {
            "total_nodes": totals["total_nodes"],
            "nodes_by_robot": {r["robot_id"]: r["n"] for r in by_robot},
            "total_tags": totals["total_tags"],
            "oldest_memory": totals["oldest_memory"],
            "newest_memory": totals["newest_memory"],
            "active_robots": totals["active_robots"],
            "robot_activity": activity,
            "database_size": totals["database_size"],
        }
        if self._cache.enabled:
            result["cache"] = self._cache.stats()
        return MemoryStats(result)

    def table_counts(self) -> pd.DataFrame:
        """Rows in each table of the memory schema.

        Returns
        -------
        pandas.DataFrame
            ``table`` (str) and ``rows`` (int64), one row per table, in schema order.
        """
        counts = self._fetch("""
            SELECT 'robots' AS table, count(*) AS rows, 1 AS position FROM robots
            UNION ALL SELECT 'nodes', count(*), 2 FROM nodes
            UNION ALL SELECT 'robot_nodes', count(*), 3 FROM robot_nodes
            UNION ALL SELECT 'tags', count(*), 4 FROM tags
            UNION ALL SELECT 'node_tags', count(*), 5 FROM node_tags
            UNION ALL SELECT 'memory_events', count(*), 6 FROM memory_events
            ORDER BY position""")
        return pd.DataFrame(counts, columns=["table", "rows"]).astype(
            {"table": "string", "rows": "int64"})

    def index_list(self) -> pd.DataFrame:
        """Indexes of the memory tables with their sizes and definitions.

        Returns
        -------
        pandas.DataFrame
            ``table`` (str), ``index`` (str), ``method`` (str: btree, gin, hnsw...),
            ``is_unique`` (bool), ``size_bytes`` (int64), ``definition`` (str), ordered by
            table and index.
        """
        return self._index_frame()[["table", "index", "method", "is_unique", "size_bytes",
                                    "definition"]].astype(
            {"table": "string", "index": "string", "method": "string", "is_unique": "bool",
             "size_bytes": "int64", "definition": "string"})

    def index_statistics(self) -> pd.DataFrame:
        """Cumulative usage counters of the memory tables' indexes, with sizes.

        Flushes this process's pending statistics first (``pg_stat_force_next_flush``,
        PostgreSQL 15+) and reads a fresh snapshot; other connections flush on their own within
        about a second. See :func:`htm_analytics.index_usage` for the columns.
        """
        self._flush_statistics()
        return self._index_frame()

    def _index_frame(self) -> pd.DataFrame:
        return self.fetch_frame(
            # last_idx_scan exists from PostgreSQL 16; through jsonb it is NULL before.
            """SELECT s.relname AS table, s.indexrelname AS index, am.amname AS method,
                      x.indisunique AS is_unique, x.indisprimary AS is_primary,
                      s.idx_scan, s.idx_tup_read, s.idx_tup_fetch,
                      (to_jsonb(s) ->> 'last_idx_scan')::timestamptz AS last_idx_scan,
                      pg_relation_size(s.indexrelid) AS size_bytes,
                      pg_get_indexdef(s.indexrelid) AS definition
               FROM pg_stat_user_indexes s
               JOIN pg_index x ON x.indexrelid = s.indexrelid
               JOIN pg_class i ON i.oid = s.indexrelid
               JOIN pg_am am ON am.oid = i.relam
               WHERE s.schemaname = 'public' AND s.relname = ANY(%s::text[])
               ORDER BY s.relname, s.indexrelname""",
            (list(_STATISTICS_TABLES),))

    def table_statistics(self) -> pd.DataFrame:
        """Per-table activity counters; see :func:`htm_analytics.table_health`."""
        self._flush_statistics()
        return self.fetch_frame(
            """SELECT relname AS table, n_live_tup, n_dead_tup, seq_scan,
                      coalesce(idx_scan, 0) AS idx_scan, n_tup_ins, n_tup_upd, n_tup_hot_upd,
                      n_tup_del, last_vacuum, last_autovacuum, last_analyze, last_autoanalyze,
                      pg_total_relation_size(relid) AS total_bytes
               FROM pg_stat_user_tables
               WHERE schemaname = 'public' AND relname = ANY(%s::text[])
               ORDER BY relname""", (list(_STATISTICS_TABLES),))

    @property
    def _server_version_num(self) -> int:
        return int(self.server_info["server_version_num"])

    def _flush_statistics(self) -> None:
        if self._server_version_num >= 150000:
            # Flushes when this transaction ends; the read that follows runs in a new
            # transaction, so it takes a fresh statistics snapshot.
            self._fetch("SELECT pg_stat_force_next_flush()")

    # -- native-dimension vector index --------------------------------------------------------

    def create_native_index(self, dimension: int, *, m: int = 16,
                            ef_construction: int = 64) -> str:
        """Build an HNSW index over the vectors of one model at their own dimension.

        The reference schema stores every vector zero-padded to 2000 dimensions, which makes
        its HNSW index 2-5x slower to build and query than one at a model's native size. This
        adds a partial expression index ``idx_nodes_embedding_<d>`` on
        ``subvector(embedding, 1, d)::vector(d)`` for rows with ``embedding_dimension = d``.
        The seed tables and index are untouched; :meth:`search` and RRF hybrid search use the
        native index automatically for query vectors of that dimension. ``query_timeout``
        does not apply to the build.

        Returns
        -------
        str
            The index name.
        """
        dimension = validate_positive_int(dimension, field="dimension",
                                          maximum=MAX_EMBEDDING_DIMENSION)
        m = validate_positive_int(m, field="m", maximum=100)
        ef_construction = validate_positive_int(ef_construction, field="ef_construction",
                                                maximum=1000)
        if ef_construction < 2 * m:
            raise ValidationError(f"must be at least 2 * m = {2 * m}", field="ef_construction")
        name = f"idx_nodes_embedding_{dimension}"
        with self._transaction() as cur:
            _lift_statement_timeout(cur)
            _create_index(cur, _native_index_sql(dimension, m, ef_construction, name))
        self._native_dimensions.add(dimension)
        self._cache.clear()
        return name

    @property
    def native_dimensions(self) -> frozenset[int]:
        """Dimensions that have a native HNSW index (:meth:`create_native_index`)."""
        return frozenset(self._native_dimensions)


    # -- pool sizing for concurrent clients ---------------------------------------------------

    def ensure_pool_size(self, size: int) -> int:
        """Let the connection pool hold at least ``size`` connections.

        For measurements with several client threads, each taking its own pooled connection
        (:func:`htm_analytics.concurrency_sweep`); a smaller pool would make threads queue.

        Returns
        -------
        int
            The pool's maximum size now.
        """
        size = validate_positive_int(size, field="size", maximum=1000)
        if self._closed:
            raise DatabaseError("this LongTermMemory is closed")
        if size > self._pool.max_size:
            self._pool.resize(self._pool.min_size, size)
        return self._pool.max_size

    # -- end of pool sizing for concurrent clients --------------------------------------------

    # -- query model check for search ---------------------------------------------------------

    def _check_query_model(self, service: Any, dimension: int) -> None:
        """Refuse a query vector that cannot be compared with the stored ones, as HTM.recall
        does: a service naming its model (``name`` and ``model``) must be the stored vectors'
        model (:meth:`check_embedding_model`); a bare vector must have a stored dimension."""
        provider, model = getattr(service, "name", None), getattr(service, "model", None)
        if isinstance(provider, str) and isinstance(model, str):
            self.check_embedding_model(provider, model, dimension)
            return
        if self._embedding_models is None:
            stored = self.embedding_models().astype(object)
            self._embedding_models = list(
                stored.where(stored.notna(), None).itertuples(index=False, name=None))
        dimensions = sorted({d for _, _, d, _ in self._embedding_models})
        if dimensions and dimension not in dimensions:
            raise EmbeddingError(
                f"the query vector has {dimension} dimensions but the stored vectors have "
                f"{', '.join(map(str, dimensions))}; vectors of different models are not "
                "comparable. Search with the model that made them.")

    # -- end of query model check for search --------------------------------------------------

    # -- tuning experiments -------------------------------------------------------------------

    @contextmanager
    def tuning_session(self) -> Iterator[TuningSession]:
        """One pooled connection for recall and index-build experiments.

        Everything a :class:`TuningSession` changes is per transaction (``SET LOCAL``) or
        dropped when the session ends, so the connection goes back to the pool as it came.
        """
        if self._closed:
            raise DatabaseError("this LongTermMemory is closed")
        try:
            with self._pool.connection() as conn:
                session = TuningSession(conn, self)
                try:
                    yield session
                finally:
                    session._drop_copy()
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=self.url) from exc
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseConnectionError(
                f"no pooled connection to {self.url} became free: {exc}") from exc


class TuningSession:
    """Vector searches under chosen HNSW settings, timed; index builds on a copy.

    Made by :meth:`LongTermMemory.tuning_session`. A *target* is ``"live"`` (the nodes table and
    the index its searches use), ``"padded"`` (the nodes table through the reference schema's
    padded 2000-d index even when a native one exists) or ``"copy"`` (an unlogged copy of the
    vectors at their own dimension, made by :meth:`copy_vectors`, for index-build
    experiments).
    """

    def __init__(self, conn: psycopg.Connection[Any], store: LongTermMemory) -> None:
        self._conn = conn
        self._store = store
        self._copy: str | None = None
        self._copy_index: str | None = None

    # The statement that a search of each target runs; filters only apply to "live".
    def _knn_statement(self, target: str, dimension: int, k: int,
                       filters: Mapping[str, Any] | None
                       ) -> tuple[sql.Composed, str, dict[str, Any]]:
        # target "live" searches as the store does; "padded" the reference schema's index
        # even when a native one exists; "copy" the experiment table.
        if target == "copy":
            if self._copy is None:
                raise ValidationError("call copy_vectors() first", field="target")
            if filters:
                raise ValidationError("filters apply to the live target only", field="filters")
            return sql.SQL("SELECT v.id FROM {} v ORDER BY v.embedding <=> %(q)s LIMIT {}").format(
                sql.Identifier(self._copy), sql.Literal(k)), self._copy_index or "", {}
        if target == "live" and dimension in self._store.native_dimensions:
            distance = _native_distance(dimension)
            index = f"idx_nodes_embedding_{dimension}"
        else:
            distance = sql.SQL("n.embedding <=> %(q)s")
            index = "idx_nodes_embedding"
        conditions, params = _filter_conditions(filters)
        conditions.insert(0, sql.SQL("n.embedding_dimension = {}").format(sql.Literal(dimension)))
        statement = sql.SQL("SELECT n.id FROM nodes n WHERE {} ORDER BY {} LIMIT {}").format(
            sql.SQL(" AND ").join(conditions), distance, sql.Literal(k))
        return statement, index, params

    def _query_parameter(self, target: str, vector: np.ndarray, dimension: int) -> np.ndarray:
        if target == "copy" or (target == "live" and dimension in self._store.native_dimensions):
            return np.ascontiguousarray(vector[:dimension], dtype=np.float32)
        padded = np.zeros(MAX_EMBEDDING_DIMENSION, dtype=np.float32)
        padded[:dimension] = vector[:dimension]
        return padded

    def vector_dimensions(self) -> dict[int, int]:
        """Stored embeddings per dimension: ``{dimension: rows}``."""
        rows = self._conn.execute(
            "SELECT embedding_dimension, count(*) FROM nodes "
            "WHERE embedding_dimension IS NOT NULL GROUP BY 1").fetchall()
        self._conn.commit()
        return {int(d): int(n) for d, n in rows}

    def stored_vectors(self, dimension: int, *, target: str = "live",
                       filters: Mapping[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, vectors)``: int64 ids and float32 ``(n, dimension)`` vectors of the target
        (live: rows of that dimension matching ``filters``), ordered by id."""
        params: dict[str, Any] = {}
        if target == "copy":
            query = sql.SQL("SELECT id, embedding FROM {} ORDER BY id").format(
                sql.Identifier(self._copy or ""))
        else:
            conditions, params = _filter_conditions(filters)
            conditions.insert(0, sql.SQL("n.embedding_dimension = {}").format(
                sql.Literal(dimension)))
            query = sql.SQL(
                "SELECT n.id, subvector(n.embedding, 1, {d}) AS embedding FROM nodes n "
                "WHERE {where} ORDER BY n.id").format(
                d=sql.Literal(dimension), where=sql.SQL(" AND ").join(conditions))
        ids: list[int] = []
        vectors: list[np.ndarray] = []
        with self._conn.transaction(), self._conn.cursor(binary=True) as cur:
            cur.execute(query, params)
            while rows := cur.fetchmany(10_000):
                ids.extend(r[0] for r in rows)
                vectors.extend(_to_numpy(r[1]) for r in rows)
        matrix = np.vstack(vectors) if vectors else np.zeros((0, dimension), dtype=np.float32)
        return np.asarray(ids, dtype=np.int64), matrix

    def knn(self, queries: np.ndarray, *, dimension: int, k: int, ef_search: int,
            iterative_scan: str | None = None, filters: Mapping[str, Any] | None = None,
            target: str = "live", exact: bool = False, force_index: bool = False,
            repeats: int = 1, progress: Any = None) -> dict[str, Any]:
        """Run every query ``repeats`` times under one setting, in one transaction.

        Settings are applied with ``SET LOCAL`` and read back with ``SHOW``. ``exact`` turns
        index scans off instead, for a ground truth computed by PostgreSQL itself.
        ``force_index`` turns sorting off, so that the planner cannot answer a filtered query
        by sorting the matching rows exactly and must walk the HNSW index.

        Returns
        -------
        dict
            ``ids`` (list of int64 arrays, the last repeat's results), ``seconds`` (float64
            array ``(repeats, n)``), ``settings`` (what ``SHOW`` reported), ``index`` (the
            index name the target should use) and ``used_index`` (whether EXPLAIN of the first
            query shows that index).
        """
        statement, index, filter_params = self._knn_statement(target, dimension, k, filters)
        settings = {"hnsw.ef_search": str(ef_search),
                    "hnsw.iterative_scan": iterative_scan or "off",
                    "enable_seqscan": "on" if exact else "off",
                    "enable_indexscan": "off" if exact else "on",
                    "enable_sort": "off" if force_index else "on",
                    "enable_incremental_sort": "off" if force_index else "on",
                    # Plan every execution under these settings: a cached generic plan from
                    # an earlier setting would ignore them.
                    "plan_cache_mode": "force_custom_plan"}
        if not self._store.supports_iterative_scan:
            if iterative_scan:
                raise ValidationError("needs pgvector 0.8 or later", field="iterative_scan")
            settings.pop("hnsw.iterative_scan")
        parameters = [self._query_parameter(target, q, dimension) for q in queries]
        seconds = np.zeros((repeats, len(parameters)), dtype=np.float64)
        found: list[np.ndarray] = []
        with self._conn.transaction(), self._conn.cursor() as cur:
            if exact:
                _lift_statement_timeout(cur)
            for name, value in settings.items():
                cur.execute("SELECT set_config(%s, %s, true)", (name, value))
            shown = {name: cur.execute(sql.SQL("SHOW {}").format(sql.Identifier(name)))
                     .fetchone()[0] for name in settings}  # type: ignore[index]
            if shown != settings:
                raise DatabaseError(f"settings did not apply: asked {settings}, got {shown}")
            used_index = False
            if parameters:
                plan = cur.execute(sql.SQL("EXPLAIN (FORMAT JSON) {}").format(statement),
                                   {"q": parameters[0], **filter_params}).fetchone()[0]  # type: ignore[index]
                used_index = index in _plan_index_names(plan)
            for repeat in range(repeats):
                found = []
                for i, parameter in enumerate(parameters):
                    started = time.perf_counter()
                    cur.execute(statement, {"q": parameter, **filter_params}, prepare=True)
                    rows = cur.fetchall()
                    seconds[repeat, i] = time.perf_counter() - started
                    found.append(np.fromiter((r[0] for r in rows), dtype=np.int64,
                                             count=len(rows)))
                    if progress is not None:
                        progress(1)
        return {"ids": found, "seconds": seconds, "settings": shown, "index": index,
                "used_index": used_index}

    def copy_vectors(self, dimension: int) -> int:
        """Copy the vectors of one dimension into an unlogged table for index experiments.

        An unlogged table, not a temporary one, so that PostgreSQL can build its indexes with
        parallel workers as it would on the live table. Dropped when the session ends.
        Returns the number of rows copied.
        """
        self._drop_copy()
        name = f"htm_analytics_bench_{os.getpid()}_{secrets.token_hex(3)}"
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.execute(sql.SQL(
                "CREATE UNLOGGED TABLE {name} AS SELECT id, "
                "subvector(embedding, 1, {d})::vector({d}) AS embedding FROM nodes "
                "WHERE embedding_dimension = {d}").format(
                name=sql.Identifier(name), d=sql.Literal(dimension)))
            rows = cur.rowcount
            cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
        self._copy = name
        return rows

    def build_copy_index(self, *, m: int, ef_construction: int) -> dict[str, Any]:
        """Build an HNSW index on the copy (replacing the previous one); time and size it."""
        if self._copy is None:
            raise ValidationError("call copy_vectors() first", field="target")
        self._drop_copy_index()
        name = f"{self._copy}_m{m}_efc{ef_construction}"
        with self._conn.transaction(), self._conn.cursor() as cur:
            _lift_statement_timeout(cur)
            started = time.perf_counter()
            _create_index(cur, sql.SQL(
                "CREATE INDEX {name} ON {table} USING hnsw (embedding vector_cosine_ops) "
                "WITH (m = {m}, ef_construction = {efc})").format(
                name=sql.Identifier(name), table=sql.Identifier(self._copy),
                m=sql.Literal(m), efc=sql.Literal(ef_construction)))
            build_seconds = time.perf_counter() - started
            size = cur.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()
        self._copy_index = name
        return {"index": name, "build_seconds": build_seconds,
                "index_bytes": int(size[0]) if size else 0}

    def setting(self, name: str) -> str:
        """The current value of a server setting (e.g. ``maintenance_work_mem``)."""
        row = self._conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
        self._conn.commit()
        return str(row[0]) if row else ""

    def index_parameters(self, index: str) -> dict[str, int]:
        """``m`` and ``ef_construction`` of an HNSW index (pgvector's defaults if unset)."""
        row = self._conn.execute(
            "SELECT c.reloptions FROM pg_class c WHERE c.relname = %s", (index,)).fetchone()
        self._conn.commit()
        options = dict(o.split("=", 1) for o in (row[0] or [])) if row else {}
        return {"m": int(options.get("m", 16)),
                "ef_construction": int(options.get("ef_construction", 64))}

    def _drop_copy_index(self) -> None:
        if self._copy_index:
            with self._conn.transaction():
                self._conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(
                    sql.Identifier(self._copy_index)))
            self._copy_index = None

    def _drop_copy(self) -> None:
        if self._conn.closed:
            return
        if self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self._conn.rollback()  # an interrupted experiment
        self._drop_copy_index()
        if self._copy:
            with self._conn.transaction():
                self._conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
                    sql.Identifier(self._copy)))
            self._copy = None


def _filter_conditions(filters: Mapping[str, Any] | None
                       ) -> tuple[list[sql.Composable], dict[str, Any]]:
    """Conditions on ``nodes n`` for benchmark filters (tag, robot, timeframe), with their
    bound parameters."""
    conditions: list[sql.Composable] = []
    params: dict[str, Any] = {}
    for name, value in (filters or {}).items():
        if name == "tag":
            params["filter_tag"] = validate_tag(value, field="filters")
            conditions.append(sql.SQL(
                "EXISTS (SELECT 1 FROM node_tags nt JOIN tags t ON t.id = nt.tag_id "
                "WHERE nt.node_id = n.id AND t.name = %(filter_tag)s)"))
        elif name == "robot":
            if not isinstance(value, str) or not value:
                raise ValidationError("the robot filter must be a robot name", field="filters")
            params["filter_robot"] = value
            conditions.append(sql.SQL(
                "EXISTS (SELECT 1 FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id "
                "WHERE rn.node_id = n.id AND r.name = %(filter_robot)s)"))
        elif name == "timeframe":
            frame = validate_timeframe(value, field="filters")
            if frame is not None:
                params["filter_start"], params["filter_end"] = frame
                conditions.append(sql.SQL(
                    "n.created_at BETWEEN %(filter_start)s AND %(filter_end)s"))
        else:
            raise ValidationError(f"unknown filter {name!r}: use tag, robot or timeframe",
                                  field="filters")
    return conditions, params


def _plan_index_names(plan: Any) -> set[str]:
    """Every index an EXPLAIN (FORMAT JSON) plan scans."""
    names: set[str] = set()
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "Index Name" in node:
                names.add(node["Index Name"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

def _embedding_model(value: Any) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(isinstance(v, str) and v.strip() for v in value)):
        raise ValidationError("must be a (provider, model) pair of names",
                              field="embedding_model")
    return value[0].strip(), value[1].strip()


def _to_numpy(value: Any) -> np.ndarray:
    """pgvector's loader returns an ndarray (<0.5) or a ``Vector`` (>=0.5): give float32."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def _service_key(service: Any) -> tuple[str, str]:
    """Cache-key part naming an embedding service by type and model, not by identity."""
    model = getattr(service, "model", None) or getattr(service, "name", None)
    return (f"{type(service).__module__}.{type(service).__qualname__}", str(model))


def _bind_timeframe(params: dict[str, Any],
                    frame: tuple[dt.datetime, dt.datetime] | None) -> str:
    """Add the timeframe's bounds to ``params``; return the SQL condition ('' for none)."""
    if frame is None:
        return ""
    params["start"], params["end"] = frame
    return _TIMEFRAME


def _tsquery(match: str) -> str:
    try:
        return _TSQUERY[match]
    except (KeyError, TypeError):
        raise ValidationError(f"must be one of 'all', 'any', 'websearch', got {match!r}",
                              field="match") from None


def _ensure_tags(cur: psycopg.Cursor[dict[str, Any]], names: list[str]) -> dict[str, int]:
    cur.execute(_ENSURE_TAGS, {"names": names})
    # A new statement: its snapshot sees tags that concurrent writers committed meanwhile.
    rows = cur.execute(_TAG_IDS, {"names": names}).fetchall()
    return {r["name"]: int(r["id"]) for r in rows}


def _lift_statement_timeout(cur: psycopg.Cursor[Any]) -> None:
    # Bulk loads and index builds are maintenance, not queries: query_timeout does not apply.
    cur.execute("SELECT set_config('statement_timeout', '0', true)")


def _create_index(cur: psycopg.Cursor[Any], statement: str | sql.Composable) -> None:
    """Run one CREATE INDEX with as many parallel workers as the server allows.

    PostgreSQL sizes build workers by the table's heap, but padded vectors live in TOAST, so
    the heap of ``nodes`` looks small and HNSW builds get no worker below ~15k rows and fewer
    than allowed below ~45k (pgvector#397). Lifting ``min_parallel_table_scan_size`` for
    this transaction leaves the choice to ``max_parallel_maintenance_workers``. A parallel HNSW build keeps its graph in shared
    memory of ``maintenance_work_mem`` bytes; where the server cannot have that (a small
    ``/dev/shm``, as in Docker) the build is repeated serially instead of failing.
    """
    cur.execute("SELECT set_config('min_parallel_table_scan_size', '0', true)")
    try:
        with cur.connection.transaction():  # a savepoint: a failed build leaves the rest
            cur.execute(statement)
    except (psycopg.errors.DiskFull, psycopg.errors.OutOfMemory):
        cur.execute("SELECT set_config('max_parallel_maintenance_workers', '0', true)")
        cur.execute(statement)


def _lock_robot_name(cur: psycopg.Cursor[Any], name: str) -> None:
    # robots.name has no unique index in the reference schema; an advisory lock on the name
    # makes find-or-create safe under concurrency.
    cur.execute("SELECT pg_advisory_xact_lock(hashtext('htm_robot:' || %s))", (name,))


def _find_or_create_robots(cur: psycopg.Cursor[dict[str, Any]], names: Sequence[str],
                           times: Sequence[dt.datetime]) -> dict[str, int]:
    first: dict[str, dt.datetime] = {}
    last: dict[str, dt.datetime] = {}
    for name, when in zip(names, times):
        first[name] = min(first.get(name, when), when)
        last[name] = max(last.get(name, when), when)
    ids: dict[str, int] = {}
    for name in sorted(first):
        _lock_robot_name(cur, name)
        row = cur.execute("""UPDATE robots SET last_active = greatest(last_active, %s)
                             WHERE id = (SELECT min(id) FROM robots WHERE name = %s)
                             RETURNING id""", (last[name], name)).fetchone()
        if row is None:
            row = cur.execute("""INSERT INTO robots (name, created_at, last_active)
                                 VALUES (%s, %s, %s) RETURNING id""",
                              (name, first[name], last[name])).fetchone()
        assert row is not None
        ids[name] = int(row["id"])
    return ids


# Indexes that make row-by-row loading slow and are cheaper to rebuild after a bulk load.
_DEFERRABLE_INDEXES = (r"^(idx_nodes_(embedding(_[0-9]+)?|content_gin|content_trgm)"
                       r"|idx_node_search_vectors_content_tsv)$")


def _drop_search_indexes(cur: psycopg.Cursor[dict[str, Any]]) -> list[str]:
    """Drop the deferrable indexes; return their definitions (from the catalog) to rebuild."""
    rows = cur.execute("""SELECT indexname, indexdef FROM pg_indexes
                          WHERE schemaname = 'public'
                            AND tablename IN ('nodes', 'node_search_vectors')
                            AND indexname ~ %s ORDER BY indexname""",
                       (_DEFERRABLE_INDEXES,)).fetchall()
    for row in rows:
        cur.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(row["indexname"])))
    return [row["indexdef"] for row in rows]


class _BulkRows:
    """Validated, column-oriented input of :meth:`LongTermMemory.bulk_add`."""

    def __init__(self) -> None:
        self.contents: list[str] = []
        self.hashes: list[str] = []
        self.robot_names: list[str] = []
        self.token_counts: list[int] = []
        self.remembered_at: list[dt.datetime] = []
        self.embeddings: np.ndarray | None = None
        self.dimension: int | None = None
        self.tag_rows: list[tuple[int, str]] = []


def _validate_bulk(contents: Any, robots: Any, embeddings: Any, tags: Any, token_counts: Any,
                   remembered_at: Any, with_ancestors: bool) -> _BulkRows:
    if isinstance(contents, str) or not isinstance(contents, Sequence | pd.Series | np.ndarray):
        raise ValidationError("must be a sequence of strings", field="contents")
    rows = _BulkRows()
    n = len(contents)
    rows.contents = [validate_content(c, field=f"contents[{i}]") for i, c in enumerate(contents)]
    rows.hashes = [content_hash(c) for c in rows.contents]

    def per_row(value: Any, field: str) -> list[Any]:
        if isinstance(value, str) or not hasattr(value, "__len__") or len(value) != n:
            raise ValidationError(f"must have one entry per content ({n})", field=field)
        return list(value)

    names = [robots] * n if isinstance(robots, str) else per_row(robots, "robots")
    rows.robot_names = [validate_content(r, field=f"robots[{i}]") for i, r in enumerate(names)]
    if token_counts is None:
        rows.token_counts = [0] * n
    else:
        rows.token_counts = []
        for i, t in enumerate(per_row(token_counts, "token_counts")):
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < 2**31:
                raise ValidationError(f"must be an integer >= 0, got {t!r}",
                                      field=f"token_counts[{i}]")
            rows.token_counts.append(int(t))
    now = dt.datetime.now(dt.UTC)
    if remembered_at is None:
        rows.remembered_at = [now] * n
    else:
        rows.remembered_at = []
        for i, when in enumerate(per_row(remembered_at, "remembered_at")):
            start, _ = validate_timeframe((when, when), field=f"remembered_at[{i}]") or (now, now)
            rows.remembered_at.append(start)
    if embeddings is not None:
        array = np.asarray(embeddings, dtype=np.float32)
        if array.ndim != 2 or array.shape[0] != n:
            raise ValidationError(f"must be an (n={n}, d) array, got shape {array.shape}",
                                  field="embeddings")
        if not 0 < array.shape[1] <= MAX_EMBEDDING_DIMENSION:
            raise ValidationError(f"must have 1 to {MAX_EMBEDDING_DIMENSION} columns, got "
                                  f"{array.shape[1]}", field="embeddings")
        finite = np.isfinite(array).all(axis=1)
        nonzero = np.abs(array).max(axis=1) > 0 if finite.all() else finite
        bad = np.flatnonzero(~(finite & nonzero))
        if bad.size:
            raise ValidationError(f"row {int(bad[0])} is all zeros or not finite",
                                  field="embeddings")
        rows.embeddings = np.ascontiguousarray(array)
        rows.dimension = int(array.shape[1])
    if tags is not None:
        for i, row_tags in enumerate(per_row(tags, "tags")):
            if isinstance(row_tags, str) or not hasattr(row_tags, "__iter__"):
                raise ValidationError("must be a list of tags per row", field=f"tags[{i}]")
            names_for_row: set[str] = set()
            for tag in row_tags:
                tag = validate_tag(tag, field=f"tags[{i}]")
                names_for_row.update(tag_ancestors(tag) if with_ancestors else [tag])
            rows.tag_rows.extend((i, name) for name in sorted(names_for_row))
    return rows


def _native_distance(dimension: int) -> sql.Composed:
    # Literals, not parameters: the planner matches the index expression only against
    # constants.
    return sql.SQL("(subvector(n.embedding, 1, {d})::vector({d})) <=> %(q)s").format(
        d=sql.Literal(dimension))


def _native_index_sql(dimension: int, m: int, ef_construction: int, name: str) -> sql.Composed:
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON nodes USING hnsw "
        "((subvector(embedding, 1, {d})::vector({d})) vector_cosine_ops) "
        "WITH (m = {m}, ef_construction = {efc}) WHERE embedding_dimension = {d}").format(
        name=sql.Identifier(name), d=sql.Literal(dimension), m=sql.Literal(m),
        efc=sql.Literal(ef_construction))


def _native_index_dimensions(conn: psycopg.Connection[Any]) -> list[int]:
    rows = conn.execute("""SELECT indexname FROM pg_indexes
                           WHERE schemaname = 'public' AND tablename = 'nodes'
                             AND indexname ~ '^idx_nodes_embedding_[0-9]+$'""").fetchall()
    return sorted(int(r[0].rsplit("_", 1)[1]) for r in rows)


def _hybrid_weighted_sql(tsquery: str, where: str) -> str:
    return f"""
        WITH fulltext AS (
            SELECT n.id FROM nodes n JOIN node_search_vectors sv ON sv.node_id = n.id
                CROSS JOIN (SELECT {tsquery} AS q) AS tsq
            WHERE sv.content_tsv @@ q AND n.embedding IS NOT NULL{where}
            ORDER BY ts_rank(sv.content_tsv, q) DESC, n.id
            LIMIT %(prefilter)s),
        tagged AS (
            SELECT nt.node_id AS id FROM node_tags nt
            JOIN tags t ON t.id = nt.tag_id JOIN nodes n ON n.id = nt.node_id
            WHERE t.name = ANY(%(tags)s::text[]) AND n.embedding IS NOT NULL{where}
            GROUP BY nt.node_id ORDER BY count(*) DESC, nt.node_id LIMIT %(prefilter)s),
        candidates AS (SELECT id FROM fulltext UNION SELECT id FROM tagged),
        scored AS (
            SELECT {_SEARCH_COLUMNS}, 1 - (n.embedding <=> %(q)s) AS similarity,
                   (SELECT count(DISTINCT nt.tag_id) FROM node_tags nt
                    JOIN tags t ON t.id = nt.tag_id
                    WHERE nt.node_id = n.id AND t.name = ANY(%(tags)s::text[]))::float8
                   / greatest(cardinality(%(tags)s::text[]), 1) AS tag_boost
            FROM candidates c JOIN nodes n ON n.id = c.id)
        SELECT *, {HYBRID_SIMILARITY_WEIGHT} * similarity + {HYBRID_TAG_WEIGHT} * tag_boost
                  AS combined_score
        FROM scored ORDER BY combined_score DESC, id LIMIT %(limit)s"""


def _hybrid_rrf_sql(tsquery: str, where: str, native_dimension: int | None) -> sql.Composed:
    if native_dimension is None:
        distance: sql.Composable = sql.SQL("n.embedding <=> %(q)s")
        has_vector: sql.Composable = sql.SQL("n.embedding IS NOT NULL")
    else:
        distance = _native_distance(native_dimension)
        has_vector = sql.SQL("n.embedding_dimension = {}").format(sql.Literal(native_dimension))
    return sql.SQL(f"""
        WITH vector_arm AS (
            SELECT id, row_number() OVER (ORDER BY distance, id) AS r FROM (
                SELECT n.id, {{distance}} AS distance FROM nodes n
                WHERE {{has_vector}}{where}
                ORDER BY {{distance}} LIMIT %(prefilter)s) s),
        fulltext_arm AS (
            SELECT id, row_number() OVER (ORDER BY rank DESC, id) AS r FROM (
                SELECT n.id, ts_rank(sv.content_tsv, q) AS rank
                FROM nodes n JOIN node_search_vectors sv ON sv.node_id = n.id
                CROSS JOIN (SELECT {tsquery} AS q) AS tsq
                WHERE sv.content_tsv @@ q{where}
                ORDER BY rank DESC, n.id LIMIT %(prefilter)s) s),
        tag_arm AS (
            SELECT id, row_number() OVER (ORDER BY matches DESC, id) AS r FROM (
                SELECT nt.node_id AS id, count(*) AS matches
                FROM node_tags nt JOIN tags t ON t.id = nt.tag_id JOIN nodes n ON n.id = nt.node_id
                WHERE t.name = ANY(%(tags)s::text[]){where}
                GROUP BY nt.node_id ORDER BY matches DESC, nt.node_id LIMIT %(prefilter)s) s),
        fused AS (
            SELECT id, sum(1.0 / ({RRF_K} + r))::float8 AS rrf_score,
                   min(r) FILTER (WHERE arm = 'v') AS vector_rank,
                   min(r) FILTER (WHERE arm = 'f') AS fulltext_rank,
                   min(r) FILTER (WHERE arm = 't') AS tag_rank
            FROM (SELECT id, r, 'v' AS arm FROM vector_arm
                  UNION ALL SELECT id, r, 'f' FROM fulltext_arm
                  UNION ALL SELECT id, r, 't' FROM tag_arm) arms
            GROUP BY id)
        SELECT {_SEARCH_COLUMNS},
               CASE WHEN n.embedding IS NOT NULL THEN 1 - (n.embedding <=> %(q_padded)s) END
                   AS similarity,
               f.rrf_score, f.vector_rank, f.fulltext_rank, f.tag_rank
        FROM fused f JOIN nodes n ON n.id = f.id
        ORDER BY f.rrf_score DESC, n.id LIMIT %(limit)s""").format(
        distance=distance, has_vector=has_vector)
