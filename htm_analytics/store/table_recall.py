"""Recall@k and latency of the pgvector index on any table: HNSW or IVFFlat.

:func:`htm_analytics.benchmark_recall` measures the store's own ``nodes`` index; given
``table=`` it hands over to :func:`benchmark_table_recall`, which works on any table with a
``vector`` column and an ``hnsw`` or ``ivfflat`` index on it (the Self-Engineering Agent
Framework's ``agent_tools``, for instance), sweeping ``hnsw.ef_search`` or
``ivfflat.probes``. The ground truth is exact, computed here from every stored vector with
the index's own distance, and hits are counted as in :mod:`htm_analytics.tuning.benchmark`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from psycopg import sql

from ..errors import ValidationError
from ..validation import validate_number, validate_positive_int, validate_settings
from .sources import postgres_source

__all__ = ["DEFAULT_EF_SEARCH_SWEEP", "DEFAULT_PROBES_SWEEP", "HIT_EPSILON",
           "benchmark_table_recall"]

DEFAULT_PROBES_SWEEP = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_EF_SEARCH_SWEEP = (10, 20, 40, 80, 160, 320)
# A returned row is a hit when its true distance is within the true k-th distance plus this
# (as ann-benchmarks counts it), so that ties at the k-th place do not count as misses.
HIT_EPSILON = 1e-3
_OPERATORS = {"vector_cosine_ops": ("<=>", "cosine"), "vector_l2_ops": ("<->", "l2"),
              "vector_ip_ops": ("<#>", "inner_product")}
_SETTING = {"hnsw": "hnsw.ef_search", "ivfflat": "ivfflat.probes"}

_INDEXES = """
SELECT i.relname AS index, am.amname AS method, opc.opcname AS opclass,
       coalesce(array_to_string(i.reloptions, ','), '') AS options
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_am am ON am.oid = i.relam
JOIN pg_opclass opc ON opc.oid = x.indclass[0]
JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[0]
WHERE x.indrelid = %(table)s::regclass AND x.indnatts = 1 AND a.attname = %(column)s
  AND am.amname IN ('hnsw', 'ivfflat')
ORDER BY i.relname"""

_COLUMN = """
SELECT t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = %(table)s::regclass AND a.attname = %(column)s AND a.attnum > 0
  AND NOT a.attisdropped"""

_PRIMARY_KEY = """
SELECT array_agg(a.attname::text) FROM pg_index x
JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY(x.indkey)
WHERE x.indrelid = %(table)s::regclass AND x.indisprimary"""


def _distances(queries: np.ndarray, vectors: np.ndarray, metric: str) -> np.ndarray:
    q, v = queries.astype(np.float64), vectors.astype(np.float64)
    if metric == "cosine":
        qn = q / np.linalg.norm(q, axis=1, keepdims=True)
        vn = v / np.linalg.norm(v, axis=1, keepdims=True)
        return 1.0 - qn @ vn.T
    if metric == "l2":
        return np.sqrt(np.maximum((q * q).sum(1)[:, None] + (v * v).sum(1)[None, :]
                                  - 2.0 * q @ v.T, 0.0))
    return -(q @ v.T)


def _resolve(conn: psycopg.Connection[Any], table: Any, column: Any, index: Any,
             id_column: Any) -> dict[str, Any]:
    if not isinstance(table, str) or not table.strip():
        raise ValidationError("must be a table name", field="table")
    if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:  # type: ignore[index]
        raise ValidationError(f"no table {table!r}", field="table")
    names = {"table": table, "column": column}
    row = conn.execute(_COLUMN, names).fetchone()
    if row is None or row[0] != "vector":
        raise ValidationError(f"{table} has no vector column {column!r}", field="column")
    indexes = conn.execute(_INDEXES, names).fetchall()
    chosen = [r for r in indexes if index is None or r[0] == index]
    if not chosen:
        have = ", ".join(r[0] for r in indexes) or "none"
        raise ValidationError(f"no hnsw or ivfflat index {index or ''} on {table}.{column} "
                              f"(indexes there: {have})", field="index")
    name, method, opclass, options = chosen[0]
    if opclass not in _OPERATORS:
        raise ValidationError(f"index {name} uses {opclass}, not a vector opclass",
                              field="index")
    if id_column is None:
        keys = conn.execute(_PRIMARY_KEY, names).fetchone()[0]  # type: ignore[index]
        if not keys or len(keys) != 1:
            raise ValidationError(f"{table} has no single-column primary key: name one",
                                  field="id_column")
        id_column = keys[0]
    return {"index": name, "method": method, "operator": _OPERATORS[opclass][0],
            "metric": _OPERATORS[opclass][1], "options": options, "id_column": id_column}


def benchmark_table_recall(source: Any, *, table: str, column: str = "embedding",
                           index: str | None = None, id_column: str | None = None,
                           queries: int = 100, k: int = 10,
                           probes: int | Sequence[int] | None = None,
                           ef_search: int | Sequence[int] | None = None, repeats: int = 1,
                           seed: int = 0) -> pd.DataFrame:
    """Recall@k and latency of a pgvector index on any table, for each search setting.

    Parameters
    ----------
    source : str or LongTermMemory
        The database (a URL, or a store whose database has the table); read in one
        read-only transaction, settings applied with ``set_config(..., true)``.
    table, column : str
        The table (``schema.table`` allowed) and its ``vector`` column.
    index : str, optional
        Which ``hnsw`` or ``ivfflat`` index on that column (default: the first by name).
    id_column : str, optional
        The row identifier (default: the single-column primary key).
    queries : int
        Stored vectors used as held-out queries (each is left out of its own results and
        ground truth).
    k : int
        Neighbours per query.
    probes : int or sequence of int, optional
        ``ivfflat.probes`` settings to sweep for an IVFFlat index (default 1, 2, 4 ... 64);
        refused for an HNSW index.
    ef_search : int or sequence of int, optional
        ``hnsw.ef_search`` settings to sweep for an HNSW index (default 10, 20 ... 320);
        refused for an IVFFlat index.
    repeats : int
        Runs of each query per setting.
    seed : int
        Choice of queries.

    Returns
    -------
    pandas.DataFrame
        One row per setting: ``table``, ``column``, ``index``, ``method`` (``hnsw`` or
        ``ivfflat``), ``metric``, ``parameter`` (``hnsw.ef_search`` / ``ivfflat.probes``),
        ``index_options`` (string); ``value``, ``k``, ``queries``, ``rows`` (int64);
        ``recall_mean``, ``recall_p5``, ``latency_p50_ms``, ``latency_p95_ms``, ``qps``
        (float64); ``used_index`` (bool: EXPLAIN shows the index). Recall counts the true
        neighbours found among the ``min(k, rows - 1)`` a held-out query has.
    """
    k = validate_positive_int(k, field="k", maximum=1000)
    n_queries = validate_positive_int(queries, field="queries", maximum=100_000)
    repeats = validate_positive_int(repeats, field="repeats", maximum=100)
    if not isinstance(column, str) or not column:
        raise ValidationError("must be a column name", field="column")
    seed = validate_number(seed, field="seed", integer=True, minimum=0)
    settings = {name: None if values is None else
                validate_settings(values, field=name, maximum=10_000)
                for name, values in (("probes", probes), ("ef_search", ef_search))}
    with postgres_source(source, field="source") as conn:
        target = _resolve(conn, table, column, index, id_column)
        parameter = _SETTING[target["method"]]
        field, other = ("probes", "ef_search") if target["method"] == "ivfflat" else \
            ("ef_search", "probes")
        if settings[other] is not None:  # the other index type's setting: refused, not ignored
            raise ValidationError(f"does not apply to {target['index']}, an "
                                  f"{target['method'].upper()} index: sweep {field}",
                                  field=other)
        sweep = settings[field] or list(
            DEFAULT_PROBES_SWEEP if field == "probes" else DEFAULT_EF_SEARCH_SWEEP)
        relation = sql.Identifier(*table.split("."))
        ids, vectors = _load(conn, relation, sql.Identifier(column),
                             sql.Identifier(target["id_column"]))
        if n_queries > len(ids) - 1:
            raise ValidationError(f"asked for {n_queries} queries but {table} has only "
                                  f"{len(ids)} vectors", field="queries")
        chosen = np.random.default_rng(seed).choice(len(ids), size=n_queries, replace=False)
        distance = _distances(vectors[chosen], vectors, target["metric"])
        distance[np.arange(n_queries), chosen] = np.inf
        kth = np.sort(distance, axis=1)[:, min(k, len(ids) - 1) - 1]
        position = {key: i for i, key in enumerate(ids)}
        statement = sql.SQL("SELECT {id} FROM {t} WHERE {c} IS NOT NULL "
                            "ORDER BY {c} {op} %s LIMIT {n}").format(
            id=sql.Identifier(target["id_column"]), t=relation, c=sql.Identifier(column),
            op=sql.SQL(target["operator"]), n=sql.Literal(k + 1))
        rows = []
        for value in sweep:
            rows.append(_measure(conn, statement, parameter, value, vectors[chosen], chosen,
                                 ids, position, distance, kth, k, repeats, target["index"]))
    labels = {"table": table, "column": column, "index": target["index"],
              "method": target["method"], "metric": target["metric"],
              "parameter": parameter, "index_options": target["options"]}
    frame = pd.DataFrame([{**labels, **row, "rows": len(ids)} for row in rows])
    return frame.astype({"table": "string", "column": "string", "index": "string",
                         "method": "string", "metric": "string", "parameter": "string",
                         "index_options": "string", "value": "int64", "k": "int64",
                         "queries": "int64", "rows": "int64", "recall_mean": "float64",
                         "recall_p5": "float64", "latency_p50_ms": "float64",
                         "latency_p95_ms": "float64", "qps": "float64", "used_index": "bool"})


def _load(conn: psycopg.Connection[Any], relation: sql.Composable, column: sql.Composable,
          id_column: sql.Composable) -> tuple[list[Any], np.ndarray]:
    ids: list[Any] = []
    vectors: list[np.ndarray] = []
    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT {}, {} FROM {} WHERE {} IS NOT NULL ORDER BY 1").format(
            id_column, column, relation, column))
        while batch := cur.fetchmany(10_000):
            for key, vector in batch:
                ids.append(key)
                vectors.append(np.asarray(vector.to_numpy() if hasattr(vector, "to_numpy")
                                          else vector, dtype=np.float32))
    if not vectors:
        raise ValidationError("the table has no vectors to benchmark", field="table")
    return ids, np.vstack(vectors)


def _measure(conn: psycopg.Connection[Any], statement: sql.Composed, parameter: str,
             value: int, queries: np.ndarray, chosen: np.ndarray, ids: list[Any],
             position: dict[Any, int], distance: np.ndarray, kth: np.ndarray, k: int,
             repeats: int, index: str) -> dict[str, Any]:
    with conn.cursor() as cur:
        cur.execute("SELECT set_config(%s, %s, true), set_config('enable_seqscan', 'off', true)",
                    (parameter, str(value)))
        plan = cur.execute(sql.SQL("EXPLAIN (FORMAT JSON) {}").format(statement),
                           (queries[0],)).fetchone()[0]  # type: ignore[index]
        recall = np.zeros(len(queries))
        seconds = []
        for i, query in enumerate(queries):
            for _ in range(repeats):
                started = time.perf_counter()
                found = [r[0] for r in cur.execute(statement, (query,), prepare=True)]
                seconds.append(time.perf_counter() - started)
            hits = [position[f] for f in found if f in position and position[f] != chosen[i]][:k]
            # over the true neighbours there are: fewer than k when the table holds k or fewer
            recall[i] = float((distance[i, hits] <= kth[i] + HIT_EPSILON).sum()) \
                / min(k, len(ids) - 1)
    milliseconds = np.asarray(seconds) * 1000.0
    return {"value": value, "k": k, "queries": len(queries),
            "recall_mean": float(recall.mean()), "recall_p5": float(np.percentile(recall, 5)),
            "latency_p50_ms": float(np.percentile(milliseconds, 50)),
            "latency_p95_ms": float(np.percentile(milliseconds, 95)),
            "qps": float(len(milliseconds) / (milliseconds.sum() / 1000.0)),
            "used_index": _uses_index(plan, index)}


def _uses_index(plan: Any, index: str) -> bool:
    """Whether an EXPLAIN (FORMAT JSON) plan scans ``index``."""
    if isinstance(plan, dict):
        return plan.get("Index Name") == index or any(_uses_index(v, index)
                                                      for v in plan.values())
    if isinstance(plan, list):
        return any(_uses_index(v, index) for v in plan)
    return False
