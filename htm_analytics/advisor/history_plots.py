"""Plots of a memory's history: each takes a frame of :func:`history` and ``ax=None``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._plotting import axes_or_new, checked_plot

__all__ = ["plot_growth", "plot_history_index_usage", "plot_recall_history"]


@checked_plot
def plot_growth(growth: pd.DataFrame, *, ax: Any = None, tables: tuple[str, ...] = (
        "nodes", "robot_nodes", "node_tags", "tags")) -> Any:
    """Rows per sample of each table in ``tables`` (``MemoryHistory.growth``); returns the
    Axes."""
    ax = axes_or_new(ax, (7, 3.5))
    for table, rows in growth[growth["table_name"].isin(tables)].groupby("table_name"):
        ax.plot(rows["collected_at"], rows["row_count"], marker="o", label=str(table))
    ax.set(xlabel="collected at (UTC)", ylabel="rows", title="Growth")
    ax.legend(loc="upper left", fontsize="small")
    return ax


@checked_plot
def plot_history_index_usage(index_usage: pd.DataFrame, *, ax: Any = None,
                             top: int = 10) -> Any:
    """Scans per period of the ``top`` most scanned indexes (``MemoryHistory.index_usage``),
    periods after a statistics reset hatched; returns the Axes."""
    ax = axes_or_new(ax, (7, 3.5))
    totals = index_usage.groupby("index_name")["idx_scan"].sum().nlargest(top)
    table = index_usage[index_usage["index_name"].isin(totals.index)].pivot_table(
        index="collected_at", columns="index_name", values="idx_scan", aggfunc="sum")
    if len(table):
        table.index = pd.DatetimeIndex(table.index).strftime("%m-%d %H:%M")
        table.plot.bar(stacked=True, ax=ax, width=0.8)
        ax.legend(loc="upper left", fontsize="x-small")
    ax.set(xlabel="period ending at (UTC)", ylabel="index scans", title="Index usage per period")
    return ax


@checked_plot
def plot_recall_history(recall: pd.DataFrame, *, ax: Any = None) -> Any:
    """Sampled recall per sample with its interval, and the baseline's interval as a band
    (``MemoryHistory.recall``): on stored vectors, and on logged query vectors where the
    memory logs them; returns the Axes."""
    ax = axes_or_new(ax, (7, 3.5))
    for prefix, label, colour in (("", "stored vectors", "C0"),
                                  ("logged_", "logged queries", "C1")):
        if f"{prefix}recall" not in recall:
            continue
        measured = recall.dropna(subset=[f"{prefix}recall"])
        if not len(measured):
            continue
        values = measured[f"{prefix}recall"].astype(float)
        ax.errorbar(measured["collected_at"], values,
                    yerr=[values - measured[f"{prefix}recall_low"].astype(float),
                          measured[f"{prefix}recall_high"].astype(float) - values],
                    marker="o", capsize=3, color=colour, label=f"recall@10, {label}")
        base = measured.iloc[0]
        ax.axhspan(base[f"{prefix}baseline_low"], base[f"{prefix}baseline_high"], alpha=0.15,
                   color=colour, label=f"baseline interval, {label}")
    if ax.has_data():
        ax.legend(loc="lower left", fontsize="small")
    ax.set(xlabel="collected at (UTC)", ylabel="recall@10", title="Recall over time")
    return ax
