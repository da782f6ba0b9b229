"""Plots of the tuning benchmarks' results (:mod:`htm_analytics.tuning.benchmark`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._plotting import axes_or_new, checked_plot, fraction_limits

__all__ = ["plot_recall_latency", "plot_recall_by_ef"]


def _curves(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    keys = [c for c in ("variant", "filter", "iterative_scan") if c in df and df[c].nunique() > 1]
    if not keys:
        return [("", df.sort_values("ef_search"))]
    return [(", ".join(str(v) for v in (name if isinstance(name, tuple) else (name,))),
             rows.sort_values("ef_search"))
            for name, rows in df.groupby(keys, sort=True)]


@checked_plot
def plot_recall_latency(df: pd.DataFrame, *, ax: Any = None, y: str = "qps",
                        annotate: bool = True, **kwargs: Any) -> Any:
    """Recall against throughput (``y='qps'``, log scale) or a latency column, one line per
    variant/filter/iterative-scan setting, points labelled with their ``ef_search``: the
    Pareto curve of a :func:`benchmark_recall` or :func:`benchmark_index_build` result.

    ``**kwargs`` go to :meth:`matplotlib.axes.Axes.plot`. Returns the Axes.
    """
    ax = axes_or_new(ax, (7, 4.5))
    for label, rows in _curves(df):
        ax.plot(rows["recall_mean"], rows[y], marker="o", label=label or None, **kwargs)
        if annotate:
            for x_value, y_value, ef in zip(rows["recall_mean"], rows[y], rows["ef_search"]):
                ax.annotate(str(ef), (x_value, y_value), textcoords="offset points",
                            xytext=(3, 3), fontsize=7)
    if y == "qps":
        ax.set_yscale("log")
    ax.set_xlabel(f"recall@{int(df['k'].iloc[0])}" if len(df) else "recall")
    ax.set_ylabel({"qps": "queries per second (one connection)"}.get(y, y.replace("_", " ")))
    if len(_curves(df)) > 1:
        ax.legend(fontsize=7)
    ax.set_title("Recall vs speed by ef_search")
    return ax


@checked_plot
def plot_recall_by_ef(df: pd.DataFrame, *, ax: Any = None, **kwargs: Any) -> Any:
    """Mean recall (line) and its 5th percentile (dashed) against ``ef_search`` (log 2),
    one colour per variant/filter/iterative-scan setting. The recall axis spans the measured
    values (0 to 1 only when they spread that far). Returns the Axes."""
    ax = axes_or_new(ax, (7, 4.5))
    for number, (label, rows) in enumerate(_curves(df)):
        color = f"C{number % 10}"
        ax.plot(rows["ef_search"], rows["recall_mean"], marker="o", color=color,
                label=label or "mean", **kwargs)
        ax.plot(rows["ef_search"], rows["recall_p5"], linestyle="--", color=color, alpha=0.6,
                label=f"{label} (5th percentile)" if label else "5th percentile")
    ax.set_xscale("log", base=2)
    settings = sorted(df["ef_search"].unique())
    ax.set_xticks(settings, [str(ef) for ef in settings])
    ax.minorticks_off()
    ax.set_xlabel("hnsw.ef_search")
    ax.set_ylabel(f"recall@{int(df['k'].iloc[0])}" if len(df) else "recall")
    # The axis fits the measured recalls: values of 0.98-1.0 on a 0-1 axis look like a line.
    ax.set_ylim(*fraction_limits(pd.concat([df["recall_mean"], df["recall_p5"]])))
    ax.legend(fontsize=7)
    ax.set_title("Recall by ef_search")
    return ax
