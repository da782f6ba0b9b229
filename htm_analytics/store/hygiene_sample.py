"""Reads behind the hygiene checks run on a sample of memories (``sample=`` of
:func:`htm_analytics.memory_hygiene` and its checks, and the report's bounded section).

The sample is chosen in the database (``sql/hygiene/sample_ids.sql``: the memories whose ids
hash lowest with the seed), so only the sampled ids reach Python. Each read then costs what
the sample costs, not what the memory holds: the sampled memories' vectors searched through
the HNSW index, their texts through the trigram index, their tags through the tags' index.
Like :mod:`~htm_analytics.store.hygiene`, every statement only reads and takes the scope as
bound parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from psycopg import sql

from .._sql import read_sql
from ..validation import validate_dimension, validate_ids, validate_number, validate_positive_int
from ._base import StoreBase
from .display import model_label_sql
from .hygiene import (
    compared_tag_pairs,
    model_choice,
    scope_condition,
    scope_parameters,
    searches_per_statement,
    validate_similarity,
)
from .vector_stream import copy_ids, one_snapshot

__all__ = ["SampledHygieneMixin"]

_PAIR_DTYPES = {"node_a": "int64", "node_b": "int64", "similarity": "float64"}


def _statement(name: str, **parts: sql.Composable) -> sql.Composed:
    """``sql/hygiene/<name>.sql`` with the scope condition and ``parts`` filled in."""
    return sql.SQL(read_sql("hygiene", f"{name}.sql")).format(
        scope=sql.SQL(scope_condition()), **parts)


def _ordered_pairs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows of ``(node_a, node_b, similarity)`` as ``node_a < node_b``, each pair once."""
    frame = pd.DataFrame(rows, columns=["node_a", "node_b", "similarity"]).astype(_PAIR_DTYPES)
    low = np.minimum(frame["node_a"], frame["node_b"])
    frame["node_b"] = np.maximum(frame["node_a"], frame["node_b"])
    frame["node_a"] = low
    return frame.drop_duplicates(["node_a", "node_b"]).reset_index(drop=True)


class SampledHygieneMixin(StoreBase):
    """Reads for hygiene checks on a sample (see :class:`~htm_analytics.LongTermMemory`).

    Like :class:`~htm_analytics.store.hygiene.HygieneMixin`'s, each checks its arguments
    before any query (a :class:`~htm_analytics.ValidationError` naming the bad one)."""

    def sample_ids(self, size: int, *, seed: int = 0,
                   scope: Mapping[str, Any] | None = None,
                   dimension: int | None = None) -> np.ndarray:
        """The ids (int64, ascending) of ``size`` memories in scope chosen by a hash of their
        id and ``seed``: the same memories on every call with the same seed (all of them when
        the scope holds fewer). ``dimension``: only memories holding a vector of that many
        dimensions."""
        size = validate_positive_int(size, field="sample")
        seed = validate_number(seed, field="seed", minimum=0, maximum=2**63 - 1, integer=True)
        if dimension is not None:
            dimension = validate_dimension(dimension)
        rows = self._fetch(_statement("sample_ids"),
                           {**scope_parameters(scope), "size": size, "seed": seed,
                            "dimension": dimension})
        return np.sort(np.fromiter((r["id"] for r in rows), dtype=np.int64, count=len(rows)))

    def vector_ids(self, dimension: int, *,
                   scope: Mapping[str, Any] | None = None) -> np.ndarray:
        """The ids (int64, ascending) of the memories in scope holding a ``dimension``-d
        vector, whatever model made it (read through one binary COPY: ids only)."""
        dimension = validate_dimension(dimension)
        params = scope_parameters(scope)
        query = sql.SQL("SELECT n.id::bigint AS id FROM nodes n WHERE n.embedding_dimension = {d} "
                        "AND {scope} ORDER BY n.id").format(
            d=sql.Literal(dimension), scope=sql.SQL(scope_condition()))
        statement = self._read(query)
        with self._transaction() as cur:
            one_snapshot(cur)
            return copy_ids(cur, statement if isinstance(statement, sql.Composable)
                            else sql.SQL(statement), params)

    def sampled_neighbours(self, ids: Sequence[int] | np.ndarray, *, dimension: int,
                           provider: str | None, model: str | None, unnamed: bool,
                           min_similarity: float, k: int, ef_search: int,
                           scope: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Near-duplicates of the memories ``ids`` anywhere in scope, through the HNSW index.

        Each memory of ``ids`` holding a ``dimension``-d vector of the model group
        (``provider``/``model``, plus the vectors stored without a model when ``unnamed``)
        is searched with its own vector, top ``k`` at ``hnsw.ef_search = ef_search``,
        through the native index of that dimension when there is one, else the padded one;
        the neighbours of the same group in scope whose cosine similarity (pgvector's)
        reaches ``min_similarity`` are its pairs. A memory with more than ``k - 1`` of them
        gets its ``k - 1`` nearest. Returns ``node_a < node_b`` (int64) and ``similarity``
        (float64), each pair once.
        """
        chosen = validate_ids(ids, field="ids")
        dimension = validate_dimension(dimension)
        label, unnamed = model_choice(provider, model, unnamed)
        params = {**scope_parameters(scope), "label": label, "unnamed": unnamed,
                  "min_similarity": validate_similarity(min_similarity, cosine=True)}
        k = validate_positive_int(k, field="k", maximum=1000)
        ef_search = validate_positive_int(ef_search, field="ef_search", maximum=1000)
        native = dimension in self.native_dimensions
        vector = "(subvector({side}.embedding, 1, {d})::vector({d}))" if native \
            else "{side}.embedding"
        distance = sql.SQL("{} <=> {}").format(
            *(sql.SQL(vector.format(side=side, d=dimension)) for side in ("n", "q")))
        statement = _statement(
            "sampled_neighbours", distance=distance, d=sql.Literal(dimension),
            k=sql.Literal(k), qm_label=sql.SQL(model_label_sql("qm")),
            fm_label=sql.SQL(model_label_sql("fm")),
            n_dimension=sql.SQL(self.schema_info.dimension_sql("n")),
            q_dimension=sql.SQL(self.schema_info.dimension_sql("q")),
            live=sql.SQL(" AND n.deleted_at IS NULL" if self.schema_info.soft_deletes else ""))
        rows: list[dict[str, Any]] = []
        with self._transaction() as cur:
            cur.execute("SELECT set_config('hnsw.ef_search', %s, true),"
                        "       set_config('enable_seqscan', 'off', true)", (str(ef_search),))
            step = searches_per_statement(ef_search)
            for start in range(0, len(chosen), step):
                cur.execute(self._read(statement),
                            {**params, "ids": chosen[start:start + step]})
                rows += cur.fetchall()
        return _ordered_pairs(rows)

    def sampled_trigram_pairs(self, ids: Sequence[int] | np.ndarray, *, min_similarity: float,
                              scope: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Pairs of a memory of ``ids`` and a memory without a vector in scope (the memories
        of ``ids`` without a vector against every memory in scope, those with one against
        the memories without), by pg_trgm similarity at least ``min_similarity``, through
        the trigram index: ``node_a < node_b`` (int64) and ``similarity`` (float64)."""
        chosen = validate_ids(ids, field="ids")
        threshold = validate_similarity(min_similarity, cosine=False)
        params = {**scope_parameters(scope), "ids": chosen, "min_similarity": threshold}
        if not chosen:
            return _ordered_pairs([])
        with self._transaction() as cur:
            # `%` keeps pairs above the threshold (pg_trgm's float4): a hair below it keeps
            # the pairs at the threshold itself, which the statement then checks exactly.
            cur.execute("SELECT set_config('pg_trgm.similarity_threshold', %s, true)",
                        (str(max(threshold - 1e-6, 0.0)),))
            cur.execute(self._read(_statement("sampled_trigram_pairs")), params)
            return _ordered_pairs(cur.fetchall())

    def sampled_tag_pairs(self, ids: Sequence[int] | np.ndarray, *, min_similarity: float,
                          max_tag_memories: int,
                          scope: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """The pairs of :meth:`~htm_analytics.LongTermMemory.shared_tag_pairs` that touch a
        memory of ``ids``, read through the tags' index rather than from every memory:
        ``node_a < node_b`` (int64), ``shared_tags`` (list of str) and ``similarity``
        (float64)."""
        max_tag_memories = validate_positive_int(max_tag_memories, field="max_tag_memories")
        params = {**scope_parameters(scope), "ids": validate_ids(ids, field="ids"),
                  "min_similarity": validate_similarity(min_similarity, cosine=True),
                  "max_tag_memories": max_tag_memories}
        return self.fetch_frame(_statement("sampled_tag_pairs", compared=compared_tag_pairs()),
                                params,
                                dtypes=_PAIR_DTYPES)
