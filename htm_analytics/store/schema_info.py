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

from dataclasses import dataclass
from typing import Any

import psycopg

__all__ = ["SchemaInfo", "detect_schema", "EVENT_TRIGGERS_VERSION"]

EVENT_TRIGGERS_VERSION = 7
"""The migration from which triggers write the remember and delete events for every writer."""

_ADDITIONS = ("memory_events", "node_embedding_models", "node_search_vectors",
              "import_records", "node_lexicon")

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
       EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'nodes'
                 AND indexdef LIKE '%%USING gin (to_tsvector(''english''::regconfig, content))%%')
           AS has_content_fulltext_index
"""

_TABLES = ["robots", "nodes", "robot_nodes", "tags", "node_tags", *_ADDITIONS]


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
        Whether the role may insert into ``nodes``.
    has_content_fulltext_index : bool
        Whether ``nodes`` has the seed's GIN index on ``to_tsvector('english', content)``
        (used to find content stored unstripped).
    applied_migrations : frozenset of int
        The toolkit migrations applied (the versions are not all installed in order when
        branches of the toolkit ship them apart).
    """

    columns: dict[str, tuple[str, ...]]
    additions_version: int | None
    can_write: bool
    has_content_fulltext_index: bool = False
    applied_migrations: frozenset[int] = frozenset()

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
        return tuple(t for t in _ADDITIONS if self.has_table(t))

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
        access = "this role may write" if self.can_write else "read-only role"
        return f"{era}; {added}; {access}"

    def as_dict(self) -> dict[str, Any]:
        """The facts as plain values (for JSON output)."""
        return {"era": self.era, "soft_deletes": self.soft_deletes,
                "working_memory": self.working_memory_column,
                "metadata": self.has_column("nodes", "metadata"),
                "additions": list(self.additions), "additions_version": self.additions_version,
                "event_triggers": self.event_triggers, "can_write": self.can_write}

    def read_prefix(self) -> str:
        """CTEs that shadow the tables so that a read sees one schema whatever the era.

        Live rows only where rows are soft-deleted; ``nodes.in_working_memory`` computed from
        ``robot_nodes.working_memory`` where the gem keeps it there; the seed's full-text
        expression (which its GIN index serves) where ``node_search_vectors`` is absent; empty
        event and embedding-model tables where those are absent. Empty when nothing is needed.
        ``NOT MATERIALIZED`` lets the planner inline them, so indexes keep serving the reads.
        """
        ctes: list[str] = []
        live = " WHERE {a}.deleted_at IS NULL"
        if self.soft_deletes or not self.has_column("nodes", "in_working_memory"):
            where = live.format(a="x") if self.soft_deletes else ""
            if self.has_column("robot_nodes", "working_memory"):
                rn_live = " AND w.deleted_at IS NULL" if self.has_column(
                    "robot_nodes", "deleted_at") else ""
                flag = ("EXISTS (SELECT 1 FROM public.robot_nodes w WHERE w.node_id = x.id "
                        f"AND w.working_memory{rn_live})")
            else:
                flag = "false"
            extra = "" if self.has_column("nodes", "in_working_memory") else \
                f", {flag} AS in_working_memory"
            ctes.append(f"nodes AS NOT MATERIALIZED (SELECT x.*{extra} "
                        f"FROM public.nodes x{where})")
        for table in ("robot_nodes", "tags", "node_tags"):
            if self.has_column(table, "deleted_at"):
                # links of a soft-deleted memory go with it
                of_live_node = "" if table == "tags" or not self.soft_deletes else (
                    " AND EXISTS (SELECT 1 FROM public.nodes d WHERE d.id = x.node_id"
                    " AND d.deleted_at IS NULL)")
                ctes.append(f"{table} AS NOT MATERIALIZED (SELECT x.* FROM public.{table} x"
                            f"{live.format(a='x')}{of_live_node})")
        if not self.has_table("node_search_vectors"):
            ctes.append("node_search_vectors AS NOT MATERIALIZED (SELECT s.id AS node_id, "
                        "to_tsvector('english', s.content) AS content_tsv "
                        "FROM public.nodes s)")
        if not self.has_table("memory_events"):
            ctes.append("memory_events AS (SELECT NULL::bigint AS id, "
                        "NULL::timestamptz AS occurred_at, NULL::text AS kind, "
                        "NULL::bigint AS robot_id, NULL::bigint AS node_id WHERE false)")
        if not self.has_table("node_embedding_models"):
            ctes.append("node_embedding_models AS (SELECT NULL::bigint AS node_id, "
                        "NULL::text AS provider, NULL::text AS model, NULL::integer AS dimension,"
                        " NULL::timestamptz AS created_at WHERE false)")
        return ", ".join(ctes)


def detect_schema(conn: psycopg.Connection[Any]) -> SchemaInfo:
    """Read the catalog once: tables, columns, toolkit migrations, write privilege."""
    row = conn.execute(_DETECT, {"tables": _TABLES}).fetchone()
    assert row is not None
    columns_json, can_read_migrations, can_write, fulltext = row
    applied: frozenset[int] = frozenset()
    if can_read_migrations:
        applied = frozenset(int(r[0]) for r in conn.execute(
            "SELECT version FROM public.htm_analytics_migrations").fetchall())
    return SchemaInfo(columns={t: tuple(c or ()) for t, c in (columns_json or {}).items()},
                      additions_version=max(applied, default=None), can_write=bool(can_write),
                      has_content_fulltext_index=bool(fulltext), applied_migrations=applied)
