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
from ..store.history import HistoryFolder, HistoryTable, append_sample, history_location
from ..tuning import stable_sample
from ..tuning.sampled_recall import recall_per_query
from ..validation import validate_number, validate_positive_int

__all__ = ["collect_sample"]


def _interval(recall: np.ndarray, k: int, prefix: str) -> dict[str, Any]:
    """Mean recall of the queries with its Wilson interval over their k neighbours each."""
    if not len(recall):
        return {}
    low, high = wilson_interval(round(float(recall.sum()) * k), len(recall) * k)
    return {f"{prefix}recall": float(recall.mean()), f"{prefix}recall_low": low,
            f"{prefix}recall_high": high, f"{prefix}recall_queries": len(recall)}


def _sampled_recall(store: LongTermMemory, ef_search: int | None, queries: int, k: int,
                    seed: int, *, logged: bool = True) -> dict[str, Any]:
    """Recall on held-out stored vectors and on logged query vectors (``logged``: where the
    memory has them), both searched in one read of the stored vectors, and the name of the
    index searched (``recall_index``: the native index of the measured dimension where there
    is one, else the padded one; None when nothing was searched)."""
    result: dict[str, Any] = {
        "recall": None, "recall_low": None, "recall_high": None, "recall_queries": 0,
        "recall_k": k, "recall_seed": seed, "logged_queries": None, "logged_recall": None,
        "logged_recall_low": None, "logged_recall_high": None, "logged_recall_queries": 0,
        "recall_index": None}
    with store.tuning_session() as session:
        stored = session.vector_dimensions()
        if not stored:  # no dimension to measure: none logged of it, where there is a log
            if store.schema_info.has_table("memory_query_vectors"):
                result["logged_queries"] = 0
            return result
        dimension = max(stored, key=lambda d: (stored[d], d))  # as benchmark_recall chooses
        log = store.logged_query_vectors(dimension) if logged else None
        if log is not None:
            result["logged_queries"] = len(log[0])
        if ef_search is None or stored[dimension] <= k:
            return result
        result["recall_index"] = session.live_index(dimension)  # what recall_per_query walks
        ids = session.stored_ids(dimension)
        chosen = stable_sample(ids, min(queries, len(ids) - 1), seed)
        fetched, vectors = session.stored_vectors(dimension, ids=np.sort(chosen))
    held_out = vectors[np.searchsorted(fetched, chosen)]
    asked, own = [held_out], [chosen]
    if log is not None and len(log[0]):  # searched in the same pass
        logged_ids, logged_vectors = log
        picked = np.searchsorted(logged_ids, np.sort(stable_sample(logged_ids, queries, seed)))
        asked.append(logged_vectors[picked])
        own.append(np.full(len(picked), -1, dtype=np.int64))
    recall = recall_per_query(store, np.vstack(asked), np.concatenate(own),
                              dimension=dimension, k=k, ef_search=ef_search)
    result.update(_interval(recall[:len(chosen)], k, ""))
    result.update(_interval(recall[len(chosen):], k, "logged_"))
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
    seed = validate_number(seed, field="seed", integer=True)
    history = history_location(history)  # a path it cannot use, refused before the work
    server = store.server_vitals()
    tables, indexes = store.relation_vitals()
    counts = store.table_counts().set_index("table")["rows"]
    tables = tables.rename(columns={"table": "table_name"})
    tables.insert(2, "row_count", tables["table_name"].map(counts).astype("Int64"))
    indexes = indexes.rename(columns={"table": "table_name", "index": "index_name"})
    robots = robot_activity(store)[["robot", "nodes"]].rename(columns={"nodes": "memories"})
    top = store.top_statements(statements) if server["statements_available"] else \
        pd.DataFrame(columns=["queryid", "query", "calls", "total_ms", "mean_ms", "rows",
                              "stats_since"])
    recall = _sampled_recall(store, server["ef_search"], recall_queries, k, seed)
    samples = pd.DataFrame([{**server, **recall, "toolkit_version": version("htm-analytics")}])
    sample = {"samples": samples, "sample_tables": tables, "sample_indexes": indexes,
              "sample_robots": robots, "sample_statements": top}
    sample_id = append_sample(history, sample)
    return {name: frame.assign(sample_id=sample_id) for name, frame in sample.items()}
