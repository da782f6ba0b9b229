"""Search quality on labelled queries: which strategy finds the right memory."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._plotting import axes_or_new
from .errors import ValidationError
from .store import SEARCH_STRATEGIES, LongTermMemory
from .validation import validate_positive_int

__all__ = ["STRATEGIES", "retrieval_quality", "plot_retrieval_quality"]

STRATEGIES = SEARCH_STRATEGIES


def retrieval_quality(store: LongTermMemory, queries: Sequence[str], query_vectors: np.ndarray,
                      relevant: Sequence[int], *, k: int = 10,
                      strategies: Sequence[str] = ("vector", "fulltext", "hybrid", "rrf")
                      ) -> pd.DataFrame:
    """Recall@k and MRR of each search strategy on queries with one known right answer.

    Parameters
    ----------
    store : LongTermMemory
    queries : sequence of str
        Query texts (used by the full-text part).
    query_vectors : numpy.ndarray
        ``(n, d)`` embeddings of the queries, from the model that embedded the memories.
    relevant : sequence of int
        For each query, the node id of the memory that answers it.
    k : int
        Results per search.
    strategies : sequence of str
        Among 'vector', 'fulltext' (every word, the reference behaviour), 'fulltext_any'
        (any word, ranked), 'fuzzy' (trigram similarity), 'hybrid' (the reference 0.7/0.3
        weighting) and 'rrf' (reciprocal rank fusion of vectors and any-word full text).

    Returns
    -------
    pandas.DataFrame
        One row per strategy: ``strategy`` (string), ``recall_at_k`` (float64: share of queries
        whose answer is in the top k), ``mrr`` (float64: mean reciprocal rank, 0 when absent),
        ``no_result`` (float64: share of queries with no result at all), ``latency_p50_ms``
        (float64, through the store, cache off), ``queries``, ``k`` (int64).
    """
    k = validate_positive_int(k, field="k", maximum=1000)
    vectors = np.asarray(query_vectors, dtype=np.float32)
    if len(queries) != len(vectors) or len(queries) != len(relevant):
        raise ValidationError("queries, query_vectors and relevant must have the same length",
                              field="queries")
    unknown = set(strategies) - set(STRATEGIES)
    if unknown:
        raise ValidationError(f"unknown strategies {sorted(unknown)}; use {STRATEGIES}",
                              field="strategies")
    rows = []
    for strategy in strategies:
        ranks, empty, seconds = [], 0, []
        for text, vector, answer in zip(queries, vectors, relevant):
            store.clear_cache()  # time the search, not the cache
            started = time.perf_counter()
            found = [r["id"] for r in store.search_by_strategy(strategy, query=text, limit=k,
                                                                embedding=vector)]
            seconds.append(time.perf_counter() - started)
            empty += not found
            ranks.append(found.index(answer) + 1 if answer in found else 0)
        ranked = np.asarray(ranks)
        reciprocal = np.where(ranked > 0, 1.0 / np.maximum(ranked, 1), 0.0)
        rows.append({"strategy": strategy, "recall_at_k": float((ranked > 0).mean()),
                     "mrr": float(reciprocal.mean()), "no_result": empty / len(queries),
                     "latency_p50_ms": float(np.median(seconds) * 1000),
                     "queries": len(queries), "k": k})
    return pd.DataFrame(rows).astype({"strategy": "string", "queries": "int64", "k": "int64"})


def plot_retrieval_quality(df: pd.DataFrame, *, ax: Any = None, **kwargs: Any) -> Any:
    """Bars of recall@k and MRR per strategy from :func:`retrieval_quality`, with the median
    latency of each strategy beside them (points, right axis, log scale) when measured.
    Returns the Axes of the bars."""
    ax = axes_or_new(ax, (8, 3.8))
    positions = np.arange(len(df))
    ax.bar(positions - 0.2, df["recall_at_k"], width=0.4, label=f"recall@{df['k'].iloc[0]}",
           **kwargs)
    ax.bar(positions + 0.2, df["mrr"], width=0.4, label="MRR", **kwargs)
    ax.set_xticks(positions, df["strategy"].tolist())
    ax.set_ylim(0, 1.3)  # room for the legend above the bars
    ax.set_ylabel("share of queries / MRR")
    handles, names = ax.get_legend_handles_labels()
    if "latency_p50_ms" in df and df["latency_p50_ms"].notna().any():
        latency = ax.twinx()
        latency.plot(positions, df["latency_p50_ms"], "D", color="#333333", label="p50 latency")
        for x, value in zip(positions, df["latency_p50_ms"]):
            latency.annotate(f"{value:.1f} ms", (x, value), xytext=(14, 0),
                             textcoords="offset points", va="center", fontsize=7)
        latency.set_yscale("log")
        low, high = df["latency_p50_ms"].min(), df["latency_p50_ms"].max()
        latency.set_ylim(low / 2, high * 6)  # keep the points clear of the legend
        latency.set_ylabel("p50 latency (ms, log)")
        extra_handles, extra_names = latency.get_legend_handles_labels()
        handles, names = handles + extra_handles, names + extra_names
    ax.legend(handles, names, loc="upper center", fontsize=8, ncols=3)
    ax.set_title("Which search finds the right memory, and how fast")
    return ax
