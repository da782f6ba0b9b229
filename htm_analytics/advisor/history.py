"""A memory's history read back: growth, index usage per period, recall over time, drift.

Usage between two samples is the difference of the cumulative counters, unless they were
reset in between: by ``pg_stat_reset`` (this database's ``stats_reset`` changed), by a
crash (the server restarted and the database's commit count went back: a clean restart
keeps the counters), or for one relation alone (its counter went back, or it was dropped
and made again under the same name: another oid). Then the usage since the reset is the
counter itself, and the period is marked ``counters_reset``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..store import quote_identifier
from ..store.history import HistoryFolder, HistoryTable, read_history
from ..validation import validate_number, validate_positive_int
from ._common import FINDING_COLUMNS, finding, toolkit_statements

__all__ = ["DriftThresholds", "MemoryHistory", "history", "drift_findings"]

_RECALL_COLUMNS = ["recall", "recall_low", "recall_high", "recall_queries", "recall_index",
                   "logged_queries", "logged_recall", "logged_recall_low",
                   "logged_recall_high", "logged_recall_queries"]
# Where a sample does not say which index its recall searched (history version 2 and
# older): the HNSW indexes of the nodes table, for the user to pick the measured dimension's.
_HNSW_INDEXES = (
    "SELECT i.indexrelid::regclass AS index_name, pg_get_indexdef(i.indexrelid) AS definition "
    "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
    "WHERE i.indrelid = 'public.nodes'::regclass AND a.amname = 'hnsw' ORDER BY c.relname")


@dataclass(frozen=True)
class DriftThresholds:
    """When the history flags drift. Each attribute is checked when made: a
    :class:`~htm_analytics.ValidationError` names the one out of range.

    Attributes
    ----------
    unused_samples : int
        An index not scanned over this many periods (between the last samples) is unused
        (from 1).
    growth_factor : float
        Flag growth when the last period added memories this many times faster than the
        periods before it did on average (a finite number above 0).
    growth_min_rows : int
        ... and added at least this many (from 0).
    baseline_sample : int or None
        The approved sample recall is compared with (its ``sample_id``: one that measured
        recall, checked by :func:`history` and :func:`drift_findings`); None: the first.
    """

    unused_samples: int = 7
    growth_factor: float = 2.0
    growth_min_rows: int = 100
    baseline_sample: int | None = None

    def __post_init__(self) -> None:
        # Checked here, naming the attribute: 0 periods would call every index unused, a
        # NaN factor flag any growth, and others fail later with a TypeError.
        checked = {
            "unused_samples": validate_positive_int(self.unused_samples,
                                                    field="unused_samples"),
            "growth_factor": validate_number(self.growth_factor, field="growth_factor",
                                             minimum=0, exclusive=True),
            "growth_min_rows": validate_number(self.growth_min_rows, field="growth_min_rows",
                                               minimum=0, integer=True),
            "baseline_sample": None if self.baseline_sample is None else
            validate_positive_int(self.baseline_sample, field="baseline_sample")}
        for name, value in checked.items():
            object.__setattr__(self, name, value)


@dataclass
class MemoryHistory:
    """The frames of a history (see :func:`history` for their columns)."""

    samples: pd.DataFrame
    growth: pd.DataFrame
    index_usage: pd.DataFrame
    recall: pd.DataFrame
    robots: pd.DataFrame
    statements: pd.DataFrame


def _reset_between(samples: pd.DataFrame) -> pd.Series:
    """Per sample: were the database's counters reset since the previous sample?"""
    previous = samples.shift(1)
    reset_changed = ~((samples["stats_reset"] == previous["stats_reset"])
                      | (samples["stats_reset"].isna() & previous["stats_reset"].isna()))
    restarted = samples["server_started_at"] != previous["server_started_at"]
    went_back = samples["xact_commit"] < previous["xact_commit"]
    flags = reset_changed | (restarted & went_back)
    flags.iloc[:1] = False
    return flags.astype(bool)


def _evictions_between(samples: pd.DataFrame) -> pd.Series:
    """Per sample: how many times pg_stat_statements evicted entries since the previous
    sample (the count itself where it went back: reset in between), 0 where either sample
    does not say (a server before PostgreSQL 14, a history before version 5)."""
    counts = pd.to_numeric(samples["statements_evicted"], errors="coerce")
    previous = counts.shift(1)
    since = counts.where(counts < previous, counts - previous)
    return since.where(previous.notna(), 0).fillna(0).astype("int64")


def _periods(frame: pd.DataFrame, key: list[str], oid: str, counters: list[str],
             samples: pd.DataFrame, *, since: str | None = None) -> pd.DataFrame:
    """Each relation's counters turned into usage per period (between consecutive samples).

    ``since``: the column saying when each entry started counting (pg_stat_statements'
    ``stats_since``). An entry started after the previous sample holds only this period's
    counts: one missing from the previous sample is counted whole in its first period, one
    started again has its counters reset. Without it (or where it is NULL), an entry shows
    from its second sample, its earlier counts being unknown.
    """
    order = samples[["sample_id", "collected_at"]].reset_index(drop=True)
    order["previous_id"] = order["sample_id"].shift(1).astype("Int64")
    order["previous_at"] = order["collected_at"].shift(1)
    reset = dict(zip(samples["sample_id"], _reset_between(samples)))
    frame = frame.merge(order, on="sample_id")
    dated = [since] if since else []
    prior = frame[["sample_id", *key, oid, *counters, *dated]].rename(
        columns={"sample_id": "previous_id", oid: "previous_oid",
                 **{c: f"previous_{c}" for c in [*counters, *dated]}})
    joined = frame.merge(prior, on=["previous_id", *key], how="left" if since else "inner")
    sample_reset = joined["sample_id"].map(reset).astype(bool)
    joined["counters_reset"] = sample_reset | (joined[oid] != joined["previous_oid"])
    if since:
        first = joined["previous_oid"].isna()
        keep = ~first | (joined[since] > joined["previous_at"])
        joined, first, sample_reset = joined[keep], first[keep], sample_reset[keep]
        restarted = joined[since].notna() & joined[f"previous_{since}"].notna() \
            & (joined[since] != joined[f"previous_{since}"])
        joined["counters_reset"] = joined["counters_reset"].where(~first, sample_reset) \
            | restarted
        for counter in counters:  # a first period counts from zero
            joined[f"previous_{counter}"] = joined[f"previous_{counter}"].fillna(0)
    for counter in counters:
        joined["counters_reset"] |= joined[counter] < joined[f"previous_{counter}"]
    for counter in counters:
        joined[counter] = pd.Series(np.where(
            joined["counters_reset"], joined[counter],
            joined[counter] - joined[f"previous_{counter}"]), index=joined.index).astype(
                frame[counter].dtype)
    return joined[["sample_id", "collected_at", *key, *counters, "counters_reset"]
                  ].reset_index(drop=True)


def _statement_periods(sampled: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """Calls and time per period and statement, with the statement's latest text and whether
    it is one of this toolkit's own analyses."""
    periods = _periods(sampled.assign(oid=0), ["queryid"], "oid", ["calls", "total_ms"],
                       samples, since="stats_since")
    text = sampled.sort_values("sample_id").drop_duplicates("queryid", keep="last").set_index(
        "queryid")["query"]
    periods.insert(3, "query", periods["queryid"].map(text).astype("string"))
    periods.insert(4, "toolkit", toolkit_statements(periods["query"]))
    evicted = dict(zip(samples["sample_id"], samples["entries_evicted"]))
    periods["entries_evicted"] = periods["sample_id"].map(evicted).astype(bool)
    return periods


def history(path: str | os.PathLike[str] | HistoryFolder | HistoryTable, *,
            thresholds: DriftThresholds | None = None) -> MemoryHistory:
    """Read a history written by ``htm-analytics collect`` into frames.

    Parameters
    ----------
    path : path, HistoryFolder or HistoryTable
        The history's DuckDB file, its folder of Parquet files (an existing folder, a path
        ending with ``/``, or ``HistoryFolder(path)``), or its PostgreSQL schema.
    thresholds : DriftThresholds, optional
        Which sample is recall's baseline.

    Returns
    -------
    MemoryHistory
        - ``samples``: one row per sample (``sample_id``, ``collected_at``, ``database``,
          ``server_started_at``, ``stats_reset``, ``ef_search``, ``recall``, ``recall_low``,
          ``recall_high``..., ``statements_evicted`` (pg_stat_statements' evictions since
          its last reset), ``counters_reset`` (reset since the previous sample) and
          ``entries_evicted`` (pg_stat_statements evicted entries since the previous
          sample: full, it dropped the least-used statements' counts));
        - ``growth``: per sample and table: ``row_count``, ``table_bytes``, ``index_bytes``;
        - ``index_usage``: per period (ending at ``sample_id``) and index: ``idx_scan``,
          ``idx_tup_read``, ``idx_tup_fetch`` used in the period, ``counters_reset``;
        - ``recall``: per sample: ``recall`` on stored vectors with its interval
          (``recall_low``, ``recall_high``, ``recall_queries``), the index it searched
          (``recall_index``; NULL in samples of history version 2 or older) and the
          baseline's (``baseline``, ``baseline_low``, ``baseline_high``); the same on
          logged query vectors (``logged_recall``... ``logged_baseline_high``; NULL where
          none were logged) with ``logged_queries`` (how many the log held; NULL: no log);
        - ``robots``: per sample and robot: ``memories``;
        - ``statements``: per period and statement (``queryid``; ``query``, its text as last
          sampled; ``toolkit``: one of this toolkit's own analyses, which carry its marker):
          ``calls``, ``total_ms`` in the period, ``counters_reset`` (the statement's entry
          started counting again in the period) and ``entries_evicted`` (pg_stat_statements
          evicted entries in the period: before PostgreSQL 17, which dates entries, one
          evicted and counted again shows fewer calls than it had). A statement first
          counted after the previous sample shows from its first period where
          pg_stat_statements dates its entries (``stats_since``), else from its second.
    """
    thresholds = _thresholds(thresholds)
    frames = read_history(path)
    samples = frames["samples"].sort_values("sample_id").reset_index(drop=True)
    samples["counters_reset"] = _reset_between(samples).to_numpy()
    samples["entries_evicted"] = _evictions_between(samples).to_numpy() > 0
    growth = frames["sample_tables"].merge(samples[["sample_id", "collected_at"]])[
        ["sample_id", "collected_at", "table_name", "row_count", "table_bytes",
         "index_bytes"]]
    usage = _periods(frames["sample_indexes"], ["table_name", "index_name"], "indexrelid",
                     ["idx_scan", "idx_tup_read", "idx_tup_fetch"], samples)
    unique = frames["sample_indexes"].drop_duplicates("index_name", keep="last").set_index(
        "index_name")["is_unique"]
    usage["is_unique"] = usage["index_name"].map(unique).fillna(False).astype(bool)
    statements = _statement_periods(frames["sample_statements"], samples)
    recall = samples[["sample_id", "collected_at", "ef_search", *_RECALL_COLUMNS]]
    _check_baseline(thresholds.baseline_sample, recall)
    recall = _with_baseline(recall, thresholds.baseline_sample)
    robots = frames["sample_robots"].merge(samples[["sample_id", "collected_at"]])
    return MemoryHistory(samples, growth, usage, recall, robots, statements)


def _thresholds(thresholds: DriftThresholds | None) -> DriftThresholds:
    """``thresholds``, or the default ones for None."""
    if thresholds is None:
        return DriftThresholds()
    if not isinstance(thresholds, DriftThresholds):
        raise ValidationError(f"must be DriftThresholds or None, got "
                              f"{type(thresholds).__name__}", field="thresholds")
    return thresholds


def _with_baseline(recall: pd.DataFrame, baseline: int | None) -> pd.DataFrame:
    """A copy of ``recall`` with the baseline's columns (``baseline``, ``baseline_low``,
    ``baseline_high`` and their ``logged_`` twins): the recall of sample ``baseline``, or,
    for None, of the first sample that measured it (on stored vectors and on logged queries
    apart); NaN where that sample did not measure it."""
    recall = recall.copy()
    for prefix in ("", "logged_"):
        recall[f"{prefix}recall"] = pd.to_numeric(recall[f"{prefix}recall"])
        measured = recall.dropna(subset=[f"{prefix}recall"])
        base = measured[measured["sample_id"] == baseline] if baseline is not None \
            else measured.head(1)
        for suffix in ("", "_low", "_high"):
            recall[f"{prefix}baseline{suffix}"] = \
                float(base[f"{prefix}recall{suffix}"].iloc[0]) if len(base) else np.nan
    return recall


def _check_baseline(baseline: int | None, recall: pd.DataFrame) -> None:
    """A chosen baseline must be a sample that measured recall: any other would silently
    turn the drift check off."""
    if baseline is None:
        return
    measured = recall.loc[pd.to_numeric(recall["recall"]).notna(), "sample_id"].tolist()
    if baseline not in measured:
        choices = ", ".join(map(str, measured[:20])) + (", ..." if len(measured) > 20 else "")
        raise ValidationError(
            f"sample {baseline} is not a sample that measured recall; those are: "
            f"{choices or 'none yet'}", field="baseline_sample")


def drift_findings(memory_history: MemoryHistory,
                   thresholds: DriftThresholds | None = None) -> pd.DataFrame:
    """What changed for the worse, as advisor findings (``check``, ``severity``, ``object``,
    ``evidence``, ``recommendation``, ``sql``):

    - ``recall_drift`` (critical): the last sample's recall interval lies wholly below the
      baseline's (a drop larger than both intervals); its SQL rebuilds the index that sample
      searched, or, for a sample that does not name it (history version 2 or older), lists
      the HNSW indexes of ``public.nodes`` rather than guess;
    - ``logged_recall_drift`` (warning): the same on the logged query vectors, whose sample
      changes as new recalls replace the oldest in the log;
    - ``unused_index`` (warning): a non-unique index not scanned in the last
      ``unused_samples`` periods (a verdict over real time, not since a reset);
    - ``fast_growth`` (warning): the last period added memories ``growth_factor`` times
      faster than the periods before it on average;
    - ``statements_evicted`` (info): pg_stat_statements evicted entries in the last
      period, so the statements' figures there miss what the evicted entries had counted.

    Recall is compared with the baseline ``thresholds`` names (``baseline_sample``; None:
    the first sample that measured it), whichever one ``memory_history`` was read with;
    without ``thresholds``, with the baseline :func:`history` gave it. A
    ``baseline_sample`` that is no sample of ``memory_history`` that measured recall is
    refused (:class:`~htm_analytics.ValidationError`), as :func:`history` refuses it.
    """
    if not isinstance(memory_history, MemoryHistory):
        raise ValidationError("must be a MemoryHistory, as history() reads it, got "
                              f"{type(memory_history).__name__}", field="memory_history")
    recall = memory_history.recall
    if thresholds is not None:  # the baseline named here, not the one read with
        thresholds = _thresholds(thresholds)
        _check_baseline(thresholds.baseline_sample, recall)
        recall = _with_baseline(recall, thresholds.baseline_sample)
    thresholds = _thresholds(thresholds)
    rows = [drift for prefix in ("", "logged_")
            if (drift := _recall_drift(recall, prefix)) is not None]
    usage = memory_history.index_usage
    periods = sorted(usage["sample_id"].unique())[-thresholds.unused_samples:]
    if len(periods) >= thresholds.unused_samples:
        recent = usage[usage["sample_id"].isin(periods) & ~usage["is_unique"]]
        scans = recent.groupby(["table_name", "index_name"])["idx_scan"].agg(["sum", "size"])
        for row in scans.reset_index().to_dict("records"):
            table, index = row["table_name"], row["index_name"]
            if row["sum"] == 0 and row["size"] == len(periods):
                rows.append(finding(
                    "unused_index", "warning", f"public.{index}",
                    f"not scanned in the last {len(periods)} periods between samples",
                    f"Drop it if nothing needs {table} searched this way: every write "
                    "updates it.",
                    [f"DROP INDEX CONCURRENTLY IF EXISTS {quote_identifier('public', index)}"]))
    rows.extend(_growth(memory_history.growth, thresholds))
    rows.extend(_evictions(memory_history.samples))
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS)).astype(FINDING_COLUMNS)


def _recall_drift(recall: pd.DataFrame, prefix: str) -> dict[str, str] | None:
    """A finding when the last sample's recall interval (on stored vectors, or on logged
    queries with ``prefix="logged_"``) lies wholly below the baseline's."""
    measured = recall.dropna(subset=[f"{prefix}recall"])
    if len(measured) < 2:
        return None
    last = measured.iloc[-1]
    if not last[f"{prefix}recall_high"] < last[f"{prefix}baseline_low"]:
        return None
    logged = prefix == "logged_"
    figures = (f"{last[f'{prefix}recall']:.3f} ({last[f'{prefix}recall_low']:.3f}-"
               f"{last[f'{prefix}recall_high']:.3f}) at ef_search {last['ef_search']} against "
               f"the baseline {last[f'{prefix}baseline']:.3f} ("
               f"{last[f'{prefix}baseline_low']:.3f}-{last[f'{prefix}baseline_high']:.3f})")
    if logged:  # the logged queries change as recalls replace them: a warning, not a verdict
        return finding(
            "logged_recall_drift", "warning", "vector index",
            f"recall@10 on {int(last['logged_recall_queries'])} logged query vectors {figures}",
            "The questions really asked find fewer of their true neighbours than at the "
            "baseline: if recall on stored vectors held, the questions changed; else check "
            "hnsw.ef_search and the index as for recall_drift.",
            ["SHOW hnsw.ef_search"])
    index = last["recall_index"]
    if isinstance(index, str) and index:
        return finding(
            "recall_drift", "critical", f"public.{index}", f"recall@10 {figures}",
            "Searches miss memories they found before: check hnsw.ef_search (ALTER "
            f"DATABASE ... SET), then rebuild {index}, the index searched, if its graph "
            "degraded.",
            ["SHOW hnsw.ef_search",
             f"REINDEX INDEX CONCURRENTLY {quote_identifier('public', index)}"])
    return finding(
        "recall_drift", "critical", "vector index", f"recall@10 {figures}",
        "Searches miss memories they found before: check hnsw.ef_search (ALTER "
        "DATABASE ... SET), then rebuild the index if the graph degraded: the one of the "
        "measured dimension (idx_nodes_embedding_<d> where it exists, else "
        "idx_nodes_embedding), as this sample predates history version 3 and does not name "
        "it.", ["SHOW hnsw.ef_search", _HNSW_INDEXES])


def _growth(growth: pd.DataFrame, thresholds: DriftThresholds) -> list[dict[str, str]]:
    nodes = growth[growth["table_name"] == "nodes"].sort_values("sample_id")
    if len(nodes) < 3:
        return []
    hours = (nodes["collected_at"] - nodes["collected_at"].iloc[0]).dt.total_seconds() / 3600
    rows = nodes["row_count"].astype(float).to_numpy()
    before_rate = (rows[-2] - rows[0]) / max(hours.iloc[-2], 1e-9)
    added = rows[-1] - rows[-2]
    last_rate = added / max(hours.iloc[-1] - hours.iloc[-2], 1e-9)
    forecast = rows[-2] + before_rate * (hours.iloc[-1] - hours.iloc[-2])
    if added < thresholds.growth_min_rows or last_rate <= thresholds.growth_factor * max(
            before_rate, 0.0):
        return []
    return [finding(
        "fast_growth", "warning", "public.nodes",
        f"{added:,.0f} memories in the last period ({last_rate:,.1f}/hour) against "
        f"{before_rate:,.1f}/hour before: {rows[-1]:,.0f} where the trend said "
        f"{forecast:,.0f}",
        "Check what writes so much (a loop remembering the same content?), and plan the "
        "index's memory for the new size.",
        ["SELECT robot_id, count(*) FROM robot_nodes GROUP BY 1 ORDER BY 2 DESC"])]


def _evictions(samples: pd.DataFrame) -> list[dict[str, str]]:
    evicted = _evictions_between(samples)
    if len(samples) < 2 or not evicted.iloc[-1]:
        return []
    before = samples.iloc[-2]
    return [finding(
        "statements_evicted", "info", "pg_stat_statements",
        f"evicted its least-used entries {int(evicted.iloc[-1]):,} times since sample "
        f"{int(before['sample_id'])} ({before['collected_at']:%Y-%m-%d %H:%M})",
        "It is full: raise pg_stat_statements.max (it takes a restart) so that the "
        "statements the history follows keep their counts. An evicted statement's counts "
        "are lost; before PostgreSQL 17 one counted again shows fewer calls than it had.",
        ["SHOW pg_stat_statements.max",
         "SELECT dealloc, stats_reset FROM pg_stat_statements_info"])]
