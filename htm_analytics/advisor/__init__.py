"""The health advisor: findings about a memory database, each with the SQL that fixes it.

The checks follow PgHero's (unused, duplicate and invalid indexes, sequential scans on big
tables, cache hit ratio, dead rows, transaction-ID wraparound, sequences near their maximum,
long and idle-in-transaction sessions, slow statements) and add what only a vector memory
store needs (HOT updates blocked by the recall columns' indexes, HNSW cache residency and
rebuild memory, padded vectors, mixed embedding models, the ``ef_search`` in use).

Nothing here changes the database: every finding carries a statement for a person to review
and run (statements are separated by ``;`` and a line break; run them one at a time, as psql
does, since ``CONCURRENTLY`` refuses to run inside a transaction block).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pandas as pd

from ..analysis.summary import HygieneResult
from ..errors import ValidationError
from ..store import LongTermMemory
from ..store.history import HistoryFolder, HistoryTable
from ..tuning.advice import EfSearchAdvice
from . import indexes, tables, vectors
from ._common import (
    FINDING_COLUMNS,
    SEVERITIES,
    AdvisorThresholds,
    Context,
    age_text,
    query_text,
    split_statements,
)
from .collect import collect_sample
from .gate import FINDINGS_SCHEMA_VERSION, GATE_EXIT_CODES, findings_document, gate_exit_code
from .history import DriftThresholds, MemoryHistory, drift_findings, history
from .history_plots import plot_growth, plot_history_index_usage, plot_recall_history
from .hygiene import hygiene_findings

__all__ = ["FINDING_COLUMNS", "FINDINGS_SCHEMA_VERSION", "GATE_EXIT_CODES", "SEVERITIES",
           "AdvisorThresholds", "DriftThresholds", "HistoryFolder", "HistoryTable",
           "MemoryHistory", "advise", "collect_sample",
           "drift_findings", "findings_document", "gate_exit_code", "history",
           "plot_growth", "plot_history_index_usage", "plot_recall_history",
           "split_statements", "statistics_age"]

_SEVERITY_ORDER = {name: position for position, name in enumerate(SEVERITIES)}
_CHECKS: tuple[Callable[[Context], Iterator[dict[str, str]]], ...] = (
    indexes.invalid_indexes, indexes.duplicate_indexes, indexes.hot_updates,
    tables.bench_leftovers, tables.sequential_scans, tables.dead_rows, tables.wraparound,
    tables.cache_hit, tables.sequences, tables.sessions, tables.slow_queries,
    vectors.hnsw_memory, vectors.vectors)


def statistics_age(store: LongTermMemory) -> tuple[pd.Timestamp | None, float | None, str]:
    """Since when the usage statistics count: (start, age in seconds, a phrase saying so).

    The start is the last ``pg_stat_reset``, else the database's creation or the server's
    last start without saved statistics (after a crash), whichever is later; both None (and
    the phrase says so) when neither can be read.
    """
    row = store.fetch_frame(query_text("statistics_age")).iloc[0]
    since, what = row["stats_reset"], "statistics were reset"
    if pd.isna(since) and row["can_read_files"]:
        since = store.fetch_frame(query_text("database_created")).iloc[0]["database_created"]
        what = "the database was created (never reset)"
        restarted = row["server_statistics_since"]
        if not pd.isna(restarted) and (pd.isna(since) or restarted > since):
            since = restarted
            what = "the server started without saved statistics (as after a crash)"
    if since is None or pd.isna(since):
        return None, None, "statistics never reset; their age is unknown to this user"
    since = pd.Timestamp(since)
    seconds = (pd.Timestamp(row["checked_at"]) - since).total_seconds()
    return since, seconds, f"{what} {age_text(seconds)} ago, at {since:%Y-%m-%d %H:%M} UTC"


def advise(store: LongTermMemory, *, thresholds: AdvisorThresholds | None = None,
           ef_search_advice: EfSearchAdvice | None = None,
           hygiene: HygieneResult | None = None) -> pd.DataFrame:
    """Check the database's health and tuning and say what to do, with the SQL to do it.

    Parameters
    ----------
    store : LongTermMemory
        The memory store; only read.
    thresholds : AdvisorThresholds, optional
        When each check reports (PgHero's defaults where it has them).
    ef_search_advice : EfSearchAdvice, optional
        A result of :func:`htm_analytics.recommend_ef_search`: adds the ``ef_search`` finding
        (searches run at the store's default; the sweep says which setting reaches the
        target recall). Without it no sweep is run.
    hygiene : HygieneResult, optional
        A result of :func:`htm_analytics.memory_hygiene`: adds its findings that call for
        action (credentials, personal data, near-duplicate groups). Without it the memory's
        content is not checked (the checks read every memory).

    Returns
    -------
    pandas.DataFrame
        One row per finding, most severe first:

        - ``check`` (string): which check, e.g. ``duplicate_index``, ``hot_updates``;
        - ``severity`` (string): ``critical``, ``warning`` or ``info``;
        - ``object`` (string): the table, index, sequence or session concerned;
        - ``evidence`` (string): the numbers behind it;
        - ``recommendation`` (string): what to do and why;
        - ``sql`` (string): statements that do it (or show more), separated by ``;`` and a
          line break; none is run by the toolkit. ``attrs["statistics_since"]`` holds when
          the usage statistics began (``statistics_seconds``: their age, ``statistics_note``:
          both in words) and ``attrs["unused_indexes"]`` the names of the indexes the
          ``unused_index`` check counted.
    """
    if not isinstance(store, LongTermMemory):
        raise ValidationError("needs a live LongTermMemory (a snapshot has no server "
                              "statistics)", field="store")
    if thresholds is None:
        thresholds = AdvisorThresholds()
    if not isinstance(thresholds, AdvisorThresholds):
        raise ValidationError("must be an AdvisorThresholds", field="thresholds")
    # Checked before any query: anything else fails on a missing attribute, mid-way.
    if ef_search_advice is not None and not isinstance(ef_search_advice, EfSearchAdvice):
        raise ValidationError("must be a result of recommend_ef_search (EfSearchAdvice), got "
                              f"{type(ef_search_advice).__name__}", field="ef_search_advice")
    if hygiene is not None and not isinstance(hygiene, HygieneResult):
        raise ValidationError("must be a result of memory_hygiene (HygieneResult), got "
                              f"{type(hygiene).__name__}", field="hygiene")
    store.index_statistics()  # flushes this process's pending counters
    since, seconds, statistics_note = statistics_age(store)
    context = Context(store, thresholds, store.fetch_frame(query_text("indexes")),
                      store.fetch_frame(query_text("tables")), since, seconds, set())
    rows: list[dict[str, str]] = []
    for check in _CHECKS:
        rows.extend(check(context))
    if ef_search_advice is not None:
        rows.extend(vectors.ef_search(ef_search_advice))
    if hygiene is not None:
        rows.extend(hygiene_findings(context, hygiene))
    rows.extend(indexes.unused_indexes(context, statistics_note))
    frame = pd.DataFrame(rows, columns=list(FINDING_COLUMNS)).astype(FINDING_COLUMNS)
    if len(frame):
        frame = frame.sort_values(["severity", "check", "object"], key=lambda column: (
            column.map(_SEVERITY_ORDER) if column.name == "severity" else column),
            kind="stable").reset_index(drop=True)
    frame.attrs["statistics_since"] = since
    frame.attrs["statistics_seconds"] = seconds
    frame.attrs["statistics_note"] = statistics_note
    frame.attrs["unused_indexes"] = indexes.unused_candidates(context)["index"].tolist()
    return frame
