"""Index usage and table health: what the memory workload really touches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._docs import share_docs
from .._plotting import axes_or_new, checked_plot
from ..errors import ValidationError
from ..store import LongTermMemory
from ..validation import validate_frame
from ._common import live_store

__all__ = ["index_usage", "index_usage_delta", "table_health", "plot_index_usage"]

_USAGE_DTYPES = {
    "table": "string", "index": "string", "method": "string", "is_unique": "bool",
    "is_primary": "bool", "idx_scan": "int64", "idx_tup_read": "int64",
    "idx_tup_fetch": "int64", "last_idx_scan": "datetime64[us, UTC]", "size_bytes": "int64",
    "definition": "string", "never_used": "bool",
}
_COUNTERS = ["idx_scan", "idx_tup_read", "idx_tup_fetch"]


def index_usage(store: LongTermMemory) -> pd.DataFrame:
    """Usage of every index on the memory tables and the toolkit's own, from
    ``pg_stat_user_indexes``.

    Counters are cumulative since the statistics were last reset; use
    :func:`index_usage_delta` on two readings to see what one workload used. This process's
    pending counters are flushed first (PostgreSQL 15+); other sessions' counters appear
    within about a second.

    Parameters
    ----------
    store : LongTermMemory
        The memory store.

    Returns
    -------
    pandas.DataFrame
        One row per index, ordered by table and index:

        - ``table``, ``index``, ``method`` (string): names and access method (btree, gin,
          hnsw);
        - ``is_unique``, ``is_primary`` (bool);
        - ``idx_scan``, ``idx_tup_read``, ``idx_tup_fetch`` (int64): scans started, index
          entries returned, live rows fetched;
        - ``last_idx_scan`` (datetime64[us, UTC]): last scan (PostgreSQL 16+, else NaT);
        - ``size_bytes`` (int64), ``definition`` (string);
        - ``never_used`` (bool): no scan since the last reset, and not a unique or primary
          key index (those enforce constraints even when never scanned).
    """
    store = live_store(store)
    frame = store.index_statistics()
    frame["never_used"] = (frame["idx_scan"] == 0) & ~frame["is_unique"] & ~frame["is_primary"]
    return frame.astype(_USAGE_DTYPES)


def index_usage_delta(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """What a workload did to each index: ``after`` minus ``before`` readings.

    Parameters
    ----------
    before, after : pandas.DataFrame
        Two results of :func:`index_usage`, taken around the workload.

    Returns
    -------
    pandas.DataFrame
        ``table``, ``index`` (string) and ``idx_scan``, ``idx_tup_read``, ``idx_tup_fetch``
        (int64) as differences, for indexes present in both readings, most scanned first;
        ``counters_reset`` (bool): an index whose counters went back (``pg_stat_reset``, or
        the index made again under the same name) counts from zero, so its differences are
        its ``after`` readings, the usage since the reset (a lower bound).
    """
    keys = ["table", "index"]
    for field, frame in (("before", before), ("after", after)):
        _check_readings(frame, keys, field)
    merged = after[keys + _COUNTERS].merge(before[keys + _COUNTERS], on=keys,
                                           suffixes=("", "_before"))
    went_back = np.zeros(len(merged), dtype=bool)
    for column in _COUNTERS:
        went_back |= (merged[column] < merged[f"{column}_before"]).to_numpy()
    merged["counters_reset"] = went_back
    for column in _COUNTERS:
        merged[column] = merged[column].where(went_back, merged[column]
                                              - merged[f"{column}_before"])
    result = merged[keys + _COUNTERS + ["counters_reset"]].sort_values(
        ["idx_scan", "table", "index"], ascending=[False, True, True])
    return result.reset_index(drop=True).astype(dict.fromkeys(_COUNTERS, "int64"))


def _check_readings(frame: Any, keys: list[str], field: str) -> None:
    """``frame`` as :func:`index_usage` gives it: counters that are counts (else NaN fails
    the int64 result, text the comparison) and one reading per index (else the merge
    repeats rows)."""
    validate_frame(frame, keys + _COUNTERS, field=field)
    for column in _COUNTERS:
        values = frame[column]
        if not pd.api.types.is_integer_dtype(values) or values.isna().any() \
                or (values < 0).any():
            raise ValidationError(f"column {column!r} must hold counts (integers >= 0), got "
                                  f"{values.dtype}", field=field)
    if frame.duplicated(keys).any():
        raise ValidationError("holds an index twice (table, index): one reading per index, "
                              "as index_usage gives", field=field)


def table_health(store: LongTermMemory) -> pd.DataFrame:
    """Live and dead rows, scans and maintenance of each memory table.

    Returns
    -------
    pandas.DataFrame
        One row per table: ``table`` (string); ``n_live_tup``, ``n_dead_tup``, ``seq_scan``,
        ``idx_scan``, ``n_tup_ins``, ``n_tup_upd``, ``n_tup_hot_upd``, ``n_tup_del``,
        ``total_bytes`` (int64); ``dead_fraction`` (float64, dead / (live + dead), 0 for an
        empty table); ``hot_update_fraction`` (float64, HOT updates / updates, NaN before the
        first update); ``last_vacuum``, ``last_autovacuum``, ``last_analyze``,
        ``last_autoanalyze`` (datetime64[us, UTC]).

    Notes
    -----
    A HOT (heap-only tuple) update writes no index entry. An update that changes an indexed
    column, or finds no room on its page, is not HOT and adds an entry to every index of the
    table. The reference schema indexes ``nodes.access_count``, ``last_accessed`` and
    ``in_working_memory``, which every recall changes, so each recall of a node also inserts
    into its HNSW and GIN indexes.
    """
    store = live_store(store)
    frame = store.table_statistics()
    total = frame["n_live_tup"] + frame["n_dead_tup"]
    frame["dead_fraction"] = (frame["n_dead_tup"] / total.where(total > 0)).fillna(0.0)
    updates = frame["n_tup_upd"].astype("float64")
    frame["hot_update_fraction"] = frame["n_tup_hot_upd"] / updates.where(updates > 0)
    times = ["last_vacuum", "last_autovacuum", "last_analyze", "last_autoanalyze"]
    counts = ["n_live_tup", "n_dead_tup", "seq_scan", "idx_scan", "n_tup_ins", "n_tup_upd",
              "n_tup_hot_upd", "n_tup_del", "total_bytes"]
    return frame.astype({"table": "string", **dict.fromkeys(counts, "int64"),
                         "dead_fraction": "float64", "hot_update_fraction": "float64",
                         **dict.fromkeys(times, "datetime64[us, UTC]")})


@checked_plot
@share_docs
def plot_index_usage(df: pd.DataFrame, *, ax: Any = None, **kwargs: Any) -> Any:
    """Horizontal bars of scans per index, never-used indexes highlighted.

    Parameters
    ----------
    df : pandas.DataFrame
        A result of :func:`index_usage` (or :func:`index_usage_delta`).
    %(ax)s
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.barh`.

    Returns
    -------
    %(plot_returns)s
    """
    ax = axes_or_new(ax, (10, max(2.5, 0.28 * len(df) + 1.0)))
    labels = (df["table"] + "." + df["index"]).tolist()
    never = df["never_used"] if "never_used" in df else df["idx_scan"] == 0
    colors = ["#c44e52" if flag else "#4c72b0" for flag in never]
    ax.barh(labels, df["idx_scan"], color=kwargs.pop("color", colors), **kwargs)
    ax.invert_yaxis()
    # Scans span several orders of magnitude (a primary key takes most): a log scale that
    # still shows zero.
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0)
    ax.tick_params(axis="y", labelsize=8)
    # Zero-length bars are invisible: mark never-used indexes at 0 and colour their names.
    for position, flag in enumerate(never):
        if flag:
            ax.plot(0, position, marker="o", markersize=4, color="#c44e52", clip_on=False)
    for label, flag in zip(ax.get_yticklabels(), never):
        if flag:
            label.set_color("#c44e52")
    ax.set_xlabel("index scans (log scale)")
    ax.set_title("Index usage (red: never used)")
    return ax
