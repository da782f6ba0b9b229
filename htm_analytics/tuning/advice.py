"""Tuning advice: the smallest ``ef_search`` reaching a target recall, and how it holds up
under concurrent clients."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._plotting import axes_or_new, checked_plot
from ..errors import ValidationError
from ..store import LongTermMemory, live_store
from ..validation import (
    validate_frame,
    validate_number,
    validate_positive_int,
    validate_settings,
)
from ._ground_truth import stable_sample
from ._inputs import validate_seed
from .benchmark import DEFAULT_EF_SEARCH_SWEEP, _dimension, _validate_sweep, benchmark_recall

__all__ = ["EfSearchAdvice", "recommend_ef_search", "concurrency_sweep",
           "describe_concurrency", "plot_concurrency", "compare_latency"]

DEFAULT_THREADS = (1, 2, 4, 8)


@dataclass
class EfSearchAdvice:
    """The result of :func:`recommend_ef_search`.

    Attributes
    ----------
    ef_search : int or None
        The smallest swept setting whose mean recall reaches the target; None if none did.
    target_recall : float
    k : int
    recall, latency_p50_ms : float
        Measured at that setting (NaN when none reached the target).
    index, database : str
        The index swept and the database it lives in.
    evidence : str
        One sentence: what was measured and how.
    sweep : pandas.DataFrame
        The :func:`~htm_analytics.benchmark_recall` result behind it.
    """

    ef_search: int | None
    target_recall: float
    k: int
    recall: float
    latency_p50_ms: float
    index: str
    database: str
    evidence: str
    sweep: pd.DataFrame = field(repr=False)


def compare_latency(sweep: pd.DataFrame, ef_search: int, other: int) -> str:
    """One sentence comparing the speed of two swept ``ef_search`` settings of a
    :func:`~htm_analytics.benchmark_recall` result.

    One setting is called faster only when its p50 latency is lower by more than the two
    settings' spreads over repeats together, when it ran at least two repeats (one run has no
    spread to judge the noise by), and when its QPS (where the sweep has it: the table beside
    the sentence shows it) is not lower: p50 and QPS pointing opposite ways on a noisy run is
    noise, not a conclusion.

    >>> sweep = pd.DataFrame({"ef_search": [20, 40], "latency_p50_ms": [0.60, 0.80],
    ...     "latency_p50_spread_ms": [0.05, 0.05], "qps": [900.0, 1000.0],
    ...     "repeats": [2, 2]})
    >>> print(compare_latency(sweep, 20, 40))  # doctest: +NORMALIZE_WHITESPACE
    ef_search 20 has the lower p50 (0.60 against 0.80 ms) but 40 the higher QPS (1,000
    against 900): the two measures disagree, so neither is faster beyond the noise of 2
    repeats.
    """
    first = sweep.drop_duplicates("ef_search")
    this = first[first["ef_search"] == ef_search].iloc[0]
    that = first[first["ef_search"] == other].iloc[0]
    gap = float(that["latency_p50_ms"] - this["latency_p50_ms"])  # > 0: ef_search faster
    noise = float(this["latency_p50_spread_ms"] + that["latency_p50_spread_ms"])
    repeats = int(this["repeats"])
    runs = f"{repeats} repeat{'s' if repeats != 1 else ''}"
    if repeats < 2:
        return (f"ef_search {ef_search} and {other} differ by {abs(gap):.2f} ms at p50 in "
                "one run: with one repeat the noise was not measured, so neither is called "
                "faster.")
    if abs(gap) <= noise:
        return (f"ef_search {ef_search} and {other} differ by {abs(gap):.2f} ms at p50, "
                f"within the noise of {runs} (their medians spread over {noise:.2f} ms "
                "together).")
    lower, higher = (this, that) if gap > 0 else (that, this)
    if "qps" in first and float(lower["qps"]) < float(higher["qps"]):
        return (f"ef_search {int(lower['ef_search'])} has the lower p50 "
                f"({float(lower['latency_p50_ms']):.2f} against "
                f"{float(higher['latency_p50_ms']):.2f} ms) but {int(higher['ef_search'])} the "
                f"higher QPS ({float(higher['qps']):,.0f} against {float(lower['qps']):,.0f}): "
                f"the two measures disagree, so neither is faster beyond the noise of {runs}.")
    places = 2  # enough decimals that the gap shows larger than the spread it beats
    while places < 6 and f"{abs(gap):.{places}f}" == f"{noise:.{places}f}":
        places += 1
    return (f"ef_search {ef_search} is {abs(gap):.{places}f} ms "
            f"{'faster' if gap > 0 else 'slower'} at p50 than {other}, beyond the "
            f"{noise:.{places}f} ms the {runs} spread over.")


def recommend_ef_search(store: LongTermMemory, target_recall: float = 0.95, k: int = 10, *,
                        queries: int = 200, repeats: int = 2,
                        ef_search: Sequence[int] = DEFAULT_EF_SEARCH_SWEEP, seed: int = 0,
                        progress: bool = False) -> EfSearchAdvice:
    """The smallest ``hnsw.ef_search`` whose recall@k reaches ``target_recall``.

    Runs :func:`~htm_analytics.benchmark_recall` on ``queries`` held-out stored vectors (exact
    ground truth) over the ``ef_search`` values and picks the smallest meeting the target on
    average.

    Parameters
    ----------
    store : LongTermMemory
    target_recall : float
        Between 0 and 1.
    k : int
        Neighbours per query.
    queries : int
        Held-out stored vectors to search (a count, at most the vectors stored).
    repeats, ef_search, seed, progress
        Passed to :func:`~htm_analytics.benchmark_recall` (``ef_search``: a non-empty sweep).

    Returns
    -------
    EfSearchAdvice

    Raises
    ------
    ValidationError
        Naming the argument, before anything is measured; or ``queries`` when no query has
        another vector to find (see :func:`~htm_analytics.benchmark_recall`).
    """
    _require_store(store)
    target_recall = validate_number(target_recall, field="target_recall", minimum=0,
                                    exclusive=True, maximum=1)
    # Everything checked before the sweep reads a vector: held-out queries are a count.
    k, _, repeats = _validate_sweep(k, ef_search, repeats)
    queries = validate_positive_int(queries, field="queries")
    validate_seed(seed)
    sweep = benchmark_recall(store, queries=queries, k=k, ef_search=ef_search,
                             repeats=repeats, seed=seed, progress=progress)
    if sweep.empty:  # interrupted before the first setting finished: nothing to advise on
        raise KeyboardInterrupt("ef_search sweep interrupted before any setting finished")
    sweep = sweep.sort_values("ef_search").reset_index(drop=True)
    reached = sweep[sweep["recall_mean"] >= target_recall]
    first = sweep.iloc[0]
    how = (f"{int(first['queries'])} held-out stored vectors x {repeats} repeats, k={k}, "
           f"ef_search {', '.join(str(v) for v in sweep['ef_search'])} on {first['index']} "
           f"({int(first['rows']):,} vectors of {int(first['dimension'])} dimensions), recall "
           "against an exact ground truth (every stored vector read once)")
    database = str(store.server_info["database"])
    if reached.empty:
        best = sweep.iloc[int(sweep["recall_mean"].to_numpy().argmax())]
        return EfSearchAdvice(None, float(target_recall), k, float("nan"), float("nan"),
                              str(first["index"]), database,
                              f"no ef_search reached recall {target_recall:g} (best "
                              f"{best['recall_mean']:.3f} at {int(best['ef_search'])}); {how}",
                              sweep)
    chosen = reached.iloc[0]
    return EfSearchAdvice(int(chosen["ef_search"]), float(target_recall), k,
                          float(chosen["recall_mean"]), float(chosen["latency_p50_ms"]),
                          str(first["index"]), database,
                          f"ef_search {int(chosen['ef_search'])} is the smallest reaching "
                          f"recall@{k} {target_recall:g} (measured {chosen['recall_mean']:.3f},"
                          f" 95% interval over the queries {chosen['recall_low']:.3f}-"
                          f"{chosen['recall_high']:.3f}, p50 {chosen['latency_p50_ms']:.2f} ms,"
                          f" spread {chosen['latency_p50_spread_ms']:.2f} ms over {repeats} "
                          f"repeats); {how}", sweep)


def concurrency_sweep(store: LongTermMemory, *, ef_search: int, k: int = 10,
                      threads: int | Sequence[int] = DEFAULT_THREADS, queries: int = 200,
                      repeats: int = 3, seed: int = 0) -> pd.DataFrame:
    """Throughput and latency of vector searches at one ``ef_search`` under concurrent clients.

    For each thread count, that many threads each take their own connection from the store's
    pool (grown to fit, :meth:`~htm_analytics.LongTermMemory.ensure_pool_size`), wait for each
    other, then run their share of ``queries`` held-out stored vectors through the live HNSW
    index; this run is repeated ``repeats`` times. QPS is all queries over the wall time of
    the runs; latency is per query, as each client saw it; the spreads say how far the runs
    disagree, so a difference between thread counts smaller than their spreads together is
    noise.

    Parameters
    ----------
    store : LongTermMemory
    ef_search, k : int
        The search depth (1 to 1000) and neighbours per search (1 to 1000).
    threads : int or sequence of int
        Client thread counts to run, each 1 to 64 (one int: that count alone).
    queries, repeats, seed : int
        Held-out stored vectors searched per run, runs per thread count (1 to 100), and
        which vectors (as :func:`~htm_analytics.benchmark_recall` picks them).

    Returns
    -------
    pandas.DataFrame
        One row per thread count: ``threads``, ``ef_search``, ``k``, ``queries`` (int64:
        searches run in all), ``repeats`` (int64), ``qps``, ``latency_p50_ms``,
        ``latency_p95_ms``, ``qps_spread`` and ``latency_p50_spread_ms`` (float64: the
        range, max - min, of the runs' QPS and median latency; 0 with one repeat),
        ``speedup`` (float64: QPS over the first row's).
    """
    store = live_store(store)
    _require_store(store)
    ef_search = validate_positive_int(ef_search, field="ef_search", maximum=1000)
    k = validate_positive_int(k, field="k", maximum=1000)
    queries = validate_positive_int(queries, field="queries")
    repeats = validate_positive_int(repeats, field="repeats", maximum=100)
    counts = validate_settings(threads, field="threads", maximum=64)
    seed = validate_seed(seed)
    store.ensure_pool_size(max(counts))
    with store.tuning_session() as session:  # the chosen vectors only, fetched by id
        dimension = _dimension(session, None)
        ids = session.stored_ids(dimension)
        if queries > len(ids):
            raise ValidationError(f"asked for {queries} queries but only {len(ids)} vectors "
                                  "are stored", field="queries")
        picked = stable_sample(ids, queries, seed)
        fetched, vectors = session.stored_vectors(dimension, ids=np.sort(picked))
    chosen = vectors[np.searchsorted(fetched, picked)]
    rows = []
    for count in counts:
        runs = [_run_clients(store, chosen, count, dimension=dimension, k=k,
                             ef_search=ef_search) for _ in range(repeats)]
        milliseconds = np.concatenate([seconds for seconds, _ in runs]) * 1000.0
        run_qps = np.array([len(seconds) / wall for seconds, wall in runs])
        run_p50 = np.array([np.median(seconds) * 1000.0 for seconds, _ in runs])
        rows.append({"threads": count, "ef_search": ef_search, "k": k,
                     "queries": len(milliseconds), "repeats": repeats,
                     "qps": len(milliseconds) / sum(wall for _, wall in runs),
                     "latency_p50_ms": float(np.percentile(milliseconds, 50)),
                     "latency_p95_ms": float(np.percentile(milliseconds, 95)),
                     "qps_spread": float(np.ptp(run_qps)),
                     "latency_p50_spread_ms": float(np.ptp(run_p50))})
    frame = pd.DataFrame(rows)
    frame["speedup"] = frame["qps"] / frame["qps"].iloc[0]
    return frame.astype({"threads": "int64", "ef_search": "int64", "k": "int64",
                         "queries": "int64", "repeats": "int64", "qps": "float64",
                         "latency_p50_ms": "float64", "latency_p95_ms": "float64",
                         "qps_spread": "float64", "latency_p50_spread_ms": "float64",
                         "speedup": "float64"})


_CONCURRENCY_COLUMNS = ("threads", "qps", "qps_spread", "repeats", "speedup", "latency_p95_ms")


def describe_concurrency(df: pd.DataFrame) -> str:
    """One sentence on a :func:`concurrency_sweep` result: throughput with one client, the
    best and with how many threads, each with its spread over the repeats, and whether the
    gain is beyond that noise (the report and the notebooks print this one text). A gain is
    claimed only when it exceeds the two spreads together over at least two repeats.

    >>> print(describe_concurrency(pd.DataFrame({"threads": [1, 2], "qps": [100.0, 180.0],
    ...     "qps_spread": [4.0, 6.0], "repeats": [3, 3], "speedup": [1.0, 1.8],
    ...     "latency_p95_ms": [12.0, 15.5]})))  # doctest: +NORMALIZE_WHITESPACE
    100 queries/s with one client thread (spread 4), at most 180 with 2 threads (1.8x,
    spread 6; beyond the noise of 3 repeats), p95 15.50 ms there.

    Raises
    ------
    ValidationError
        Naming ``df`` when it is no DataFrame, lacks one of the columns read (``threads``,
        ``qps``, ``qps_spread``, ``repeats``, ``speedup``, ``latency_p95_ms``) or is empty.
    """
    validate_frame(df, _CONCURRENCY_COLUMNS, field="df")
    if not len(df):
        raise ValidationError("holds no thread count to describe", field="df")
    repeats = int(df["repeats"].iloc[0])
    runs = f"{repeats} repeat{'s' if repeats != 1 else ''}"
    one = df.loc[df["threads"] == 1]
    best = df.iloc[int(df["qps"].to_numpy().argmax())]
    if not len(one):
        return (f"at most {float(best['qps']):,.0f} queries/s (spread "
                f"{float(best['qps_spread']):,.0f} over {runs}) with {int(best['threads'])} "
                "threads.")
    first = one.iloc[0]
    baseline = (f"{float(first['qps']):,.0f} queries/s with one client thread (spread "
                f"{float(first['qps_spread']):,.0f})")
    gap = float(best["qps"] - first["qps"])
    noise = float(best["qps_spread"] + first["qps_spread"])
    if repeats < 2 and int(best["threads"]) > 1:
        return (f"{baseline}, at most {float(best['qps']):,.0f} with {int(best['threads'])} "
                f"threads ({float(best['speedup']):.1f}x) in one run: with one repeat the "
                "noise was not measured, so no gain is claimed; p95 "
                f"{float(first['latency_p95_ms']):.2f} ms with one thread.")
    if int(best["threads"]) == 1 or gap <= noise:
        within = "" if int(best["threads"]) == 1 else (
            f" (at most {float(best['qps']):,.0f} with {int(best['threads'])} threads, "
            f"within the noise of {runs})")
        return (f"{baseline}; more threads did not add throughput{within}; p95 "
                f"{float(first['latency_p95_ms']):.2f} ms with one thread.")
    return (f"{baseline}, at most {float(best['qps']):,.0f} with {int(best['threads'])} "
            f"threads ({float(best['speedup']):.1f}x, spread {float(best['qps_spread']):,.0f}; "
            f"beyond the noise of {runs}), p95 {float(best['latency_p95_ms']):.2f} ms there.")


def _require_store(store: Any) -> None:
    if not isinstance(store, LongTermMemory):
        raise ValidationError("needs a live LongTermMemory", field="store")


def _run_clients(store: LongTermMemory, queries: np.ndarray, count: int, *, dimension: int,
                 k: int, ef_search: int) -> tuple[np.ndarray, float]:
    """Per-query seconds of every client, and the wall time from the common start."""
    shares = np.array_split(queries, count)
    results: list[np.ndarray | None] = [None] * count
    errors: list[BaseException] = []
    ready = threading.Barrier(count + 1)

    def client(position: int) -> None:
        try:
            with store.tuning_session() as session:
                ready.wait()
                run = session.knn(shares[position], dimension=dimension, k=k,
                                  ef_search=ef_search)
                results[position] = run["seconds"].ravel()
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)
            ready.abort()

    workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(count)]
    for worker in workers:
        worker.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a worker failed to start
        ready.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    return np.concatenate([r for r in results if r is not None]), wall


@checked_plot
def plot_concurrency(df: pd.DataFrame, *, ax: Any = None) -> Any:
    """QPS (bars, with a whisker as long as the spread over the repeats) and p95 latency
    (line, right axis) per number of client threads.

    Parameters
    ----------
    df : pandas.DataFrame
        A result of :func:`concurrency_sweep`.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        The QPS axes (the latency axes is its twin).
    """
    ax = axes_or_new(ax, (6, 3.2))
    labels = df["threads"].astype(str)
    repeats = int(df["repeats"].iloc[0]) if len(df) else 0
    ax.bar(labels, df["qps"], color="#4c72b0", label="queries per second")
    ax.errorbar(labels, df["qps"], yerr=df["qps_spread"] / 2, fmt="none", ecolor="black",
                capsize=4, label=f"QPS spread over {repeats} repeats")
    ax.set_xlabel("client threads")
    ax.set_ylabel("queries per second")
    latency = ax.twinx()
    latency.plot(labels, df["latency_p95_ms"], color="#c44e52", marker="o",
                 label="p95 latency")
    latency.set_ylabel("p95 latency (ms)")
    latency.set_ylim(bottom=0)
    ef = int(df["ef_search"].iloc[0]) if len(df) else 0
    ax.set_title(f"Concurrent searches at ef_search {ef}: throughput and p95 latency")
    handles = ax.get_legend_handles_labels()
    twin = latency.get_legend_handles_labels()
    ax.legend(handles[0] + twin[0], handles[1] + twin[1], loc="upper left", fontsize="small")
    return ax
