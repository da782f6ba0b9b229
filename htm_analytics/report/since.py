"""The report's "Since last time" section: what the history ``collect`` keeps says changed."""

from __future__ import annotations

import os

import pandas as pd

from ..advisor import (
    drift_findings,
    history,
    plot_growth,
    plot_history_index_usage,
    plot_recall_history,
)
from ..store.history import HistoryFolder, HistoryTable
from .render import Figure, Section, counted

__all__ = ["since_last_time_section"]


def _change(growth: pd.DataFrame, first: int, last: int) -> pd.DataFrame:
    """Rows and bytes per table at two samples, and the difference."""
    keyed = growth.assign(total_bytes=growth["table_bytes"] + growth["index_bytes"]).set_index(
        ["sample_id", "table_name"])[["row_count", "total_bytes"]]
    before, after = keyed.loc[first], keyed.loc[last]
    change = after.merge(before, left_index=True, right_index=True, how="left",
                         suffixes=("_now", "_before"))
    change["rows_added"] = change["row_count_now"] - change["row_count_before"]
    change["bytes_added"] = change["total_bytes_now"] - change["total_bytes_before"]
    return change.reset_index()[["table_name", "row_count_before", "row_count_now",
                                 "rows_added", "total_bytes_now", "bytes_added"]]


def since_last_time_section(path: str | os.PathLike[str] | HistoryFolder | HistoryTable
                            ) -> Section:
    """Growth, index usage and recall between the last two samples of the history at
    ``path``, the drift findings, and the plots over the whole history."""
    past = history(path)
    samples = past.samples
    if len(samples) < 2:
        return Section("since", "Since last time",
                       text=f"The history {path} holds {counted(len(samples), 'sample')}: "
                            "run htm-analytics collect again later to see what changed.")
    previous, last = samples.iloc[-2], samples.iloc[-1]
    change = _change(past.growth, int(previous["sample_id"]), int(last["sample_id"]))
    nodes = change.set_index("table_name").get("rows_added", pd.Series()).get("nodes", 0)
    period = past.index_usage[past.index_usage["sample_id"] == last["sample_id"]]
    unused = period[(period["idx_scan"] == 0) & ~period["is_unique"]]["index_name"].tolist()
    drift = drift_findings(past)
    findings = [f"Since {previous['collected_at']:%Y-%m-%d %H:%M} UTC: "
                f"{counted(int(nodes or 0), 'memory', 'memories')} added."]
    recall = past.recall.dropna(subset=["recall"])
    if len(recall):
        now = recall.iloc[-1]
        findings.append(f"Sampled recall@10 {now['recall']:.3f} ({now['recall_low']:.3f}-"
                        f"{now['recall_high']:.3f}) at ef_search {now['ef_search']}; baseline "
                        f"{now['baseline']:.3f} ({now['baseline_low']:.3f}-"
                        f"{now['baseline_high']:.3f}).")
    logged = past.recall.dropna(subset=["logged_recall"])
    if len(logged):
        now = logged.iloc[-1]
        findings.append(
            f"On {int(now['logged_recall_queries'])} logged query vectors: recall@10 "
            f"{now['logged_recall']:.3f} ({now['logged_recall_low']:.3f}-"
            f"{now['logged_recall_high']:.3f}); baseline {now['logged_baseline']:.3f} "
            f"({now['logged_baseline_low']:.3f}-{now['logged_baseline_high']:.3f}).")
    findings += [f"{str(row['severity']).upper()} {row['check']}: {row['object']}: "
                 f"{row['evidence']}" for row in drift.to_dict("records")]
    reset = " The statistics were reset in this period." if last["counters_reset"] else ""
    text = (f"From the history {path} ({counted(len(samples), 'sample')} since "
            f"{samples['collected_at'].iloc[0]:%Y-%m-%d %H:%M} UTC; htm-analytics collect). "
            f"Indexes not scanned in the last period: {', '.join(unused) or 'none'}.{reset}")
    section = Section("since", "Since last time", text=text, findings=findings,
                      tables=[("Rows and size per table, last sample against the one "
                               "before", change), ("Drift findings", drift)],
                      data={"history_change": change, "history_drift": drift,
                            "history_recall": past.recall})
    section.figures += [
        Figure.from_axes(plot_growth(past.growth), "Rows per table at each sample."),
        Figure.from_axes(plot_history_index_usage(past.index_usage),
                         "Index scans per period between samples (the counters' "
                         "differences; after a statistics reset, the counters themselves)."),
        Figure.from_axes(plot_recall_history(past.recall),
                         "Sampled recall@10 at each sample with its 95% Wilson interval, on "
                         "stored vectors and on logged query vectors where the memory logs "
                         "them; each band is its baseline's interval.")]
    return section
