"""Bulk loading: many memories in one transaction with binary COPY and set-based SQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from psycopg import sql

from ..errors import ConcurrencyError, ValidationError
from ..validation import (
    MAX_EMBEDDING_DIMENSION,
    check_norms,
    real_matrix,
    tag_ancestors,
    validate_content,
    validate_datetime,
    validate_name,
    validate_tag,
    validate_tag_list,
    validate_token_count,
)
from ._base import StoreBase
from ._common import (
    content_hash,
    content_too_large,
    create_index,
    embedding_model_names,
    lift_statement_timeout,
)
from .activity import lock_robot_name
from .tagging import ensure_tags

__all__ = ["BulkMixin"]


class BulkMixin(StoreBase):
    """:meth:`bulk_add` (see :class:`~htm_analytics.LongTermMemory`)."""

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
        provider, model = embedding_model_names(embedding_model)
        n = len(rows.contents)
        if n == 0:
            return pd.DataFrame({"node_id": pd.Series(dtype="int64"),
                                 "is_new": pd.Series(dtype="bool")})
        with self._transaction() as cur, nodes_deleted_meanwhile():
            lift_statement_timeout(cur)
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
            try:
                new = _insert_new_nodes(cur)
            except psycopg.errors.ProgramLimitExceeded as exc:
                raise content_too_large(exc, "contents") from exc
            created = {r["content_hash"] for r in new}
            if provider is not None and rows.embeddings is not None \
                    and self.schema_info.has_table("node_embedding_models"):
                cur.execute("""INSERT INTO node_embedding_models (node_id, provider, model,
                                                                  dimension)
                               SELECT unnest(%s::bigint[]), %s, %s, %s""",
                            ([r["id"] for r in new], provider, model, rows.dimension))
            mapping = cur.execute("""
                SELECT s.ord, n.id FROM htm_bulk_staging s
                JOIN nodes n ON n.content_hash = s.content_hash ORDER BY s.ord""").fetchall()
            if len(mapping) != n:
                raise ConcurrencyError(_DELETED_DURING_LOAD)
            # This load logs each remember at its own time below; the log triggers (migration
            # 7) would place them at first/last remember times only.
            cur.execute("SELECT set_config('htm_analytics.events_written', 'on', true)")
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
                tag_ids = ensure_tags(cur, tag_names)
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
            if self.schema_info.has_event_log:
                cur.execute("""
                    INSERT INTO memory_events (occurred_at, kind, robot_id, node_id)
                    SELECT s.remembered_at, 'remember', s.robot_id, n.id
                    FROM htm_bulk_staging s JOIN nodes n ON n.content_hash = s.content_hash
                    ORDER BY s.remembered_at, s.ord""")
            for statement in rebuild:
                create_index(cur, statement)
            if rebuild:
                # A load larger than the table leaves the planner's statistics stale, and the
                # bounded lexical searches estimate word frequencies from them.
                analyzed = cur.execute(
                    "SELECT t FROM unnest(ARRAY['public.nodes', 'public.node_search_vectors', "
                    "'public.node_lexicon']) t "
                    "WHERE to_regclass(t) IS NOT NULL").fetchall()
                for row in analyzed:
                    cur.execute(sql.SQL("ANALYZE {}.{}").format(
                        *(sql.Identifier(part) for part in row["t"].split("."))))
        self._cache.clear()
        self._vectors_added()
        node_ids = np.array(node_of_row, dtype=np.int64)
        first_seen: set[str] = set()
        is_new = np.zeros(n, dtype=bool)
        for i, digest in enumerate(rows.hashes):
            if digest in created and digest not in first_seen:
                is_new[i] = True
                first_seen.add(digest)
        return pd.DataFrame({"node_id": node_ids, "is_new": is_new})


_DELETED_DURING_LOAD = ("a stored node this load refers to was deleted by another session "
                        "during the load; nothing was written, and calling again reloads it")


@contextmanager
def nodes_deleted_meanwhile() -> Iterator[None]:
    """A foreign-key failure inside a load means a node went away under it: say so."""
    try:
        yield
    except psycopg.errors.ForeignKeyViolation as exc:
        raise ConcurrencyError(_DELETED_DURING_LOAD) from exc


_INSERT_NEW_NODES = f"""
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
                RETURNING id, content_hash, embedding_dimension"""


def _insert_new_nodes(cur: psycopg.Cursor[dict[str, Any]]) -> list[dict[str, Any]]:
    """Insert the staged contents not stored yet; return their rows."""
    return cur.execute(_INSERT_NEW_NODES).fetchall()


def _find_or_create_robots(cur: psycopg.Cursor[dict[str, Any]], names: Sequence[str],
                           times: Sequence[dt.datetime]) -> dict[str, int]:
    first: dict[str, dt.datetime] = {}
    last: dict[str, dt.datetime] = {}
    for name, when in zip(names, times):
        first[name] = min(first.get(name, when), when)
        last[name] = max(last.get(name, when), when)
    ids: dict[str, int] = {}
    for name in sorted(first):
        lock_robot_name(cur, name)
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
    rows.robot_names = [validate_name(r, field=f"robots[{i}]") for i, r in enumerate(names)]
    if token_counts is None:
        rows.token_counts = [0] * n
    else:
        rows.token_counts = []
        for i, t in enumerate(per_row(token_counts, "token_counts")):
            rows.token_counts.append(validate_token_count(t, field=f"token_counts[{i}]"))
    now = dt.datetime.now(dt.UTC)
    if remembered_at is None:
        rows.remembered_at = [now] * n
    else:
        rows.remembered_at = []
        for i, when in enumerate(per_row(remembered_at, "remembered_at")):
            rows.remembered_at.append(validate_datetime(when, field=f"remembered_at[{i}]"))
    if embeddings is not None:
        array = real_matrix(embeddings, field="embeddings")
        if array.shape[0] != n:
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
        if np.abs(array).max() > np.finfo(np.float32).max:
            raise ValidationError("has values too large for float32", field="embeddings")
        array = array.astype(np.float32)
        check_norms(array, field="embeddings")
        rows.embeddings = np.ascontiguousarray(array)
        rows.dimension = int(array.shape[1])
    if tags is not None:
        for i, row_tags in enumerate(per_row(tags, "tags")):
            names_for_row: set[str] = set()
            for tag in validate_tag_list(row_tags, field=f"tags[{i}]"):
                tag = validate_tag(tag, field=f"tags[{i}]")
                names_for_row.update(tag_ancestors(tag) if with_ancestors else [tag])
            rows.tag_rows.extend((i, name) for name in sorted(names_for_row))
    return rows
