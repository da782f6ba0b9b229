"""Search quality on labelled queries: which strategy finds the right memory, and how fast.

Metrics come from ``ir_measures`` (the trec_eval implementations through pytrec_eval), paired
significance from ``scipy.stats``; this module only runs the searches and shapes the frames.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ir_measures
import numpy as np
import pandas as pd

from .._plotting import axes_or_new, checked_plot, fraction_limits
from ..errors import ValidationError
from ..store import SEARCH_STRATEGIES, VECTOR_STRATEGIES, LongTermMemory, live_store
from ..validation import (
    real_matrix,
    validate_id,
    validate_list,
    validate_positive_int,
)
from .labelled_queries import (
    query_texts,
    query_vectors,
    read_labelled_queries,
    relevance,
)

__all__ = ["EVALUATED_STRATEGIES", "RetrievalEvaluation", "evaluate_retrieval",
           "read_labelled_queries", "plot_retrieval", "retrieval_quality",
           "plot_retrieval_quality"]

# Fuzzy matching answers a different question (typos), so it is measured only on request.
EVALUATED_STRATEGIES = tuple(s for s in SEARCH_STRATEGIES if s != "fuzzy")


@dataclass(frozen=True)
class RetrievalEvaluation:
    """What :func:`evaluate_retrieval` measured.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per strategy: ``strategy`` (string), ``recall_at_1``, ``recall_at_5``,
        ``recall_at_{k}``, ``mrr_at_{k}``, ``ndcg_at_{k}`` (float64, means over queries; a
        cutoff above ``k`` is left out; nDCG as trec_eval computes it, with the grade as the
        gain), ``no_result`` (float64: share of queries with no
        result), ``latency_p50_ms``, ``latency_p95_ms`` (float64, through the store, cache
        off, over every repeat), ``latency_p50_spread_ms`` (float64: the range, max - min,
        of the repeats' median latency; 0 with one repeat: differences between strategies
        smaller than their spreads together are noise), ``queries``, ``k``, ``repeats``
        (int64).
    per_query : pandas.DataFrame
        One row per query and strategy, for error analysis: ``query_id`` (int64, position in
        the input), ``query`` (string), ``strategy`` (string), ``first_relevant_rank`` (Int64:
        rank of the first relevant result, <NA> when none is in the top k), ``returned``
        (int64), the same metric columns as ``summary`` (float64), ``latency_ms``
        (float64: the median over the repeats) and ``retrieved`` (object: the returned node
        ids, best first).
    significance : pandas.DataFrame
        One row per pair of strategies and metric (``mrr_at_{k}`` and ``recall_at_{k}``):
        ``strategy_a``, ``strategy_b``, ``metric`` (string), ``mean_a``, ``mean_b``,
        ``difference`` (a - b), ``p_value`` (paired two-sided t-test over queries),
        ``p_value_holm`` (Holm-corrected over all rows) (float64; both NaN with a single
        query, where no test is possible) and ``significant`` (bool: ``p_value_holm < 0.05``).
    missing_relevant : tuple of int
        Relevant ids that name no memory here (forgotten, or a typo): no search can return
        them, so they count as not found.
    """

    summary: pd.DataFrame
    per_query: pd.DataFrame
    significance: pd.DataFrame
    missing_relevant: tuple[int, ...] = ()


def _strategies(strategies: Any) -> list[str]:
    """Known strategy names, each once, in the order given."""
    if isinstance(strategies, str):
        strategies = [strategies]
    try:
        names = list(dict.fromkeys(strategies))
    except TypeError:  # not iterable, or holding lists
        raise ValidationError(f"must be a list of names from {SEARCH_STRATEGIES}, got "
                              f"{strategies!r:.60}", field="strategies") from None
    unknown = [name for name in names if name not in SEARCH_STRATEGIES]
    if unknown or not names:
        said = f"unknown strategies {unknown}" if unknown else "names no strategy"
        raise ValidationError(f"{said}; use {SEARCH_STRATEGIES}", field="strategies")
    return names


def _metric_names(k: int) -> dict[str, Any]:
    cutoffs = sorted({c for c in (1, 5, k) if c <= k})
    names = {f"recall_at_{c}": ir_measures.R @ c for c in cutoffs}
    names[f"mrr_at_{k}"] = ir_measures.RR @ k
    names[f"ndcg_at_{k}"] = ir_measures.nDCG @ k
    return names


def _holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, at most 1); NaN stays NaN."""
    adjusted = np.full_like(p_values, np.nan)
    tested = np.flatnonzero(~np.isnan(p_values))
    order = tested[np.argsort(p_values[tested])]
    scaled = p_values[order] * (len(order) - np.arange(len(order)))
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted


def _paired_p_value(a: np.ndarray, b: np.ndarray) -> float:
    differences = a - b
    if len(differences) < 2:
        return float("nan")  # one query: no variance, so no test (not p = 0)
    if not differences.any():
        return 1.0  # identical on every query
    if np.ptp(differences) == 0:
        return 0.0  # the same non-zero difference on every query
    from scipy import stats  # here, not with the module: about a second of every import

    return float(stats.ttest_rel(a, b).pvalue)


def _significance(per_query: pd.DataFrame, strategies: Sequence[str],
                  metrics: Sequence[str]) -> pd.DataFrame:
    rows = []
    for metric in metrics:
        table = per_query.pivot(index="query_id", columns="strategy", values=metric)
        for a, b in itertools.combinations(strategies, 2):
            x, y = table[a].to_numpy(), table[b].to_numpy()
            rows.append({"strategy_a": a, "strategy_b": b, "metric": metric,
                         "mean_a": float(x.mean()), "mean_b": float(y.mean()),
                         "difference": float(x.mean() - y.mean()),
                         "p_value": _paired_p_value(x, y)})
    frame = pd.DataFrame(rows, columns=["strategy_a", "strategy_b", "metric", "mean_a",
                                        "mean_b", "difference", "p_value"])
    frame["p_value_holm"] = _holm(frame["p_value"].to_numpy(dtype=float))
    frame["significant"] = frame["p_value_holm"] < 0.05
    return frame.astype({"strategy_a": "string", "strategy_b": "string", "metric": "string",
                         "p_value_holm": "float64", "significant": "bool"})


def evaluate_retrieval(store: LongTermMemory, queries: pd.DataFrame, *,
                       strategies: Sequence[str] = EVALUATED_STRATEGIES, k: int = 10,
                       embedding_service: Any = None, repeats: int = 1) -> RetrievalEvaluation:
    """Run labelled queries through each search strategy: quality, latency, per query.

    Parameters
    ----------
    store : LongTermMemory
    queries : pandas.DataFrame
        ``query`` (str), ``relevant`` (a node id, a list of node ids, or a mapping of node id
        to an integer grade from -1000 to 1000 for graded relevance, where grades of 0 or less
        count as not relevant; JSON text of those is accepted) and
        optionally ``vector`` (the query's embedding, from the model of the stored vectors).
    strategies : sequence of str
        Names from :data:`SEARCH_STRATEGIES` (see :meth:`LongTermMemory.search_by_strategy`).
    k : int
        Results per search and the cutoff of the metrics, 1 to 1000.
    embedding_service : object with ``embed``, optional
        Embeds the queries that have no ``vector``, for the strategies that need one.
    repeats : int
        Times each query is timed per strategy, 1 to 100 (the quality is the same each
        time: the first run's results are scored).

    Returns
    -------
    RetrievalEvaluation
        ``summary``, ``per_query`` and ``significance`` frames (see the class).

    Raises
    ------
    ValidationError
        Unknown strategies, missing columns, bad ids or vectors, or a strategy that needs
        vectors with neither vectors nor ``embedding_service``.
    """
    store = live_store(store)
    k = validate_positive_int(k, field="k", maximum=1000)
    repeats = validate_positive_int(repeats, field="repeats", maximum=100)
    if not isinstance(queries, pd.DataFrame) or not {"query", "relevant"} <= set(queries):
        raise ValidationError("must be a DataFrame with 'query' and 'relevant' columns",
                              field="queries")
    if queries.columns.duplicated().any():  # queries["query"] would be a frame
        raise ValidationError("names a column twice", field="queries")
    if not len(queries):
        raise ValidationError("holds no queries", field="queries")
    strategies = _strategies(strategies)
    texts = query_texts(queries["query"])
    qrels = [ir_measures.Qrel(str(i), node, grade)
             for i, value in enumerate(queries["relevant"])
             for node, grade in relevance(value, i).items()]
    relevant = {(q.query_id, q.doc_id) for q in qrels if q.relevance > 0}
    labelled = sorted({int(q.doc_id) for q in qrels})
    # Relevant, but no search can return them: they count as not found; said, not hidden.
    missing = sorted(set(labelled) - store.existing_node_ids(labelled))
    vectors = query_vectors(queries)
    if any(v is None for v in vectors) and embedding_service is None \
            and VECTOR_STRATEGIES & set(strategies):
        raise ValidationError(f"{sorted(VECTOR_STRATEGIES & set(strategies))} need a vector for "
                              "every query: add a 'vector' column or pass embedding_service",
                              field="vector")
    metrics = _metric_names(k)
    rows: list[dict[str, Any]] = []
    runs: dict[str, np.ndarray] = {}  # per strategy: milliseconds, (repeats, queries)
    for strategy in strategies:
        def search(position: int, strategy: str = strategy) -> list[dict[str, Any]]:
            return store.search_by_strategy(
                strategy, query=texts[position], limit=k, embedding=vectors[position],
                embedding_service=embedding_service)

        search(0)  # warm up the connection and the plan; not timed
        run, found = [], []
        milliseconds = runs[strategy] = np.zeros((repeats, len(texts)))
        for repeat in range(repeats):
            for position in range(len(texts)):
                store.clear_cache()  # time the search, not the cache
                started = time.perf_counter()
                results = search(position)
                milliseconds[repeat, position] = (time.perf_counter() - started) * 1000
                if repeat:
                    continue
                ids = [str(r["id"]) for r in results]
                found.append(ids)
                # Distinct descending scores keep the store's order (trec_eval sorts by score).
                run += [ir_measures.ScoredDoc(str(position), node, float(len(ids) - rank))
                        for rank, node in enumerate(ids)]
        timings = np.median(milliseconds, axis=0)
        values: dict[tuple[str, str], float] = {
            (m.query_id, str(m.measure)): m.value
            for m in ir_measures.iter_calc(list(metrics.values()), qrels, run)}
        for position, ids in enumerate(found):
            qid = str(position)
            first = next((rank for rank, node in enumerate(ids, 1)
                          if (qid, node) in relevant), None)
            row = {"query_id": position, "query": texts[position], "strategy": strategy,
                   "first_relevant_rank": first, "returned": len(ids)}
            # Queries without results are absent from trec_eval's output: they score 0.
            row.update({name: values.get((qid, str(measure)), 0.0)
                        for name, measure in metrics.items()})
            row["latency_ms"] = timings[position]
            row["retrieved"] = [int(node) for node in ids]
            rows.append(row)
    per_query = pd.DataFrame(rows).astype(
        {"query_id": "int64", "query": "string", "strategy": "string",
         "first_relevant_rank": "Int64", "returned": "int64", "latency_ms": "float64",
         **dict.fromkeys(metrics, "float64")})
    grouped = per_query.groupby("strategy", sort=False)
    summary = grouped[list(metrics)].mean()
    summary["no_result"] = grouped["returned"].apply(lambda r: float((r == 0).mean()))
    summary["latency_p50_ms"] = [float(np.percentile(runs[name], 50)) for name in summary.index]
    summary["latency_p95_ms"] = [float(np.percentile(runs[name], 95)) for name in summary.index]
    summary["latency_p50_spread_ms"] = [float(np.ptp(np.median(runs[name], axis=1)))
                                        for name in summary.index]
    summary = summary.reset_index().assign(queries=len(texts), k=k, repeats=repeats).astype(
        {"strategy": "string", "queries": "int64", "k": "int64", "repeats": "int64"})
    significance = _significance(per_query, strategies,
                                 [f"mrr_at_{k}", f"recall_at_{k}"])
    return RetrievalEvaluation(summary=summary, per_query=per_query,
                               significance=significance, missing_relevant=tuple(missing))


@checked_plot
def plot_retrieval(df: pd.DataFrame, *, ax: Any = None, **kwargs: Any) -> Any:
    """Quality against latency: one point per strategy from the ``summary`` of
    :func:`evaluate_retrieval`, MRR@k (y) against p50 latency (x, log scale), with a
    horizontal line from p50 to p95 and recall@k in the label. Returns the Axes."""
    ax = axes_or_new(ax, (7, 4))
    k = int(df["k"].iloc[0])
    for row in df.to_dict("records"):
        mrr = row[f"mrr_at_{k}"]
        ax.plot([row["latency_p50_ms"], row["latency_p95_ms"]], [mrr, mrr], color="0.7", lw=1)
        ax.scatter([row["latency_p50_ms"]], [mrr], zorder=3, **kwargs)
        ax.annotate(f"{row['strategy']} (R@{k} {row[f'recall_at_{k}']:.2f})",
                    (row["latency_p50_ms"], mrr), textcoords="offset points", xytext=(5, 4),
                    fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("latency per query, ms (dot p50, line to p95)")
    ax.set_ylabel(f"MRR@{k}")
    ax.set_ylim(*fraction_limits(df[f"mrr_at_{k}"]))
    ax.set_title("Search quality against latency")
    return ax


def retrieval_quality(store: LongTermMemory, queries: Sequence[str], query_vectors: np.ndarray,
                      relevant: Sequence[int], *, k: int = 10,
                      strategies: Sequence[str] = ("vector", "fulltext", "hybrid", "rrf",
                                                   "vector_bm25"),
                      repeats: int = 2) -> pd.DataFrame:
    """Recall@k, MRR and latency of each strategy on queries with one known right answer.

    A shorter form of :func:`evaluate_retrieval` for one relevant memory per query, each
    query timed ``repeats`` times.

    Returns
    -------
    pandas.DataFrame
        One row per strategy: ``strategy`` (string), ``recall_at_k``, ``mrr`` (MRR@k),
        ``no_result``, ``latency_p50_ms``, ``latency_p95_ms``, ``latency_p50_spread_ms``
        (float64: see :func:`evaluate_retrieval`), ``queries``, ``k``, ``repeats`` (int64).
    """
    store = live_store(store)
    queries = validate_list(queries, field="queries")
    relevant = [validate_id(r, field="relevant")
                for r in validate_list(relevant, field="relevant")]
    vectors = real_matrix(query_vectors, field="query_vectors").astype(np.float32)
    if len(queries) != len(vectors) or len(queries) != len(relevant):
        raise ValidationError("queries, query_vectors and relevant must have the same length",
                              field="queries")
    frame = pd.DataFrame({"query": pd.Series(list(queries), dtype=object),  # not pyarrow's
                          "relevant": [int(r) for r in relevant], "vector": list(vectors)})
    summary = evaluate_retrieval(store, frame, strategies=strategies, k=k,
                                 repeats=repeats).summary
    return summary.rename(columns={f"recall_at_{k}": "recall_at_k", f"mrr_at_{k}": "mrr"})[
        ["strategy", "recall_at_k", "mrr", "no_result", "latency_p50_ms", "latency_p95_ms",
         "latency_p50_spread_ms", "queries", "k", "repeats"]]


@checked_plot
def plot_retrieval_quality(df: pd.DataFrame, *, ax: Any = None, **kwargs: Any) -> Any:
    """Bars of recall@k and MRR per strategy from :func:`retrieval_quality`, with the median
    latency of each strategy beside them (points, right axis, log scale, labelled with the
    spread of the median over the repeats) when measured. Returns the Axes of the bars."""
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
        spreads = df["latency_p50_spread_ms"] if "latency_p50_spread_ms" in df else \
            pd.Series(np.nan, index=df.index)
        for x, value, spread in zip(positions, df["latency_p50_ms"], spreads):
            label = f"{value:.1f} ms" if pd.isna(spread) else \
                f"{value:.1f} ms (spread {spread:.1f})"
            latency.annotate(label, (x, value), xytext=(14, 0),
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
