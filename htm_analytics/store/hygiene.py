"""Reads behind the memory-hygiene checks (:mod:`htm_analytics.analysis.hygiene`).

Every statement here only reads, goes through :meth:`StoreBase._read` (so soft-deleted rows
of the current gem stay hidden and missing additions read as empty) and takes the analysis
scope as bound parameters: ``start``/``end`` (a ``created_at`` range, NULL for none) and
``robots`` (names, NULL for all). Vectors and texts stream from server-side cursors in
batches, so a check never holds a whole table's rows at once in the driver.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from psycopg import sql

from .._sql import read_sql
from ..errors import ValidationError
from ..frames import PERIOD_UNITS, validate_scope
from ..validation import (
    validate_dimension,
    validate_flag,
    validate_ids,
    validate_key,
    validate_moment,
    validate_number,
    validate_positive_int,
)
from ._base import StoreBase
from ._vectors import native_distance
from .display import model_label, model_label_sql
from .schema_info import SchemaInfo
from .search_pool import DEFAULT_EF_SEARCH
from .text_previews import SPARE, shown_texts
from .vector_stream import copy_vector_batches, one_snapshot

__all__ = ["SEARCHES_PER_STATEMENT", "HygieneMixin", "compared_tag_pairs", "model_choice",
           "read_self_search", "scope_condition", "scope_parameters", "searches_per_statement",
           "self_search_statement", "validate_similarity"]

# HNSW searches of stored vectors per statement (the reachability and sampled near-duplicate
# checks) at the default ef_search (pgvector's, 40). A search of a cold padded (2000-d) index
# took 110-150 ms at a million memories, so 1,000 in one statement outran the store's 30 s
# query_timeout; 50 stay near 7 s cold.
SEARCHES_PER_STATEMENT = 50


def searches_per_statement(ef_search: int) -> int:
    """How many searches at ``ef_search`` go in one statement: a search visits about
    ``ef_search`` candidates, so wider ones go fewer at a time (50 at 40, 2 at 1000: the
    reachability check's widest retry of 50 at 1000 outran query_timeout at a million)."""
    return max(1, SEARCHES_PER_STATEMENT * DEFAULT_EF_SEARCH
               // max(int(ef_search), DEFAULT_EF_SEARCH))


def scope_condition(alias: str = "n") -> str:
    """The analysis scope as a condition on ``nodes <alias>`` (see the module's
    documentation); ``alias`` is one of this module's own aliases, never user text."""
    return f"""
    (%(start)s::timestamptz IS NULL OR {alias}.created_at >= %(start)s::timestamptz)
    AND (%(end)s::timestamptz IS NULL OR {alias}.created_at <= %(end)s::timestamptz)
    AND (%(robots)s::text[] IS NULL OR EXISTS (
         SELECT 1 FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
         WHERE rn.node_id = {alias}.id AND r.name = ANY(%(robots)s::text[])))"""


_VECTOR_GROUPS = f"""
SELECT m.provider, m.model, n.embedding_dimension AS dimension, count(*) AS nodes
FROM nodes n LEFT JOIN node_embedding_models m ON m.node_id = n.id
WHERE n.embedding_dimension IS NOT NULL AND {scope_condition()}
GROUP BY 1, 2, 3 ORDER BY nodes DESC, 1, 2, 3"""

# Vectors of one model: named ones by their provenance row, unnamed ones (no row) as well
# when %(unnamed)s; the zero padding of the reference schema cut off on the server. Read a
# page at a time (by id, LIMIT): the provenance row is looked up per node (LATERAL), so that
# the plan walks the primary key in order and stops at the page's end. A plain join let the
# planner hash the whole table, cut every remaining vector out of TOAST and sort them, per
# page: a page late in a million memories took 1.4-27 s instead of 0.04 s.
_VECTORS = """
SELECT n.id::bigint AS id, subvector(n.embedding, 1, {d}) AS embedding
FROM nodes n
LEFT JOIN LATERAL (SELECT true AS named, m.provider, m.model FROM node_embedding_models m
                   WHERE m.node_id = n.id LIMIT 1) m ON true
WHERE n.embedding_dimension = {d}
  AND ((m.named IS NULL AND %(unnamed)s)
       OR ({label} IS NOT DISTINCT FROM %(label)s::text
           AND m.named))
  AND (%(first_id)s::bigint IS NULL OR n.id >= %(first_id)s)
  AND (%(last_id)s::bigint IS NULL OR n.id <= %(last_id)s)
  AND {scope}
ORDER BY n.id"""

_CONTENTS = f"""
SELECT n.id, n.content, n.embedding_dimension IS NOT NULL AS has_vector
FROM nodes n WHERE {scope_condition()}
  AND (%(ids)s::bigint[] IS NULL OR n.id = ANY(%(ids)s::bigint[]))
ORDER BY n.id"""

_ANY_BARE = f"""
SELECT EXISTS (SELECT 1 FROM nodes n WHERE n.embedding_dimension IS NULL AND {scope_condition()}
              ) AS any_bare"""

# Memories without a vector against every memory in scope, by pg_trgm similarity (which
# compares lower-cased words, so case and punctuation do not count). Probing the trigram
# index with `%` costs a pass over the posting lists of every common trigram per memory,
# quadratic on texts that share words; a prefix filter is exact and near-linear instead:
# similarity (shared / union of distinct trigrams) >= t needs at least ceil(t * |x|) of the
# |x| trigrams of x in y, so, with every set sorted by one global order (rarest first), two
# such sets share a trigram among their first |x| - ceil(t * |x|) + 1 (Bayardo et al., "Scaling
# up all pairs similarity search", 2007); and their sizes are within a factor t of each other.
# Only those pairs are compared.
_TRIGRAM_PAIRS = f"""
WITH scoped AS (
    SELECT n.id, n.content, n.embedding_dimension IS NULL AS bare,
           show_trgm(n.content) AS trigrams
    FROM nodes n WHERE {scope_condition()}),
grams AS (
    SELECT s.id, s.bare, g.gram, cardinality(s.trigrams) AS size
    FROM scoped s, unnest(s.trigrams) AS g(gram)
    WHERE EXISTS (SELECT 1 FROM scoped WHERE bare)),
rarity AS (SELECT gram, count(*) AS holders FROM grams GROUP BY gram),
ranked AS (
    SELECT g.id, g.bare, g.gram, g.size,
           row_number() OVER (PARTITION BY g.id ORDER BY r.holders, g.gram) AS position
    FROM grams g JOIN rarity r USING (gram)),
prefixes AS (
    SELECT id, bare, gram, size FROM ranked
    WHERE position <= size - ceil(%(prefix_threshold)s * size) + 1),
candidates AS (
    SELECT DISTINCT a.id AS node_a, b.id AS node_b
    FROM prefixes a JOIN prefixes b ON b.gram = a.gram AND b.id > a.id
    WHERE (a.bare OR b.bare)
      AND b.size BETWEEN %(prefix_threshold)s * a.size AND a.size / %(prefix_threshold)s),
compared AS (
    SELECT c.node_a, c.node_b, similarity(a.content, b.content)::float8 AS similarity
    FROM candidates c JOIN scoped a ON a.id = c.node_a JOIN scoped b ON b.id = c.node_b)
SELECT node_a, node_b, similarity FROM compared WHERE similarity >= %(min_similarity)s"""

# New memories and their text's bytes per period, in total (by created_at) and per robot (by
# the robot's first remember of each memory).
_GROWTH = f"""
SELECT date_trunc(%(unit)s, n.created_at) AS period, NULL::text AS robot, count(*) AS new,
       sum(octet_length(n.content))::bigint AS new_bytes
FROM nodes n WHERE {scope_condition()} GROUP BY 1
UNION ALL
SELECT date_trunc(%(unit)s, rn.first_remembered_at), r.name, count(*), NULL::bigint
FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id JOIN nodes n ON n.id = rn.node_id
WHERE {scope_condition()} GROUP BY 1, 2
ORDER BY 2 NULLS FIRST, 1"""

def compared_tag_pairs() -> sql.Composed:
    """The end of both supersession statements (sql/hygiene/_compared_tag_pairs.sql), the
    model label filled in."""
    return sql.SQL(read_sql("hygiene", "_compared_tag_pairs.sql")).format(
        label=sql.SQL(model_label_sql("m")))


# Pairs of memories in scope sharing a specific tag: the deepest of a memory's colon
# hierarchy (`user:drink`, not its ancestor `user`) that at most %(max_tag_memories)s
# memories in scope hold; with the cosine similarity of their stored vectors: same
# dimension, and the same model where both name theirs. A vector of length zero has no
# direction: its NaN distance is left out (NaN sorts above every number in PostgreSQL).
# A memory's deepest tags are found in tree order (as in tag_hierarchy.sql): a tag is
# deepest when the memory's next tag lies past its subtree. The anti-join it replaces
# (no tag of the memory under it) hashed every node-tag row: past work_mem, at a million
# memories, it ran for over ten minutes. The similarities: sql/hygiene/_compared_tag_pairs.sql.
# Fleet memory of bench_scale: 100k 5.3-7.6 -> 1.7-2.1 s, 300k 13.9 -> 3.2 s, 1M over
# 17 minutes -> 8.7-13.2 s, the same pairs.
_SHARED_TAG_PAIRS = f"""
WITH RECURSIVE chain(tag_id, topic) AS (
    SELECT id, name FROM tags
    UNION
    SELECT tag_id, regexp_replace(topic, ':[^:]*$', '') FROM chain WHERE strpos(topic, ':') > 0
),
tree AS (
    SELECT id, dense_rank() OVER (ORDER BY string_to_array(name, ':')) AS position FROM tags),
subtrees AS (
    SELECT t.id, max(below.position) AS last
    FROM chain c JOIN tags t ON t.name = c.topic JOIN tree below ON below.id = c.tag_id
    GROUP BY t.id),
in_tree_order AS (
    SELECT nt.node_id, nt.tag_id, s.last,
           lead(o.position) OVER (PARTITION BY nt.node_id ORDER BY o.position) AS next
    FROM node_tags nt JOIN tree o ON o.id = nt.tag_id JOIN subtrees s ON s.id = nt.tag_id
    WHERE EXISTS (SELECT 1 FROM nodes n WHERE n.id = nt.node_id AND {scope_condition()})),
tagged AS (
    SELECT DISTINCT node_id, tag_id FROM in_tree_order WHERE next IS NULL OR next > last),
specific AS (
    SELECT tag_id FROM tagged GROUP BY tag_id
    HAVING count(*) BETWEEN 2 AND %(max_tag_memories)s),
pairs AS (
    SELECT a.node_id AS node_a, b.node_id AS node_b,
           array_agg(t.name ORDER BY t.name) AS shared_tags
    FROM tagged a JOIN specific s ON s.tag_id = a.tag_id
    JOIN tagged b ON b.tag_id = a.tag_id AND b.node_id > a.node_id
    JOIN tags t ON t.id = a.tag_id
    GROUP BY 1, 2),
{compared_tag_pairs().as_string(None)}"""

# What a retention policy is judged on: each memory in scope (creation, access columns) and
# the event log's recalls of them, in time order.
_RETENTION_NODES = f"""
SELECT n.id AS node_id, n.created_at, n.access_count,
       CASE WHEN n.access_count > 0 THEN n.last_accessed END AS last_accessed
FROM nodes n WHERE {scope_condition()} ORDER BY n.id"""

_RECALL_EVENTS = f"""
SELECT e.node_id, e.occurred_at FROM memory_events e
WHERE e.kind = 'recall' AND e.occurred_at <= %(until)s
  AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = e.node_id AND {scope_condition()})
ORDER BY e.node_id, e.occurred_at"""

_DESCRIBE = """
SELECT n.id, {content} AS content, n.created_at, n.access_count, n.last_accessed,
       n.embedding_dimension,
       coalesce((SELECT string_agg(r.name, ', ' ORDER BY r.name)
                 FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
                 WHERE rn.node_id = n.id), '') AS robots
FROM nodes n WHERE n.id = ANY(%(ids)s::bigint[]) ORDER BY n.id"""


_TIE_DISTANCE = 1e-6  # cosine distance below which two stored vectors count as one


def scope_parameters(scope: Mapping[str, Any] | None) -> dict[str, Any]:
    """The bound parameters of :func:`scope_condition`, from ``scope`` as
    :func:`~htm_analytics.frames.validate_scope` checks it (a ``ValidationError`` naming
    ``scope`` before any query)."""
    checked = validate_scope(scope)
    return {"start": checked["start"], "end": checked["end"], "robots": checked["robots"]}


def validate_similarity(value: Any, *, cosine: bool, field: str = "min_similarity") -> float:
    """A similarity threshold: a real number up to 1, from -1 for a cosine (of vectors), from
    0 for pg_trgm's similarity (of texts)."""
    return float(validate_number(value, field=field, minimum=-1 if cosine else 0, maximum=1))


def model_choice(provider: Any, model: Any, unnamed: Any) -> tuple[str | None, bool]:
    """``(label, unnamed)`` of the vectors a read selects: those recorded as ``provider``/
    ``model`` (both names; None for both: those recorded without one), plus those stored
    with no record when ``unnamed`` (a bool)."""
    unnamed = validate_flag(unnamed, field="unnamed")
    if provider is None:
        if model is not None:
            raise ValidationError("must be None when provider is None", field="model")
        return None, unnamed
    return model_label(validate_key(provider, field="provider"),
                       validate_key(model, field="model")), unnamed


def self_search_statement(dimension: int, k: int, *, native: bool, live: bool,
                          schema: SchemaInfo) -> sql.Composed:
    """The statement of :meth:`HygieneMixin.self_search` (``%(ids)s`` bound): through the
    native index of ``dimension`` or the padded one; ``live`` leaves soft-deleted rows out;
    ``schema`` says how a row's dimension is read."""
    if native:
        distance = native_distance(dimension).as_string(None).replace(
            "%(q)s", sql.SQL("(subvector(q.embedding, 1, {d})::vector({d}))").format(
                d=sql.Literal(dimension)).as_string(None))
    else:
        distance = "n.embedding <=> q.embedding"
    # Straight on the tables, not the read prefix: the planner must see the index's own
    # expression on `nodes` to walk it.
    return sql.SQL("""
        SELECT q.id, found.rank, found.farthest
        FROM public.nodes q
        LEFT JOIN LATERAL (
            SELECT max(s.rank) FILTER (WHERE s.id = q.id) AS rank,
                   max(s.distance) AS farthest FROM (
                SELECT n.id, n.distance, row_number() OVER () AS rank FROM (
                    SELECT n.id, {distance} AS distance FROM public.nodes n
                    WHERE {dimension} = {d}{live}
                    ORDER BY {distance} LIMIT {k}) n) s) found ON true
        WHERE q.id = ANY(%(ids)s::bigint[])""").format(
        d=sql.Literal(dimension), distance=sql.SQL(distance), k=sql.Literal(k),
        dimension=sql.SQL(schema.dimension_sql("n")),
        live=sql.SQL(" AND n.deleted_at IS NULL" if live else ""))


def read_self_search(rows: Sequence[Mapping[str, Any]],
                     ids: Sequence[int]) -> dict[int, tuple[int | None, bool]]:
    """``{id: (rank, tied)}`` from the rows of :func:`self_search_statement`."""
    found = {int(r["id"]): (None if r["rank"] is None else int(r["rank"]),
                             r["farthest"] is not None and r["farthest"] <= _TIE_DISTANCE)
             for r in rows}
    return {node: found.get(node, (None, False)) for node in ids}


class HygieneMixin(StoreBase):
    """Reads for the memory-hygiene checks (see :class:`~htm_analytics.LongTermMemory`).

    Each checks its arguments before any query: a bad one raises
    :class:`~htm_analytics.ValidationError` naming it (``scope``: see
    :func:`~htm_analytics.frames.validate_scope`)."""

    def vector_groups(self, scope: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Stored vectors in scope per model: ``provider``, ``model`` (string, NA when the
        vector was stored without its model's name), ``dimension`` and ``nodes`` (int64)."""
        return self.fetch_frame(_VECTOR_GROUPS, scope_parameters(scope),
                                dtypes={"provider": "string", "model": "string",
                                        "dimension": "int64", "nodes": "int64"})

    def count_in_scope(self, scope: Mapping[str, Any] | None = None) -> int:
        """Memories in scope."""
        query = f"SELECT count(*) AS n FROM nodes n WHERE {scope_condition()}"
        return int(self._fetch(query, scope_parameters(scope))[0]["n"])

    def iter_vectors(self, dimension: int, *, provider: str | None = None,
                     model: str | None = None, unnamed: bool = True,
                     scope: Mapping[str, Any] | None = None,
                     batch_rows: int = 5_000, first_id: int | None = None,
                     last_id: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Stream the stored vectors of one model as ``(ids, vectors)`` batches, by id.

        ``ids`` is int64 ``(n,)``, ``vectors`` float32 ``(n, dimension)`` at the model's own
        dimension. ``provider``/``model`` select vectors recorded with that model (None: those
        recorded without a name); ``unnamed`` adds the vectors stored without any record;
        ``first_id``/``last_id`` bound the ids (inclusive). A model recorded under two names
        (:func:`~htm_analytics.store.display.model_label`) is one model. All batches come from
        one repeatable-read transaction (pages of binary COPY): one consistent picture.
        """
        dimension = validate_dimension(dimension)
        label, unnamed = model_choice(provider, model, unnamed)
        batch_rows = validate_positive_int(batch_rows, field="batch_rows")
        bounds = {name: None if value is None else validate_positive_int(value, field=name)
                  for name, value in (("first_id", first_id), ("last_id", last_id))}
        query = sql.SQL(_VECTORS).format(d=sql.Literal(dimension),
                                         scope=sql.SQL(scope_condition()),
                                         label=sql.SQL(model_label_sql("m")))
        params = {**scope_parameters(scope), **bounds, "unnamed": unnamed, "label": label}
        with self._transaction() as cur:
            one_snapshot(cur)
            statement = self._read(query)
            yield from copy_vector_batches(
                cur, statement if isinstance(statement, sql.Composable) else sql.SQL(statement),
                params, dimension, batch_rows)

    def iter_contents(self, *, scope: Mapping[str, Any] | None = None,
                      batch_rows: int = 5_000,
                      ids: Sequence[int] | None = None) -> Iterator[pd.DataFrame]:
        """Stream ``id`` (int64), ``content`` and ``has_vector`` of the memories in scope
        (only those of ``ids`` when given), by id, in DataFrames of at most ``batch_rows``
        rows (one transaction)."""
        batch_rows = validate_positive_int(batch_rows, field="batch_rows")
        chosen = None if ids is None else validate_ids(ids, field="ids")
        params = {**scope_parameters(scope), "ids": chosen}
        with self._transaction() as cur, \
                cur.connection.cursor(name="hygiene_contents") as stream:
            stream.execute(self._read(_CONTENTS), params)
            while rows := stream.fetchmany(batch_rows):
                yield pd.DataFrame(rows, columns=["id", "content", "has_vector"]).astype(
                    {"id": "int64", "content": "object", "has_vector": "bool"})

    def trigram_pairs(self, min_similarity: float, *,
                      scope: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Pairs in scope, one side without a vector, whose pg_trgm similarity reaches
        ``min_similarity``: ``node_a < node_b`` (int64) and ``similarity`` (float64)."""
        threshold = validate_similarity(min_similarity, cosine=False)
        # pg_trgm computes similarity in float4: a prefix a little longer than exact
        # arithmetic needs keeps pairs at the threshold itself.
        params = {**scope_parameters(scope), "min_similarity": threshold,
                  "prefix_threshold": max(threshold - 1e-6, 1e-6)}
        with self._transaction() as cur:
            # Every memory with a vector (the usual case): no pair to look for. Asked apart
            # because the statement's own test would first compute every text's trigrams.
            cur.execute(self._read(_ANY_BARE), params)
            row = cur.fetchone()
            rows = []
            if row is not None and row["any_bare"]:
                cur.execute(self._read(_TRIGRAM_PAIRS), params)
                rows = cur.fetchall()
            frame = pd.DataFrame(rows, columns=["node_a", "node_b", "similarity"])
        return frame.drop_duplicates(["node_a", "node_b"]).astype(
            {"node_a": "int64", "node_b": "int64", "similarity": "float64"})

    def growth_counts(self, unit: str, *,
                      scope: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """New memories per ``unit`` (a ``date_trunc`` unit of
        :data:`~htm_analytics.frames.PERIOD_UNITS`): ``period``, ``robot`` (NA for the total),
        ``new`` (int64) and ``new_bytes`` (the total's text bytes, NA per robot)."""
        if not isinstance(unit, str) or unit not in PERIOD_UNITS:
            raise ValidationError(f"must be one of {', '.join(PERIOD_UNITS)}, got {unit!r:.40}",
                                  field="unit")
        return self.fetch_frame(_GROWTH, {**scope_parameters(scope), "unit": unit},
                                dtypes={"robot": "string", "new": "int64",
                                        "new_bytes": "Int64"})

    def shared_tag_pairs(self, *, min_similarity: float, max_tag_memories: int,
                         scope: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Pairs in scope that share a leaf tag (no deeper tag of the memory under it) held
        by at most ``max_tag_memories`` memories in scope and whose stored vectors (same
        dimension and model) reach cosine ``min_similarity``: ``node_a < node_b`` (int64),
        ``shared_tags`` (list of str) and ``similarity`` (float64)."""
        max_tag_memories = validate_positive_int(max_tag_memories, field="max_tag_memories")
        params = {**scope_parameters(scope), "min_similarity": validate_similarity(min_similarity,
                                                                           cosine=True),
                  "max_tag_memories": max_tag_memories}
        return self.fetch_frame(_SHARED_TAG_PAIRS, params, dtypes={
            "node_a": "int64", "node_b": "int64", "similarity": "float64"})

    def retention_facts(self, until: Any, *, scope: Mapping[str, Any] | None = None
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The memories in scope (``node_id`` int64, ``created_at``, ``access_count`` int64,
        ``last_accessed``: NaT unless accessed) and the event log's ``recall`` events of them
        up to ``until`` (``node_id`` int64, ``occurred_at``; empty without the log), one
        transaction."""
        params = {**scope_parameters(scope), "until": validate_moment(until, field="until")}
        with self._transaction() as cur:
            cur.execute(self._read(_RETENTION_NODES), params)
            nodes = pd.DataFrame(cur.fetchall(), columns=["node_id", "created_at",
                                                          "access_count", "last_accessed"])
            cur.execute(self._read(_RECALL_EVENTS), params)
            events = pd.DataFrame(cur.fetchall(), columns=["node_id", "occurred_at"])
        for frame, column in ((nodes, "created_at"), (nodes, "last_accessed"),
                              (events, "occurred_at")):
            frame[column] = pd.to_datetime(frame[column], utc=True)
        return (nodes.astype({"node_id": "int64", "access_count": "int64"}),
                events.astype({"node_id": "int64"}))

    def server_now(self) -> Any:
        """The server's clock (``now()``), which the access times were written with."""
        return self._fetch("SELECT now() AS now")[0]["now"]

    def describe_nodes(self, node_ids: Sequence[int], *,
                       width: int | None = None) -> pd.DataFrame:
        """What the findings show of each memory: ``id`` (int64), ``content`` (string),
        ``created_at``, ``access_count``, ``last_accessed``, ``embedding_dimension`` and
        ``robots`` (the names that remember it, comma-separated), ordered by id.

        With ``width``, ``content`` is the text as
        :func:`~htm_analytics.store.display.shorten_text` shows it at that width, read from
        its first characters only (a cluster of alike memories may hold most of the memory).
        """
        ids = validate_ids(node_ids, field="node_ids")
        dtypes = {"id": "int64", "content": "string", "access_count": "int64",
                  "embedding_dimension": "Int64", "robots": "string"}
        if width is None:
            return self.fetch_frame(_DESCRIBE.format(content="n.content"), {"ids": ids},
                                    dtypes=dtypes)
        width = validate_positive_int(width, field="width", maximum=100_000)
        head = width + SPARE
        frame = self.fetch_frame(_DESCRIBE.format(content="left(n.content, %(head)s::int)"),
                                 {"ids": ids, "head": head}, dtypes=dtypes)
        if len(frame):
            with self._transaction() as cur:
                frame["content"] = pd.array(shown_texts(
                    cur, self._read, frame["id"].tolist(), frame["content"].tolist(), width,
                    head), dtype="string")
        return frame

    def self_search(self, ids: Sequence[int], *, dimension: int, k: int, ef_search: int,
                    padded: bool = False) -> dict[int, tuple[int | None, bool]]:
        """Search each memory's own stored vector through the HNSW index.

        One statement per call: a LATERAL top-``k`` search per memory of ``ids`` (which must
        hold a ``dimension``-d vector), through the native index of that dimension when there
        is one and ``padded`` is False, else the reference schema's padded index. Returns
        ``{id: (rank, tied)}``: the 1-based rank of the memory among its own results (None
        when the index did not return it in the top ``k``), and whether all ``k`` results are
        at distance 0 from it (as many identical vectors as results: a tie, not a fault).
        """
        ids = validate_ids(ids, field="ids")
        dimension = validate_dimension(dimension)
        k = validate_positive_int(k, field="k", maximum=1000)
        ef_search = validate_positive_int(ef_search, field="ef_search", maximum=1000)
        native = dimension in self.native_dimensions and not validate_flag(padded,
                                                                           field="padded")
        statement = self_search_statement(dimension, k, native=native,
                                          live=self.schema_info.soft_deletes,
                                          schema=self.schema_info)
        with self._transaction() as cur:
            cur.execute("SELECT set_config('hnsw.ef_search', %s, true),"
                        "       set_config('enable_seqscan', 'off', true)",
                        (str(ef_search),))
            rows = cur.execute(statement, {"ids": ids}).fetchall()
        return read_self_search(rows, ids)
