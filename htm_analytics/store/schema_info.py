"""What a database holds, learnt once when a store opens: which HTM era wrote its tables,
which of this toolkit's additions are installed, and whether the role may write.

HTM databases come from three writers: the seed-era Ruby gem (``nodes.in_working_memory``,
``robots.metadata``), the current gem (0.0.32: ``deleted_at`` soft deletes, ``nodes.metadata``,
``robot_nodes.working_memory``) and this toolkit (the seed schema plus its own tables). The
store reads every one of them without changing it; :class:`SchemaInfo` tells the store which
columns and tables it may rely on, and :meth:`SchemaInfo.read_prefix` gives the statement
prefix that makes every era look like one schema to a read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["SchemaInfo", "detect_schema", "EVENT_TRIGGERS_VERSION", "FORGET_EVENTS_VERSION",
           "derived_dimension_sql", "prefix_read", "TOOLKIT_ADDITIONS"]

EVENT_TRIGGERS_VERSION = 7
"""The migration from which triggers write the remember and delete events for every writer."""

FORGET_EVENTS_VERSION = 10
"""The migration from which the event log also has ``restore`` and ``purge`` events."""

TOOLKIT_ADDITIONS = ("memory_events", "node_embedding_models", "node_search_vectors",
              "import_records", "node_lexicon", "memory_query_vectors")

_DETECT = """
SELECT (SELECT coalesce(jsonb_object_agg(c.relname, (
            SELECT jsonb_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
            WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)), '{}')
        FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
        WHERE ns.nspname = 'public' AND c.relkind IN ('r', 'p')
          AND c.relname = ANY(%(tables)s::text[])
          -- a table this role may not read is, to it, absent
          AND has_table_privilege(c.oid, 'SELECT')) AS columns,
       CASE WHEN to_regclass('public.htm_analytics_migrations') IS NOT NULL
            THEN has_table_privilege('public.htm_analytics_migrations', 'SELECT') END
           AS can_read_migrations,
       CASE WHEN to_regclass('public.nodes') IS NOT NULL
            THEN has_table_privilege('public.nodes', 'INSERT') END AS can_write,
       pg_is_in_recovery() AS in_recovery,
       (SELECT min(indexname::text) FROM pg_indexes
        WHERE schemaname = 'public' AND tablename = 'nodes'
          AND indexdef LIKE '%%USING gin (to_tsvector(''english''::regconfig, content))')
           AS content_fulltext_index,
       (SELECT coalesce(jsonb_object_agg(c.relname, (
            SELECT jsonb_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
            WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              AND a.atttypid = 'timestamp without time zone'::regtype)), '{}')
        FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
        WHERE ns.nspname = 'public' AND c.relkind IN ('r', 'p')
          AND c.relname = ANY(%(tables)s::text[])) AS local_time_columns,
       current_setting('TimeZone') AS server_timezone,
       -- the query log's function (migration 011), and whether this role may call it
       coalesce((SELECT bool_or(has_function_privilege(p.oid, 'EXECUTE')) FROM pg_proc p
                 JOIN pg_namespace ns ON ns.oid = p.pronamespace
                 WHERE ns.nspname = 'public'
                   AND p.proname = 'htm_analytics_log_query_vector'), false) AS can_log_queries
"""

# The tables a read sees through the prefix (the toolkit's own are written in UTC).
_HTM_TABLES = ("robots", "nodes", "robot_nodes", "tags", "node_tags")


# Dimensions of the common embedding models, tried first (nomic-embed-text, the gem's default,
# then MiniLM, OpenAI, mxbai...): each is two reads of components, where the general rule
# below formats the whole vector as text (about 10x slower on a padded 2000-d vector).
_COMMON_DIMENSIONS = (768, 384, 1536, 1024, 512, 256)


def derived_dimension_sql(alias: str = "") -> str:
    """The dimension of a vector stored zero-padded without its ``embedding_dimension`` (the
    current gem never writes it): the position of its last non-zero component.

    Immutable and without a subquery, so that a partial index's predicate can use it
    (:meth:`create_native_index`) and the planner matches it with the same expression in a
    query. A common model dimension ``d`` is recognised by a non-zero ``d``-th component and
    nothing after it; any other by pgvector's text form with its trailing zeros trimmed (a
    non-zero number always has a character other than ``,``, ``0`` and ``]``).
    """
    prefix = f"{alias}." if alias else ""
    column = f"{prefix}embedding"
    dims = f"vector_dims({column})"
    common = " ".join(
        f"WHEN {dims} >= {d} AND vector_norm(subvector({column}, {d}, 1)) > 0 AND ({dims} = {d}"
        f" OR vector_norm(subvector({column}, {d + 1}, greatest({dims} - {d}, 1))) = 0) "
        f"THEN {d}" for d in _COMMON_DIMENSIONS)
    return (f"coalesce({prefix}embedding_dimension, CASE WHEN {column} IS NULL THEN NULL "
            f"{common} ELSE array_length(string_to_array(rtrim({column}::text, ',0]'), ','), 1)"
            " END)")


_TABLES = ["robots", "nodes", "robot_nodes", "tags", "node_tags", *TOOLKIT_ADDITIONS]


@dataclass(frozen=True)
class SchemaInfo:
    """What the database has, detected once by :func:`detect_schema`.

    Attributes
    ----------
    columns : dict of str to tuple of str
        The columns of each HTM table and toolkit addition present in ``public`` and readable
        by this role.
    additions_version : int or None
        The highest toolkit migration applied (``htm_analytics_migrations``), None if none.
    can_write : bool
        Whether the role may insert into ``nodes`` (never on a standby).
    in_recovery : bool
        Whether the server is a standby (``pg_is_in_recovery()``): a read-only replica.
    has_content_fulltext_index : bool
        Whether ``nodes`` has the seed's GIN index on ``to_tsvector('english', content)``
        (used to find content stored unstripped).
    content_fulltext_index : str or None
        Its name (its statistics stand for ``node_search_vectors``' where that is absent).
    applied_migrations : frozenset of int
        The toolkit migrations applied (the versions are not all installed in order when
        branches of the toolkit ship them apart).
    can_log_queries : bool
        Whether the query log (migration 011) is installed and this role may write to it
        (``EXECUTE`` on ``htm_analytics_log_query_vector``; never on a standby).
    """

    columns: dict[str, tuple[str, ...]]
    additions_version: int | None
    can_write: bool
    in_recovery: bool = False
    has_content_fulltext_index: bool = False
    content_fulltext_index: str | None = None
    applied_migrations: frozenset[int] = frozenset()
    local_time_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    writer_timezone: str = "UTC"
    writer_timezone_given: bool = False
    can_log_queries: bool = False

    @property
    def reads_local_time(self) -> bool:
        """Whether HTM tables have ``timestamp without time zone`` columns (the current gem's
        Sequel migrations make them and write its process's local time into them): the
        store reads them as times of :attr:`writer_timezone`."""
        return any(self.local_time_columns.get(t) for t in _HTM_TABLES)

    @property
    def derives_dimensions(self) -> bool:
        """Whether vector dimensions are derived from the vectors where
        ``embedding_dimension`` is NULL (the current gem never writes it)."""
        return self.soft_deletes and self.has_column("nodes", "embedding_dimension")

    def dimension_sql(self, alias: str) -> str:
        """The vector dimension of ``alias``'s row of ``public.nodes`` (no alias: ``""``) as
        reads see it:
        derived from the vector where the writer leaves ``embedding_dimension`` NULL
        (:attr:`derives_dimensions`), the native indexes' predicate included."""
        if self.derives_dimensions:
            return derived_dimension_sql(alias)
        return f"{alias}.embedding_dimension" if alias else "embedding_dimension"

    def with_writer_timezone(self, zone: str, *, given: bool) -> SchemaInfo:
        """These facts, with the time zone in which local-time columns are read."""
        return replace(self, writer_timezone=zone, writer_timezone_given=given)

    def has_table(self, table: str) -> bool:
        """Whether ``public.<table>`` exists."""
        return table in self.columns

    def has_column(self, table: str, column: str) -> bool:
        """Whether ``public.<table>`` has ``column``."""
        return column in self.columns.get(table, ())

    @property
    def era(self) -> str:
        """``"current gem"`` (soft deletes), ``"seed"`` (``in_working_memory``) or ``"unknown"``."""
        if self.has_column("nodes", "deleted_at"):
            return "current gem"
        if self.has_column("nodes", "in_working_memory"):
            return "seed"
        return "unknown"

    @property
    def soft_deletes(self) -> bool:
        """Whether rows are soft-deleted (``nodes.deleted_at``, the current gem)."""
        return self.has_column("nodes", "deleted_at")

    @property
    def working_memory_column(self) -> str | None:
        """``"nodes.in_working_memory"``, ``"robot_nodes.working_memory"`` or None."""
        if self.has_column("nodes", "in_working_memory"):
            return "nodes.in_working_memory"
        if self.has_column("robot_nodes", "working_memory"):
            return "robot_nodes.working_memory"
        return None

    @property
    def additions(self) -> tuple[str, ...]:
        """The toolkit's tables present."""
        return tuple(t for t in TOOLKIT_ADDITIONS if self.has_table(t))

    @property
    def has_event_log(self) -> bool:
        return self.has_table("memory_events")

    @property
    def event_triggers(self) -> bool:
        """Whether triggers record remembers and deletes (then the store must not)."""
        return EVENT_TRIGGERS_VERSION in self.applied_migrations

    def describe(self) -> str:
        """One sentence for ``status`` and the report."""
        era = {"current gem": "current HTM gem schema (soft deletes, metadata, working memory "
                              "on robot_nodes)",
               "seed": "seed-era HTM schema (in_working_memory on nodes)",
               "unknown": "HTM tables of an unrecognised version"}[self.era]
        if self.additions_version is None and not self.additions:
            added = "no htm_analytics additions (read-only analysis; trends approximate)"
        else:
            added = (f"htm_analytics additions version {self.additions_version} "
                     f"({', '.join(self.additions) or 'none of its tables'})")
        if self.in_recovery:
            access = "hot standby: read-only (writes go to the primary)"
        else:
            access = "this role may write" if self.can_write else "read-only role"
        notes = ""
        if self.derives_dimensions:
            notes += ("; vector dimensions not recorded by the writer are derived from the "
                      "vectors")
        if self.reads_local_time:
            source = ("as given" if self.writer_timezone_given else
                      "assumed: the server's time zone; set writer_timezone or "
                      "HTM_WRITER_TIMEZONE")
            notes += (f"; timestamp without time zone columns read as local time of "
                      f"{self.writer_timezone} ({source})")
        return f"{era}; {added}; {access}{notes}"

    def as_dict(self) -> dict[str, Any]:
        """The facts as plain values (for JSON output)."""
        return {"era": self.era, "soft_deletes": self.soft_deletes,
                "working_memory": self.working_memory_column,
                "metadata": self.has_column("nodes", "metadata"),
                "additions": list(self.additions), "additions_version": self.additions_version,
                "event_triggers": self.event_triggers, "can_write": self.can_write,
                "standby": self.in_recovery,
                "derived_dimensions": self.derives_dimensions,
                "local_time_zone": self.writer_timezone if self.reads_local_time else None}

    def read_prefix(self) -> str:
        """CTEs that shadow the tables so that a read sees one schema whatever the era.

        Live rows only where rows are soft-deleted; ``nodes.in_working_memory`` computed from
        ``robot_nodes.working_memory`` where the gem keeps it there; the seed's full-text
        expression (which its GIN index serves) where ``node_search_vectors`` is absent; empty
        event and embedding-model tables where those are absent. Empty when nothing is needed.
        ``NOT MATERIALIZED`` lets the planner inline them, so indexes keep serving the reads.
        """
        ctes: list[str] = []
        for table in _HTM_TABLES:
            if cte := self._table_cte(table):
                ctes.append(cte)
        if not self.has_table("node_search_vectors"):
            # The seed's expression, so that its GIN index idx_nodes_content_gin serves it.
            live_only = " WHERE s.deleted_at IS NULL" if self.soft_deletes else ""
            ctes.append("node_search_vectors AS NOT MATERIALIZED (SELECT s.id AS node_id, "
                        "to_tsvector('english', s.content) AS content_tsv "
                        f"FROM public.nodes s{live_only})")
        elif self.soft_deletes:
            ctes.append("node_search_vectors AS NOT MATERIALIZED (SELECT v.* FROM "
                        "public.node_search_vectors v WHERE EXISTS (SELECT 1 FROM public.nodes"
                        " d WHERE d.id = v.node_id AND d.deleted_at IS NULL))")
        if not self.has_table("memory_events"):
            ctes.append("memory_events AS (SELECT NULL::bigint AS id, "
                        "NULL::timestamptz AS occurred_at, NULL::text AS kind, "
                        "NULL::bigint AS robot_id, NULL::bigint AS node_id WHERE false)")
        if not self.has_table("node_embedding_models"):
            ctes.append("node_embedding_models AS (SELECT NULL::bigint AS node_id, "
                        "NULL::text AS provider, NULL::text AS model, NULL::integer AS dimension,"
                        " NULL::timestamptz AS created_at WHERE false)")
        return ", ".join(ctes)

    def _table_cte(self, table: str) -> str | None:
        """The CTE standing for ``table`` in reads, or None when the table reads as it is."""
        if not self.has_table(table):
            return None
        conditions = []
        if self.has_column(table, "deleted_at"):
            conditions.append("x.deleted_at IS NULL")
            if table in ("robot_nodes", "node_tags") and self.soft_deletes:
                # links of a soft-deleted memory go with it
                conditions.append("EXISTS (SELECT 1 FROM public.nodes d WHERE d.id = x.node_id"
                                  " AND d.deleted_at IS NULL)")
        extra = ""
        if table == "nodes" and not self.has_column("nodes", "in_working_memory"):
            if self.has_column("robot_nodes", "working_memory"):
                rn_live = " AND w.deleted_at IS NULL" if self.has_column(
                    "robot_nodes", "deleted_at") else ""
                flag = ("EXISTS (SELECT 1 FROM public.robot_nodes w WHERE w.node_id = x.id "
                        f"AND w.working_memory{rn_live})")
            else:
                flag = "false"
            extra = f", {flag} AS in_working_memory"
        local = self.local_time_columns.get(table, ()) if self.reads_local_time else ()
        derive = table == "nodes" and self.derives_dimensions
        if not (conditions or extra or local or derive):
            return None
        if local or derive:
            zone = sql.Literal(self.writer_timezone).as_string(None)
            columns = []
            for column in self.columns[table]:
                name = sql.Identifier(column).as_string(None)
                if column in local:
                    columns.append(f"(x.{name} AT TIME ZONE {zone}) AS {name}")
                elif derive and column == "embedding_dimension":
                    columns.append(f"{derived_dimension_sql('x')} AS embedding_dimension")
                else:
                    columns.append(f"x.{name}")
            selected = ", ".join(columns)
        else:
            selected = "x.*"
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        return (f"{table} AS NOT MATERIALIZED (SELECT {selected}{extra} "
                f"FROM public.{table} x{where})")


def detect_schema(conn: psycopg.Connection[Any]) -> SchemaInfo:
    """Read the catalog once: tables, columns, toolkit migrations, write privilege."""
    row = conn.execute(_DETECT, {"tables": _TABLES}).fetchone()
    assert row is not None
    (columns_json, can_read_migrations, can_write, in_recovery, fulltext, local_json, zone,
     can_log_queries) = row
    applied: frozenset[int] = frozenset()
    if can_read_migrations:
        applied = frozenset(int(r[0]) for r in conn.execute(
            "SELECT version FROM public.htm_analytics_migrations").fetchall())
    return SchemaInfo(columns={t: tuple(c or ()) for t, c in (columns_json or {}).items()},
                      additions_version=max(applied, default=None),
                      can_write=bool(can_write) and not in_recovery,
                      in_recovery=bool(in_recovery),
                      has_content_fulltext_index=fulltext is not None,
                      content_fulltext_index=fulltext, applied_migrations=applied,
                      local_time_columns={t: tuple(c) for t, c in (local_json or {}).items()
                                          if c},
                      writer_timezone=str(zone),
                      can_log_queries=bool(can_log_queries) and not in_recovery)


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
