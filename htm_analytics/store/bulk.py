"""Bulk loading: many memories in one transaction with binary COPY and set-based SQL."""

from __future__ import annotations

import datetime as dt
import functools
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

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
    validate_flag,
    validate_memory_size,
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
from ._vectors import check_against_stored
from .activity import lock_robot_names
from .indexing import hnsw_graph_bytes, raise_build_memory
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
        maintenance_work_mem: str | None = None,
        check_models: bool = True,
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
            not apply to bulk loads, except to a wait for another session's lock: past it
            the load raises ``QueryTimeoutError`` and writes nothing.
        embedding_model : (provider, model), optional
            Which model produced ``embeddings``, recorded for the new nodes (see
            :meth:`check_embedding_model`).
        check_models : bool
            Refuse ``embeddings`` of another model or dimension than the stored vectors, as
            searches do (default). An import of another system's memory passes False to
            copy its vectors as they are; ``htm-analytics advise`` then reports the mix.
        maintenance_work_mem : str, optional
            Memory for rebuilding the deferred indexes (``"8GB"``), for this load's
            transaction only. By default a load raises the server's setting to what the
            HNSW graphs of its rebuilt indexes need (about 9.3 kB per memory for the padded
            2000-dimension index), up to 1GB: pgvector builds a graph larger than this
            memory on disk, several times slower. Give more for loads past about 100,000
            memories, if the server has it.

        Returns
        -------
        pandas.DataFrame
            One row per input row: ``node_id`` (int64) and ``is_new`` (bool: this row created
            the node, being its content's first remember).

        Raises
        ------
        ValidationError
            A bad row (its index in ``field``), or mismatched lengths; nothing is written.
        EmbeddingMismatchError
            ``embeddings`` of another model or dimension than the stored vectors (as
            :meth:`check_embedding_model`); nothing is written.
        """
        # Flags, not any truthy value: defer_indexes="no" would drop the indexes.
        tag_ancestors_too = validate_flag(tag_ancestors_too, field="tag_ancestors_too")
        if defer_indexes is not None:
            defer_indexes = validate_flag(defer_indexes, field="defer_indexes")
        rows = _validate_bulk(contents, robots, embeddings, tags, token_counts, remembered_at,
                              tag_ancestors_too)
        build_memory = None if maintenance_work_mem is None else validate_memory_size(
            maintenance_work_mem, field="maintenance_work_mem")
        provider, model = embedding_model_names(embedding_model)
        n = len(rows.contents)
        if validate_flag(check_models, field="check_models") and rows.dimension is not None \
                and n:
            check_against_stored(self, provider, model, rows.dimension, writing=True,
                                 field="embedding_model" if provider else "embeddings")
        if n == 0:
            return pd.DataFrame({"node_id": pd.Series(dtype="int64"),
                                 "is_new": pd.Series(dtype="bool")})
        with self._transaction() as cur, nodes_deleted_meanwhile():
            lift_statement_timeout(cur)
            robot_ids = _find_or_create_robots(cur, rows.robot_names, rows.remembered_at)
            stored = _table_rows(cur)
            if defer_indexes is None:
                defer_indexes = n > stored and n >= 1000
            deferred = _drop_search_indexes(cur) if defer_indexes else []
            firsts = rows.first_remembers()
            _copy_contents(cur, rows, firsts)
            try:
                new = cur.execute(_insert_new_nodes(rows.dimension)).fetchall()
            except psycopg.errors.ProgramLimitExceeded as exc:
                raise content_too_large(exc, "contents") from exc
            if provider is not None and rows.embeddings is not None \
                    and self.schema_info.has_table("node_embedding_models"):
                cur.execute("""INSERT INTO node_embedding_models (node_id, provider, model,
                                                                  dimension)
                               SELECT unnest(%s::bigint[]), %s, %s, %s""",
                            ([r["id"] for r in new], provider, model, rows.dimension))
            node_of_hash = {r["content_hash"]: int(r["id"]) for r in new}
            known = [rows.hashes[i] for i in firsts if rows.hashes[i] not in node_of_hash]
            if known:
                node_of_hash.update((r["content_hash"], int(r["id"])) for r in cur.execute(
                    "SELECT id, content_hash FROM nodes WHERE content_hash = ANY(%s)",
                    (known,)))
            if len(node_of_hash) != len(firsts):
                raise ConcurrencyError(_DELETED_DURING_LOAD)
            node_of_row = [node_of_hash[digest] for digest in rows.hashes]
            # This load logs each remember at its own time below; the log triggers (migration
            # 7) would place them at first/last remember times only.
            cur.execute("SELECT set_config('htm_analytics.events_written', 'on', true)")
            cur.execute("""CREATE TEMP TABLE htm_bulk_rows (ord int, robot_id bigint,
                               node_id bigint, remembered_at timestamptz) ON COMMIT DROP""")
            with cur.copy("COPY htm_bulk_rows FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "int8", "int8", "timestamptz"])
                for i in range(n):
                    copy.write_row((i, robot_ids[rows.robot_names[i]], node_of_row[i],
                                    rows.remembered_at[i]))
            cur.execute("""
                INSERT INTO robot_nodes AS rn (robot_id, node_id, first_remembered_at,
                    last_remembered_at, remember_count, created_at, updated_at)
                SELECT robot_id, node_id, min(remembered_at), max(remembered_at), count(*),
                       min(remembered_at), max(remembered_at)
                FROM htm_bulk_rows GROUP BY robot_id, node_id
                ON CONFLICT (robot_id, node_id) DO UPDATE
                   SET remember_count = rn.remember_count + EXCLUDED.remember_count,
                       last_remembered_at = greatest(rn.last_remembered_at,
                                                     EXCLUDED.last_remembered_at),
                       updated_at = CURRENT_TIMESTAMP""")
            staged = ["htm_bulk_contents", "htm_bulk_rows"]
            if rows.tag_row:
                _insert_tags(cur, rows, node_of_row)
                staged.append("htm_bulk_tags")
            if self.schema_info.has_event_log:
                cur.execute("""
                    INSERT INTO memory_events (occurred_at, kind, robot_id, node_id)
                    SELECT remembered_at, 'remember', robot_id, node_id
                    FROM htm_bulk_rows ORDER BY remembered_at, ord""")
            if deferred:
                _rebuild(cur, deferred, stored + len(new), build_memory)
            # Dropped now, not at commit: a transaction may hold several loads (an importer's
            # chunk, one per embedding dimension, inside ``atomic``). A load failing midway
            # rolls back its savepoint, and with it the tables it created.
            cur.execute(sql.SQL("DROP TABLE {}").format(sql.SQL(", ").join(
                sql.Identifier("pg_temp", name) for name in staged)))
        self._cache.clear()
        if rows.embeddings is not None:
            self._vectors_added(provider, model, rows.dimension, len(new))
        created = {r["content_hash"] for r in new}
        is_new = np.zeros(n, dtype=bool)
        is_new[[i for i in firsts if rows.hashes[i] in created]] = True
        return pd.DataFrame({"node_id": np.array(node_of_row, dtype=np.int64),
                             "is_new": is_new})


_DELETED_DURING_LOAD = ("a stored node this load refers to was deleted by another session "
                        "during the load; nothing was written, and calling again reloads it")


@contextmanager
def nodes_deleted_meanwhile() -> Iterator[None]:
    """A foreign-key failure inside a load means a node went away under it: say so."""
    try:
        yield
    except psycopg.errors.ForeignKeyViolation as exc:
        raise ConcurrencyError(_DELETED_DURING_LOAD) from exc


def _insert_new_nodes(dimension: int | None) -> sql.Composed:
    """The new contents as staged, in the order of their first remember (a temporary table
    just written is read in that order), so that node ids follow time and the indexes on
    the time columns grow at their end; vectors of ``dimension`` padded with zeros to the
    seed's 2000 by pgvector's concatenation (ten times faster than through ``real[]``,
    which took about 10 s of a million-row load)."""
    padding = MAX_EMBEDDING_DIMENSION - (dimension or MAX_EMBEDDING_DIMENSION)
    embedding = sql.SQL("embedding || array_fill(0::real, ARRAY[{}])::vector").format(
        sql.Literal(padding)) if padding else sql.SQL("embedding")
    return sql.SQL("""
        INSERT INTO nodes (content, content_hash, token_count, embedding,
                           embedding_dimension, created_at, updated_at, last_accessed)
        SELECT content, content_hash, token_count, {embedding},
               dimension, remembered_at, remembered_at, remembered_at
        FROM htm_bulk_contents
        ON CONFLICT (content_hash) DO NOTHING
        RETURNING id, content_hash""").format(embedding=embedding)


def _copy_contents(cur: psycopg.Cursor[dict[str, Any]], rows: _BulkRows,
                   firsts: list[int]) -> None:
    """Stage each distinct content once, with the row of its first remember: deduplicated
    here rather than sorted by the server with every row's text and vector."""
    cur.execute("""CREATE TEMP TABLE htm_bulk_contents (
                       content text, content_hash text, token_count int, embedding vector,
                       dimension int, remembered_at timestamptz)
                   ON COMMIT DROP""")
    with cur.copy("COPY htm_bulk_contents FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["text", "text", "int4", "vector", "int4", "timestamptz"])
        for i in firsts:
            vector = rows.embeddings[i] if rows.embeddings is not None else None
            copy.write_row((rows.contents[i], rows.hashes[i], rows.token_counts[i],
                            vector, rows.dimension if vector is not None else None,
                            rows.remembered_at[i]))


def _insert_tags(cur: psycopg.Cursor[dict[str, Any]], rows: _BulkRows,
                 node_of_row: list[int]) -> None:
    names = list(rows.tag_names)
    ids = ensure_tags(cur, sorted(names))
    # (node, tag) pairs are resolved here rather than with a join on a staging table (ten
    # times faster on 100k links), in arrays: a dict of 4.5 million pairs held 1 GB.
    row = np.frombuffer(rows.tag_row, dtype=np.int64)
    node = np.asarray(node_of_row, dtype=np.int64)[row]
    tag = np.array([ids[name] for name in names], dtype=np.int64)[
        np.frombuffer(rows.tag_name, dtype=np.int64)]
    # Each pair's first link: its earliest remember, of equal times the first row.
    time_rank = np.empty(len(rows.remembered_at), dtype=np.int64)
    time_rank[rows.time_order] = np.arange(len(time_rank))
    order = np.lexsort((time_rank[row], tag, node))
    node, tag, row = node[order], tag[order], row[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (node[1:] != node[:-1]) | (tag[1:] != tag[:-1])
    cur.execute("""CREATE TEMP TABLE htm_bulk_tags (node_id bigint, tag_id bigint,
                       created_at timestamptz) ON COMMIT DROP""")
    with cur.copy("COPY htm_bulk_tags FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int8", "timestamptz"])
        for link_node, link_tag, i in zip(node[first].tolist(), tag[first].tolist(),
                                          row[first].tolist()):
            copy.write_row((link_node, link_tag, rows.remembered_at[i]))
    cur.execute("""INSERT INTO node_tags (node_id, tag_id, created_at)
                   SELECT node_id, tag_id, created_at FROM htm_bulk_tags
                   ON CONFLICT (node_id, tag_id) DO NOTHING""")


def _table_rows(cur: psycopg.Cursor[dict[str, Any]]) -> int:
    """The planner's count of ``nodes`` rows (0 before its first ANALYZE)."""
    row = cur.execute("SELECT reltuples::bigint AS n FROM pg_class "
                      "WHERE oid = 'public.nodes'::regclass").fetchone()
    return max(int(row["n"]) if row else 0, 0)


def _find_or_create_robots(cur: psycopg.Cursor[dict[str, Any]], names: Sequence[str],
                           times: Sequence[dt.datetime]) -> dict[str, int]:
    """Each robot name's id, set-based: the known robots' ``last_active`` raised to their
    last remember of the load, the others created (``created_at`` their first)."""
    first: dict[str, dt.datetime] = {}
    last: dict[str, dt.datetime] = {}
    for name, when in zip(names, times):
        first[name] = min(first.get(name, when), when)
        last[name] = max(last.get(name, when), when)
    ordered = sorted(first)
    lock_robot_names(cur, ordered)
    ids = {r["name"]: int(r["id"]) for r in cur.execute(
        """UPDATE robots r SET last_active = greatest(r.last_active, v.last)
           FROM (SELECT v.name, v.last, (SELECT min(id) FROM robots WHERE name = v.name) AS id
                 FROM unnest(%s::text[], %s::timestamptz[]) AS v(name, last)) v
           WHERE r.id = v.id
           RETURNING v.name, r.id""", (ordered, [last[n] for n in ordered]))}
    missing = [name for name in ordered if name not in ids]
    if missing:
        ids.update((r["name"], int(r["id"])) for r in cur.execute(
            """INSERT INTO robots (name, created_at, last_active)
               SELECT * FROM unnest(%s::text[], %s::timestamptz[], %s::timestamptz[])
               RETURNING name, id""",
            (missing, [first[n] for n in missing], [last[n] for n in missing])))
    return ids


# Indexes that make row-by-row loading slow and are cheaper to rebuild after a bulk load.
_DEFERRABLE_INDEXES = (r"^(idx_nodes_(embedding(_[0-9]+)?|content_gin|content_trgm)"
                       r"|idx_node_search_vectors_content_tsv)$")
_VALUE_BYTES = {"vector": 4, "halfvec": 2}  # per dimension, in an HNSW graph


class _DeferredIndex(NamedTuple):
    definition: str
    graph_bytes_per_row: int  # 0: not an HNSW index (or of a type not sized here)


def _drop_search_indexes(cur: psycopg.Cursor[dict[str, Any]]) -> list[_DeferredIndex]:
    """Drop the deferrable indexes; return their definitions (from the catalog) to rebuild,
    with the memory each row takes in an HNSW graph."""
    rows = cur.execute("""
        SELECT i.indexname, i.indexdef, am.amname, t.typname, a.atttypmod AS dimensions,
               coalesce((SELECT o.option_value::int FROM pg_options_to_table(c.reloptions) o
                         WHERE o.option_name = 'm'), 16) AS m
        FROM pg_indexes i
        JOIN pg_class c ON c.oid = format('%%I.%%I', i.schemaname, i.indexname)::regclass
        JOIN pg_am am ON am.oid = c.relam
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = 1
        JOIN pg_type t ON t.oid = a.atttypid
        WHERE i.schemaname = 'public' AND i.tablename IN ('nodes', 'node_search_vectors')
          AND i.indexname ~ %s ORDER BY i.indexname""", (_DEFERRABLE_INDEXES,)).fetchall()
    deferred = []
    for row in rows:
        cur.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(row["indexname"])))
        sized = row["amname"] == "hnsw" and row["typname"] in _VALUE_BYTES \
            and row["dimensions"] > 0
        deferred.append(_DeferredIndex(row["indexdef"], hnsw_graph_bytes(
            row["dimensions"], row["m"], _VALUE_BYTES[row["typname"]]) if sized else 0))
    return deferred


def _rebuild(cur: psycopg.Cursor[dict[str, Any]], deferred: list[_DeferredIndex],
             table_rows: int, build_memory: int | None) -> None:
    """Build the dropped indexes again, with enough memory for their HNSW graphs
    (:func:`raise_build_memory`), and refresh the planner's statistics."""
    raise_build_memory(cur, max(index.graph_bytes_per_row for index in deferred) * table_rows,
                       build_memory)
    for index in deferred:
        create_index(cur, index.definition)
    # A load larger than the table leaves the planner's statistics stale, and the bounded
    # lexical searches estimate word frequencies from them.
    analyzed = cur.execute(
        "SELECT t FROM unnest(ARRAY['public.nodes', 'public.node_search_vectors', "
        "'public.node_lexicon']) t WHERE to_regclass(t) IS NOT NULL").fetchall()
    for row in analyzed:
        cur.execute(sql.SQL("ANALYZE {}.{}").format(
            *(sql.Identifier(part) for part in row["t"].split("."))))


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
        # Tag links as two int64 arrays (row, index into tag_names): compact at millions.
        self.tag_row = array("q")
        self.tag_name = array("q")
        self.tag_names: dict[str, int] = {}

    @functools.cached_property
    def time_order(self) -> list[int]:
        """Row numbers by remember time (a stable sort: of equal times, the first given
        first), sorted once for the new contents and the tag links."""
        return sorted(range(len(self.remembered_at)), key=self.remembered_at.__getitem__)

    def first_remembers(self) -> list[int]:
        """The row of each distinct content's first remember (the earliest; of equal times,
        the first given), in time order: the rows whose content a new node gets."""
        first: dict[str, int] = {}
        for i in self.time_order:
            if self.hashes[i] not in first:
                first[self.hashes[i]] = i
        return list(first.values())


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
        rows.embeddings = _checked_embeddings(embeddings, n)
        rows.dimension = int(rows.embeddings.shape[1])
    if tags is not None:
        for i, row_tags in enumerate(per_row(tags, "tags")):
            names_for_row: set[str] = set()
            for tag in validate_tag_list(row_tags, field=f"tags[{i}]"):
                tag = validate_tag(tag, field=f"tags[{i}]")
                names_for_row.update(tag_ancestors(tag) if with_ancestors else [tag])
            for name in sorted(names_for_row):
                rows.tag_row.append(i)
                rows.tag_name.append(rows.tag_names.setdefault(name, len(rows.tag_names)))
    return rows


_CHECKED_ROWS = 16_384  # vectors checked and converted at a time


def _checked_embeddings(embeddings: Any, n: int) -> np.ndarray:
    """``embeddings`` as C-contiguous float32 ``(n, d)`` vectors, finite, none all zeros,
    none past float32. A numeric array is checked a block of rows at a time, with no float64
    copy (a million 384-dimension vectors would need 3 GB for one); a float32 array is used
    as it is."""
    if isinstance(embeddings, np.ndarray) and embeddings.dtype.kind in "iuf":
        array = embeddings
    else:
        array = real_matrix(embeddings, field="embeddings")
    if array.ndim != 2 or array.shape[0] != n:
        raise ValidationError(f"must be an (n={n}, d) array, got shape {array.shape}",
                              field="embeddings")
    if not 0 < array.shape[1] <= MAX_EMBEDDING_DIMENSION:
        raise ValidationError(f"must have 1 to {MAX_EMBEDDING_DIMENSION} columns, got "
                              f"{array.shape[1]}", field="embeddings")
    same = array.dtype == np.float32 and array.flags.c_contiguous
    vectors = array if same else np.empty(array.shape, dtype=np.float32)
    for start in range(0, n, _CHECKED_ROWS):
        block = array[start:start + _CHECKED_ROWS]
        bad = np.flatnonzero(~(np.isfinite(block).all(axis=1) & (block != 0).any(axis=1)))
        if bad.size:
            raise ValidationError(f"row {start + int(bad[0])} is all zeros or not finite",
                                  field="embeddings")
        if np.abs(block).max() > np.finfo(np.float32).max:
            raise ValidationError("has values too large for float32", field="embeddings")
        if not same:
            vectors[start:start + _CHECKED_ROWS] = block
    check_norms(vectors, field="embeddings")
    return vectors
