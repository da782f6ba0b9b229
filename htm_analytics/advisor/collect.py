"""One sample of a memory's vital signs, appended to its history (``htm-analytics collect``).

Reads only: row counts per table and per robot, sizes and statistics counters of every
table and index, the top statements where ``pg_stat_statements`` is there, the
``hnsw.ef_search`` new sessions get, and the recall@k of the live vector index at that
setting, against exact search, with its Wilson interval: on a sample of stored vectors, and
on a sample of the query vectors recalls logged where the database has the query log
(migration 011). The sample goes to a DuckDB file, a Parquet folder or a PostgreSQL schema
the user chooses (:mod:`htm_analytics.store.history`).
"""

from __future__ import annotations

import os
from importlib.metadata import version
from typing import Any

import numpy as np
import pandas as pd

from ..analysis._common import wilson_interval
from ..analysis.robots import robot_activity
from ..errors import ValidationError
from ..store import LongTermMemory
from ..store.history import HistoryFolder, HistoryTable, append_sample
from ..tuning import benchmark_recall, stable_sample
from ..validation import validate_positive_int

__all__ = ["collect_sample"]


def _recall(store: LongTermMemory, queries: int | np.ndarray, *, ef_search: int, k: int,
            seed: int, dimension: int) -> dict[str, Any]:
    """Recall@k of the live index at ``ef_search`` on ``queries`` (a count of held-out
    stored vectors, or vectors), with its Wilson interval over the queries' k neighbours."""
    frame = benchmark_recall(store, queries=queries, k=k, ef_search=[ef_search], repeats=1,
                             seed=seed, dimension=dimension, progress=False)
    recall = float(frame["recall_mean"].iloc[0])
    searched = int(frame["queries"].iloc[0])
    low, high = wilson_interval(round(recall * searched * k), searched * k)
    return {"recall": recall, "recall_low": low, "recall_high": high,
            "recall_queries": searched}


def _sampled_recall(store: LongTermMemory, ef_search: int | None, queries: int, k: int,
                    seed: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "recall": None, "recall_low": None, "recall_high": None, "recall_queries": 0,
        "recall_k": k, "recall_seed": seed, "logged_queries": None, "logged_recall": None,
        "logged_recall_low": None, "logged_recall_high": None, "logged_recall_queries": 0}
    with store.tuning_session() as session:
        stored = session.vector_dimensions()
    if not stored:
        return result
    dimension = max(stored, key=lambda d: (stored[d], d))  # as benchmark_recall chooses
    logged = store.logged_query_vectors(dimension)
    if logged is not None:
        result["logged_queries"] = len(logged[0])
    if ef_search is None or stored[dimension] <= k:
        return result
    options = {"ef_search": ef_search, "k": k, "seed": seed, "dimension": dimension}
    result.update(_recall(store, min(queries, stored[dimension] - 1), **options))
    if logged is not None and len(logged[0]):
        ids, vectors = logged
        chosen = np.searchsorted(ids, np.sort(stable_sample(ids, queries, seed)))
        measured = _recall(store, vectors[chosen], **options)
        result.update({f"logged_{name}": value for name, value in measured.items()})
    return result


def collect_sample(store: LongTermMemory,
                   history: str | os.PathLike[str] | HistoryFolder | HistoryTable, *,
                   recall_queries: int = 200, k: int = 10, seed: int = 0,
                   statements: int = 20) -> dict[str, pd.DataFrame]:
    """Take one sample of the memory's vital signs and append it to ``history``.

    Parameters
    ----------
    store : LongTermMemory
        The memory; only read (a SELECT-only role is enough).
    history : path, HistoryFolder or HistoryTable
        The DuckDB file of the history (created when missing); a folder of Parquet files
        (a path ending with ``/``, an existing folder, or ``HistoryFolder(path)``); or
        ``HistoryTable(url, schema)``: tables in a PostgreSQL schema you name.
    recall_queries : int
        Stored vectors searched for the sampled recall (fewer when fewer are stored), and
        logged query vectors where the database logs them (fewer when fewer are logged).
    k : int
        Neighbours per search (recall@k).
    seed : int
        Which vectors are searched: those whose ids hash lowest with the seed, so the same
        seed picks the same ones while the memory holds the same vectors, and adding memories
        keeps nearly all of them.
    statements : int
        How many of the statements with the most time to keep (pg_stat_statements).

    Returns
    -------
    dict of str to DataFrame
        The sample as stored: ``samples`` (one row, ``sample_id`` included),
        ``sample_tables``, ``sample_indexes``, ``sample_robots``, ``sample_statements``
        (columns in docs/history.md).
    """
    if not isinstance(store, LongTermMemory):
        raise ValidationError("needs a live LongTermMemory", field="store")
    recall_queries = validate_positive_int(recall_queries, field="recall_queries")
    k = validate_positive_int(k, field="k", maximum=1000)
    statements = validate_positive_int(statements, field="statements", maximum=1000)
    server = store.server_vitals()
    tables, indexes = store.relation_vitals()
    counts = store.table_counts().set_index("table")["rows"]
    tables = tables.rename(columns={"table": "table_name"})
    tables.insert(2, "row_count", tables["table_name"].map(counts).astype("Int64"))
    indexes = indexes.rename(columns={"table": "table_name", "index": "index_name"})
    robots = robot_activity(store)[["robot", "nodes"]].rename(columns={"nodes": "memories"})
    top = store.top_statements(statements) if server["statements_available"] else \
        pd.DataFrame(columns=["queryid", "query", "calls", "total_ms", "mean_ms", "rows"])
    recall = _sampled_recall(store, server["ef_search"], recall_queries, k, seed)
    samples = pd.DataFrame([{**server, **recall, "toolkit_version": version("htm-analytics")}])
    sample = {"samples": samples, "sample_tables": tables, "sample_indexes": indexes,
              "sample_robots": robots, "sample_statements": top}
    sample_id = append_sample(history, sample)
    return {name: frame.assign(sample_id=sample_id) for name, frame in sample.items()}
