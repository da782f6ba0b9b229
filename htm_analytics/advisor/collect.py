"""One sample of a memory's vital signs, appended to its history (``htm-analytics collect``).

Reads only: row counts per table and per robot, sizes and statistics counters of every
table and index, the top statements where ``pg_stat_statements`` is there, the
``hnsw.ef_search`` new sessions get, and the recall@k of the live vector index at that
setting on a seeded sample of stored vectors, against exact search, with its Wilson
interval. The sample goes to a DuckDB file the user chooses (:mod:`htm_analytics.store.history`).
"""

from __future__ import annotations

import os
from importlib.metadata import version
from typing import Any

import pandas as pd

from ..analysis._common import wilson_interval
from ..analysis.robots import robot_activity
from ..errors import ValidationError
from ..store import LongTermMemory
from ..store.history import HistoryTable, append_sample
from ..tuning.benchmark import benchmark_recall
from ..validation import validate_positive_int

__all__ = ["collect_sample"]


def _sampled_recall(store: LongTermMemory, ef_search: int | None, queries: int, k: int,
                    seed: int) -> dict[str, Any]:
    empty = {"recall": None, "recall_low": None, "recall_high": None, "recall_queries": 0,
             "recall_k": k, "recall_seed": seed}
    with store.tuning_session() as session:
        stored = session.vector_dimensions()
    count = int(max(stored.values())) if stored else 0
    if ef_search is None or count <= k:
        return empty
    queries = min(queries, count - 1)
    frame = benchmark_recall(store, queries=queries, k=k, ef_search=[ef_search], repeats=1,
                             seed=seed, progress=False)
    recall = float(frame["recall_mean"].iloc[0])
    asked = queries * k
    low, high = wilson_interval(round(recall * asked), asked)
    return {**empty, "recall": recall, "recall_low": low, "recall_high": high,
            "recall_queries": queries}


def collect_sample(store: LongTermMemory, history: str | os.PathLike[str] | HistoryTable, *,
                   recall_queries: int = 200, k: int = 10, seed: int = 0,
                   statements: int = 20) -> dict[str, pd.DataFrame]:
    """Take one sample of the memory's vital signs and append it to ``history``.

    Parameters
    ----------
    store : LongTermMemory
        The memory; only read (a SELECT-only role is enough).
    history : path or HistoryTable
        The DuckDB file of the history (created when missing), or
        ``HistoryTable(url, schema)``: tables in a PostgreSQL schema you name.
    recall_queries : int
        Stored vectors searched for the sampled recall (fewer when fewer are stored).
    k : int
        Neighbours per search (recall@k).
    seed : int
        Which vectors are searched: the same seed picks the same ones while the memory
        holds the same vectors.
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
