"""Tuning experiments: recall and latency of HNSW ``ef_search`` settings, and index builds.

Recall is measured against an exact ground truth computed from every stored vector: recall@k
of a query is the share of its true nearest neighbours found, ``|returned & truth| /
|truth|``, the truth being the ``min(k, available)`` nearest vectors in scope (as
ann-benchmarks and pgvector's tests define it), and a hit is counted as ann-benchmarks counts
it: a returned row whose true distance is within the truth's farthest plus 1e-3.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._progress import progress_bar
from ..errors import ValidationError
from ..store import LongTermMemory, TuningSession, live_store, write_parquet
from ..store.file_paths import output_path, writing
from ..store.table_recall import DEFAULT_EF_SEARCH_SWEEP, benchmark_table_recall
from ..validation import validate_flag, validate_positive_int, validate_settings
from ._ground_truth import exact_neighbors, recall_at_k, streamed_neighbor_distances, unit_rows
from ._ground_truth import mean_interval as _mean_interval
from ._inputs import (
    check_queries,
    filter_list,
    iterative_modes,
    resolve_queries,
    validate_dimension,
    validate_seed,
)
from .plots import plot_recall_by_ef, plot_recall_latency

__all__ = [
    "DEFAULT_EF_SEARCH_SWEEP", "benchmark_recall", "benchmark_index_build", "exact_neighbors",
    "plot_recall_latency", "plot_recall_by_ef",
]

_recall = recall_at_k  # the name sampled_recall and older callers import


def _filter_label(filters: Mapping[str, Any] | None) -> str:
    if not filters:
        return "none"
    parts = []
    for name, value in filters.items():
        if name == "timeframe" and value is not None:
            start, end = value
            value = f"{pd.Timestamp(start).date()}..{pd.Timestamp(end).date()}"
        parts.append(f"{name}={value}")
    return ",".join(parts)


def _sweep(session: TuningSession, *, queries: np.ndarray, own_ids: np.ndarray,
           dimension: int, k: int, ef_values: Sequence[int], iterative_modes: list[Any],
           filters: Mapping[str, Any] | None, rows: int,
           target: str, repeats: int, progress: Any,
           exact: bool = False, force_index: bool = False) -> Iterator[dict[str, Any]]:
    """Yield one result row per (iterative scan, ef_search) as soon as it is measured.

    The exact ground truth streams the ``rows`` vectors in scope in batches; the vectors the
    searches return are fetched by id: the table is never held in memory.
    """
    scope = "copy" if target == "copy" else "live"
    truth_distance = streamed_neighbor_distances(
        queries, session.vector_batches(dimension, target=scope, filters=filters), k, own_ids)
    if not np.isfinite(truth_distance).any():  # every recall would be undefined
        raise ValidationError(f"no query has any other vector of {dimension} dimensions in "
                              f"scope ({_filter_label(filters)}) to find: recall@k is "
                              "undefined", field="queries")
    unit_queries = unit_rows(queries).astype(np.float64)

    def fetch(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return session.stored_vectors(dimension, target=scope, filters=filters, ids=ids)

    # One more row when a query is itself stored: it finds itself, and that hit is dropped.
    asked = k + 1 if (own_ids >= 0).any() else k
    for mode in iterative_modes:
        for ef in ef_values:
            run = session.knn(queries, dimension=dimension, k=asked, ef_search=ef,
                              iterative_scan=mode, filters=filters, target=target,
                              repeats=repeats, progress=progress, exact=exact,
                              force_index=force_index)
            recall, returned, outside = recall_at_k(run["ids"], own_ids, truth_distance,
                                                    unit_queries, fetch, k)
            scored = recall[~np.isnan(recall)]  # a query with no true neighbour has none
            milliseconds = run["seconds"].ravel() * 1000.0
            per_repeat = run["seconds"] * 1000.0  # (repeats, queries)
            yield {
                "filter": _filter_label(filters), "iterative_scan": mode or "off",
                "ef_search": ef, "k": k,
                "recall_mean": float(scored.mean()) if len(scored) else float("nan"),
                "recall_p5": float(np.percentile(scored, 5)) if len(scored) else float("nan"),
                **_mean_interval(scored),
                "latency_p50_ms": float(np.percentile(milliseconds, 50)),
                "latency_p95_ms": float(np.percentile(milliseconds, 95)),
                "latency_p99_ms": float(np.percentile(milliseconds, 99)),
                "qps": float(len(milliseconds) / (milliseconds.sum() / 1000.0)),
                # How far repeats of the same queries disagree: a difference between two
                # settings within these is noise.
                "latency_p50_spread_ms": float(np.ptp(np.median(per_repeat, axis=1))),
                "qps_spread": float(np.ptp(per_repeat.shape[1] / (per_repeat.sum(axis=1)
                                                                  / 1000.0))),
                "returned_mean": float(returned.mean()),
                "outside_scope": outside,
                "ef_below_k": ef < asked and mode is None and not exact,
                "queries": len(queries), "rows": rows,
                "index": "(exact scan)" if exact else run["index"],
                "used_index": run["used_index"], "force_index": force_index,
            }


@dataclass
class _Run:
    update: Any = None         # the progress bar's update, or None
    interrupted: bool = False


@contextmanager
def _interruptible(progress: bool, total: int, description: str, what: str) -> Iterator[_Run]:
    """A progress bar around a measurement loop; Ctrl-C ends the loop, keeping its results."""
    with progress_bar(bool(progress), total, description, "query") as bar:
        run = _Run(update=bar.update if bar.shown else None)
        try:
            yield run
        except KeyboardInterrupt:
            run.interrupted = True
            warnings.warn(f"benchmark interrupted: returning the {what} finished so far",
                          RuntimeWarning, stacklevel=3)


def _finish(rows: list[dict[str, Any]], store: LongTermMemory, repeats: int,
            interrupted: bool, output: Path | None,
            extra: Mapping[str, Any]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    if len(frame):
        for name, value in extra.items():
            frame[name] = value
        frame["repeats"] = repeats
        frame["postgresql"] = store.server_info["server_version"]
        frame["pgvector"] = store.server_info["pgvector_version"]
    frame = frame.astype({c: t for c, t in _RESULT_DTYPES.items() if c in frame})
    frame.attrs["interrupted"] = interrupted
    if output is not None:
        _write(frame, output)
    return frame


_RESULT_DTYPES = {
    "variant": "string", "filter": "string", "iterative_scan": "string", "ef_search": "int64",
    "k": "int64", "recall_mean": "float64", "recall_p5": "float64",
    "recall_low": "float64", "recall_high": "float64",
    "latency_p50_ms": "float64", "latency_p95_ms": "float64", "latency_p99_ms": "float64",
    "qps": "float64", "latency_p50_spread_ms": "float64", "qps_spread": "float64",
    "returned_mean": "float64", "outside_scope": "int64",
    "ef_below_k": "bool", "queries": "int64", "rows": "int64", "index": "string",
    "used_index": "bool", "force_index": "bool", "m": "int64", "ef_construction": "int64",
    "dimension": "int64",
    "build_seconds": "float64", "index_bytes": "int64", "maintenance_work_mem": "string",
    "max_parallel_maintenance_workers": "int64",
    "repeats": "int64", "postgresql": "string", "pgvector": "string",
}


def _output(output: str | os.PathLike[str] | None) -> Path | None:
    """Where the results go, checked before the sweep (which may take minutes)."""
    return None if output is None else output_path(output, field="output",
                                                   suffixes=(".csv", ".parquet"))


def _write(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` to ``path`` (checked by :func:`_output` before the sweep)."""
    with writing(path, field="output"):
        if path.suffix.lower() == ".parquet":
            write_parquet(frame, path)
        else:
            frame.to_csv(path, index=False)


def _dimension(session: TuningSession, dimension: Any) -> int:
    dimension = validate_dimension(dimension)
    counts = session.vector_dimensions()
    if not counts:
        raise ValidationError("no stored embeddings to benchmark", field="dimension")
    if dimension is None:
        return max(counts, key=lambda d: (counts[d], d))
    if dimension not in counts:
        raise ValidationError(f"no stored embeddings of dimension {dimension}; stored: "
                              f"{sorted(counts)}", field="dimension")
    return dimension


def _validate_sweep(k: Any, ef_search: Any, repeats: Any) -> tuple[int, list[int], int]:
    k = validate_positive_int(k, field="k", maximum=1000)
    ef_values = validate_settings(ef_search, field="ef_search", maximum=1000)
    repeats = validate_positive_int(repeats, field="repeats", maximum=100)
    return k, ef_values, repeats


def benchmark_recall(store: LongTermMemory, *, queries: Any = None, k: int = 10,
                     ef_search: int | Sequence[int] = DEFAULT_EF_SEARCH_SWEEP,
                     filters: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
                     iterative_scan: str | Sequence[str | None] | None = None,
                     repeats: int = 3, dimension: int | None = None, embedder: Any = None,
                     seed: int = 0, exact: bool = False, force_index: bool = False,
                     padded_index: bool = False, progress: bool = True,
                     output: str | os.PathLike[str] | None = None, table: str | None = None,
                     column: str = "embedding", index: str | None = None,
                     probes: int | Sequence[int] | None = None) -> pd.DataFrame:
    """Recall@k and latency of the live HNSW index for each ``ef_search`` (and filter).

    Given ``table`` (and ``column``, ``index``), measures that table's HNSW or IVFFlat index
    instead, sweeping ``ef_search`` or ``probes``: see
    :func:`htm_analytics.store.table_recall.benchmark_table_recall` for that result's columns.

    The index is the one the store's searches use: the native-dimension index when
    :meth:`~htm_analytics.LongTermMemory.create_native_index` made one, else the reference
    schema's padded index. Each setting runs in its own transaction with ``SET LOCAL``, read
    back with ``SHOW``, so pooled connections never keep it.

    Recall@k of a query is the share of its true neighbours found, ``|returned & truth| /
    |truth|``, the truth being its ``min(k, available)`` nearest vectors in scope (as
    ann-benchmarks and pgvector's tests define it): with fewer than k other vectors in scope
    (a small memory, a narrow filter), finding all of them is recall 1. A query with no other
    vector in scope has no recall: it is left out of ``recall_mean``, ``recall_p5`` and the
    interval; when no query has one, :class:`~htm_analytics.ValidationError` names
    ``queries``.

    Parameters
    ----------
    store : LongTermMemory
    queries : None, int, numpy.ndarray or list of str
        None: the 500 stored vectors whose ids hash lowest with ``seed`` (adding memories
        keeps nearly all; held out: each query's own row is left out of its results and
        ground truth); an int: that many (a positive integer, not a bool); an ``(n, d)``
        array of real, finite vectors, none all zeros (its cosine distance is undefined):
        those vectors; texts: embedded with ``embedder``, which must return one such vector
        per text.
    k : int
        Neighbours per query, 1 to 1000.
    ef_search : int or sequence of int
        The settings to sweep (at least one, each 1 to 1000). Without an iterative scan
        pgvector returns at most ``ef_search`` rows, so settings below k are flagged
        (``ef_below_k``).
    filters : dict or list of dicts, optional
        Filtered searches, e.g. ``[None, {"tag": "devel"}, {"robot": "coder"},
        {"timeframe": (start, end)}]`` (None or ``{}``: unfiltered); the ground truth is then
        exact within the filter.
    iterative_scan : None, 'strict_order', 'relaxed_order' or a sequence of them
        pgvector 0.8 iterative scans, which keep scanning until enough rows pass the filter.
        Pass ``(None, "relaxed_order")`` to compare.
    repeats : int
        Times each query runs per setting (latency percentiles use all runs).
    dimension : int, optional
        Which vectors (default: the most common dimension).
    embedder : object with ``embed(texts)``, optional
        For text queries.
    seed : int
        Choice of held-out queries (the same seed picks the same memories).
    exact : bool
        Run the same queries with index scans disabled instead: the exact baseline (recall 1,
        and the latency an index saves).
    force_index : bool
        Forbid sorting, so that filtered queries walk the HNSW index even where the planner
        would rather sort the matching rows exactly (it does so for selective filters, giving
        exact results at the cost of reading them all). Shows what the index alone gives.
    padded_index : bool
        Search through the reference schema's zero-padded 2000-d index even when a native
        index exists (to compare the two).
    progress : bool
        Show a progress bar (tqdm). Interrupting (Ctrl-C, or stopping the notebook cell)
        returns the settings finished so far, with ``attrs["interrupted"]`` True.
    output : path, optional
        Also write the result to this ``.csv`` or ``.parquet`` file.
    table, column, index : str, optional
        Measure the HNSW or IVFFlat ``index`` on ``table.column`` (any pgvector table in the
        store's database) instead of the store's own; ``queries``, ``k``, ``ef_search``,
        ``repeats`` and ``seed`` apply, filters and iterative scans do not.
    probes : int or sequence of int, optional
        ``ivfflat.probes`` settings to sweep when ``table``'s index is IVFFlat; refused for
        the store's own (HNSW) index and for an HNSW ``table`` index, as ``ef_search`` is
        for an IVFFlat one (a setting that does not apply is not silently ignored).

    Returns
    -------
    pandas.DataFrame
        One row per (filter, iterative scan, ef_search):

        - ``filter``, ``iterative_scan`` (string); ``ef_search``, ``k`` (int64);
        - ``recall_mean``, ``recall_p5`` (float64): mean and 5th percentile over queries;
          ``recall_low``, ``recall_high`` (float64): the 95% interval of the mean over the
          queries (Student's t), the spread another draw of as many queries could show;
        - ``latency_p50_ms``, ``latency_p95_ms``, ``latency_p99_ms``, ``qps`` (float64):
          client-side time of one query (execute and fetch), over every repeat;
        - ``latency_p50_spread_ms``, ``qps_spread`` (float64): the range of the per-repeat
          median latency and QPS over the ``repeats`` runs (0 with one repeat): differences
          between settings smaller than these are within the noise;
        - ``returned_mean`` (float64): rows returned per query (below k: the scan ran dry);
        - ``outside_scope`` (int64): returned rows outside the filter (must be 0);
        - ``ef_below_k`` (bool); ``queries``, ``rows`` (int64: vectors in scope);
        - ``index`` (string), ``used_index`` (bool: EXPLAIN shows that index; a filtered
          query may be answered by an exact sort instead), ``force_index`` (bool), ``m``,
          ``ef_construction``, ``dimension``, ``repeats`` (int64);
        - ``postgresql``, ``pgvector`` (string): server versions.

    Raises
    ------
    ValidationError
        Naming the argument, before the store is read: a bool, float or string where a count
        or a setting belongs, an empty sweep, a filter that is no dict, query vectors that
        are empty, not real, not finite or all zeros, a setting that does not apply. Also
        ``queries`` when no query has another vector in scope to find, ``filters`` when a
        filter matches no vector.
    EmbeddingError
        The embedder failed; an :class:`~htm_analytics.errors.EmbeddingMismatchError` (a
        ValidationError naming ``embedder``) when it returned other than one usable vector per
        text.
    """
    store = live_store(store)
    output = _output(output)
    if table is not None:
        if filters is not None or iterative_scan is not None:
            raise ValidationError("applies to the store's own index, not to table=",
                                  field="filters" if filters is not None else "iterative_scan")
        frame = benchmark_table_recall(store, table=table, column=column, index=index,
                                       queries=100 if queries is None else queries, k=k,
                                       probes=probes,
                                       ef_search=None if ef_search is DEFAULT_EF_SEARCH_SWEEP
                                       else ef_search, repeats=repeats, seed=seed)
        if output is not None:
            _write(frame, output)
        return frame
    if probes is not None:
        raise ValidationError("ivfflat.probes applies to an IVFFlat index, measured with "
                              "table=; the store's own index is HNSW (sweep ef_search)",
                              field="probes")
    k, ef_values, repeats = _validate_sweep(k, ef_search, repeats)
    modes = iterative_modes(iterative_scan)
    scopes = filter_list(filters)
    dimension = validate_dimension(dimension)
    seed = validate_seed(seed)
    exact, force_index, padded_index = (validate_flag(exact, field="exact"),
                                        validate_flag(force_index, field="force_index"),
                                        validate_flag(padded_index, field="padded_index"))
    check_queries(queries, embedder)
    rows: list[dict[str, Any]] = []
    with store.tuning_session() as session:
        dimension = _dimension(session, dimension)
        ids = session.stored_ids(dimension)
        query_vectors, own_ids = resolve_queries(
            queries, dimension, ids,
            lambda chosen: session.stored_vectors(dimension, ids=chosen), embedder, seed)
        total = len(scopes) * len(modes) * len(ef_values) * repeats * len(query_vectors)
        with _interruptible(progress, total, "ef_search sweep", "settings") as run:
            for filters_ in scopes:
                in_scope = len(ids) if not filters_ else \
                    len(session.stored_ids(dimension, filters=filters_))
                if not in_scope:  # its recall would read 0: no search, no ground truth
                    raise ValidationError(f"{_filter_label(filters_)} matches no stored "
                                          f"vector of {dimension} dimensions",
                                          field="filters")
                rows.extend(_sweep(session, queries=query_vectors, own_ids=own_ids,
                                   dimension=dimension, k=k, ef_values=ef_values,
                                   iterative_modes=modes, filters=filters_, rows=in_scope,
                                   target="padded" if padded_index else "live",
                                   repeats=repeats, progress=run.update, exact=exact,
                                   force_index=force_index))
        parameters = session.index_parameters(rows[0]["index"]) if rows and not exact else {}
    return _finish(rows, store, repeats, run.interrupted, output,
                   {**parameters, "dimension": dimension})


def benchmark_index_build(store: LongTermMemory, *, m: int | Sequence[int] = (8, 16, 32),
                          ef_construction: int | Sequence[int] = (32, 64, 128),
                          queries: Any = 200, k: int = 10,
                          ef_search: int | Sequence[int] = (10, 20, 40, 80, 160),
                          repeats: int = 1, dimension: int | None = None,
                          seed: int = 0, progress: bool = True,
                          output: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """Build HNSW variants on a copy of the vectors and measure each one's recall curve.

    The vectors of one dimension are copied into an unlogged table (never touching the live
    index); each (m, ef_construction) variant is built there, timed, sized and swept over
    ``ef_search`` like :func:`benchmark_recall`, then dropped; the copy is dropped at the end.
    Pairs with ``ef_construction < 2 * m`` are skipped (pgvector refuses them) and listed in
    the result's ``attrs["skipped"]``. Builds use the
    server's ``maintenance_work_mem`` (reported): a graph that does not fit builds far slower;
    and up to ``max_parallel_maintenance_workers`` workers besides the leader (reported).

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`benchmark_recall` plus ``variant`` (string, "m=16,efc=64"),
        ``build_seconds`` (float64), ``index_bytes`` (int64), ``maintenance_work_mem``
        (string) and ``max_parallel_maintenance_workers`` (int64), one row per variant and
        ``ef_search``.
    """
    store = live_store(store)
    output = _output(output)
    k, ef_values, repeats = _validate_sweep(k, ef_search, repeats)
    # pgvector's bounds: the server's own refusal was the user's error message
    grid = [(a, b) for a in validate_settings(m, field="m", minimum=2, maximum=100)
            for b in validate_settings(ef_construction, field="ef_construction", minimum=4,
                                       maximum=1000)]
    dimension = validate_dimension(dimension)
    seed = validate_seed(seed)
    check_queries(queries, None)
    variants = [(a, b) for a, b in grid if b >= 2 * a]
    skipped = [f"m={a},efc={b}" for a, b in grid if b < 2 * a]
    if not variants:
        raise ValidationError("no (m, ef_construction) pair with ef_construction >= 2 * m",
                              field="ef_construction")
    rows: list[dict[str, Any]] = []
    with store.tuning_session() as session:
        dimension = _dimension(session, dimension)
        memory = session.setting("maintenance_work_mem")
        workers = int(session.setting("max_parallel_maintenance_workers"))
        session.copy_vectors(dimension)
        ids = session.stored_ids(dimension, target="copy")
        query_vectors, own_ids = resolve_queries(
            queries, dimension, ids,
            lambda chosen: session.stored_vectors(dimension, target="copy", ids=chosen),
            None, seed)
        total = len(variants) * len(ef_values) * repeats * len(query_vectors)
        with _interruptible(progress, total, "index variants", "variants") as run:
            for m_value, efc in variants:
                build = session.build_copy_index(m=m_value, ef_construction=efc)
                for row in _sweep(session, queries=query_vectors, own_ids=own_ids,
                                  dimension=dimension, k=k, ef_values=ef_values,
                                  iterative_modes=[None], filters=None, rows=len(ids),
                                  target="copy", repeats=repeats,
                                  progress=run.update):
                    rows.append({**row, "variant": f"m={m_value},efc={efc}", "m": m_value,
                                 "ef_construction": efc, "build_seconds": build["build_seconds"],
                                 "index_bytes": build["index_bytes"]})
    frame = _finish(rows, store, repeats, run.interrupted, output,
                    {"dimension": dimension, "maintenance_work_mem": memory,
                     "max_parallel_maintenance_workers": workers})
    frame.attrs["skipped"] = skipped
    return frame


# -- plots --------------------------------------------------------------------------------------
