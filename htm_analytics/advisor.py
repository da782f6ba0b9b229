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

import importlib.resources
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from psycopg import sql

from .errors import ValidationError
from .store import DEFAULT_EF_SEARCH, LongTermMemory

__all__ = ["FINDING_COLUMNS", "SEVERITIES", "AdvisorThresholds", "advise", "split_statements"]

SEVERITIES = ("critical", "warning", "info")
FINDING_COLUMNS = {"check": "string", "severity": "string", "object": "string",
                   "evidence": "string", "recommendation": "string", "sql": "string"}
# Columns every recall (track_access, working-memory flags) rewrites on nodes.
RECALL_COLUMNS = ("access_count", "last_accessed", "in_working_memory")
# Measured in docs/benchmarks.md (bench_htm.py): recall writes after dropping the recall
# columns' indexes and setting fillfactor = 90 on nodes.
MEASURED_RECALL_WRITE_GAIN = "35x cheaper recall writes, HTM.recall 8.7x faster"
_SEVERITY_ORDER = {name: position for position, name in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class AdvisorThresholds:
    """When a check reports. Defaults are PgHero's where it has one.

    Attributes
    ----------
    unused_max_scans : int
        An index scanned at most this often since the statistics began is unused.
    unused_min_bytes : int
        Smaller unused indexes are not reported.
    min_statistics_days : float
        Statistics younger than this make "unused" a question (severity info), not advice.
    seq_scan_min_rows : int
        Tables smaller than this are fine to scan sequentially (PgHero: 10,000).
    seq_scan_max_share : float
        Report a big table when more than this share of its scans are sequential (0.05).
    cache_hit_min : float
        Report when fewer block reads than this come from shared buffers (0.99).
    cache_min_blocks : int
        Block reads needed before the ratio means anything.
    dead_min_rows : int
        Dead rows needed to report a table.
    dead_min_fraction : float
        Dead share of rows needed to report a table.
    xid_min_left : int
        Report a table with fewer transactions left before wraparound (10 million).
    sequence_max_fraction : float
        Report a sequence past this share of its column's maximum (0.9).
    long_query_seconds : float
        Report statements running longer (60).
    idle_transaction_seconds : float
        Report sessions idle inside a transaction longer (60).
    slow_query_ms, slow_query_calls : float, int
        pg_stat_statements: mean time and calls needed to report a statement (20 ms, 100).
    hot_min_updates : int
        Updates of nodes needed before the HOT share is judged.
    hot_min_fraction : float
        Report nodes when fewer of its updates are HOT.
    hnsw_min_cached_fraction : float
        With pg_buffercache: report an HNSW index with less of it in shared buffers.
    """

    unused_max_scans: int = 0
    unused_min_bytes: int = 0
    min_statistics_days: float = 7.0
    seq_scan_min_rows: int = 10_000
    seq_scan_max_share: float = 0.05
    cache_hit_min: float = 0.99
    cache_min_blocks: int = 1_000
    dead_min_rows: int = 1_000
    dead_min_fraction: float = 0.2
    xid_min_left: int = 10_000_000
    sequence_max_fraction: float = 0.9
    long_query_seconds: float = 60.0
    idle_transaction_seconds: float = 60.0
    slow_query_ms: float = 20.0
    slow_query_calls: int = 100
    hot_min_updates: int = 100
    hot_min_fraction: float = 0.5
    hnsw_min_cached_fraction: float = 0.5


# PostgreSQL's wraparound limit as PgHero counts it.
_XID_MAX = 2_146_483_648


def _query(name: str) -> str:
    folder = importlib.resources.files("htm_analytics").joinpath("sql", "advisor")
    return folder.joinpath(f"{name}.sql").read_text("utf-8")


def _name(*parts: str) -> str:
    """A quoted, schema-qualified name for the statements handed to the user."""
    return sql.Identifier(*parts).as_string(None)


def _literal(value: Any) -> str:
    return sql.Literal(value).as_string(None)


def _size(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TB"  # pragma: no cover


def _age(seconds: float) -> str:
    if seconds < 120:
        return "1 second" if round(seconds) == 1 else f"{seconds:.0f} seconds"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 86400:.0f} days"


def split_statements(text: str) -> list[str]:
    """The statements of a finding's ``sql``, to run one at a time."""
    return [part.strip() for part in text.split(";\n") if part.strip().rstrip(";")]


def _finding(check: str, severity: str, obj: str, evidence: str, recommendation: str,
             statements: list[str]) -> dict[str, str]:
    return {"check": check, "severity": severity, "object": obj, "evidence": evidence,
            "recommendation": recommendation, "sql": ";\n".join(statements) + ";"}


@dataclass
class _Context:
    store: LongTermMemory
    limits: AdvisorThresholds
    indexes: pd.DataFrame
    tables: pd.DataFrame
    statistics_since: pd.Timestamp | None
    statistics_seconds: float | None
    flagged: set[str]  # indexes already named by a more specific finding


def _statistics_age(store: LongTermMemory) -> tuple[pd.Timestamp | None, float | None, str]:
    row = store.fetch_frame(_query("statistics_age")).iloc[0]
    since, what = row["stats_reset"], "statistics were reset"
    if pd.isna(since):
        since, what = row["database_created"], "the database was created (never reset)"
    if since is None or pd.isna(since):
        return None, None, "statistics never reset; their age is unknown to this user"
    since = pd.Timestamp(since)
    seconds = (pd.Timestamp(row["checked_at"]) - since).total_seconds()
    return since, seconds, f"{what} {_age(seconds)} ago, at {since:%Y-%m-%d %H:%M} UTC"


def advise(store: LongTermMemory, *, thresholds: AdvisorThresholds | None = None,
           ef_search_advice: Any = None) -> pd.DataFrame:
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
          the usage statistics began.
    """
    if thresholds is None:
        thresholds = AdvisorThresholds()
    if not isinstance(thresholds, AdvisorThresholds):
        raise ValidationError("must be an AdvisorThresholds", field="thresholds")
    store.index_statistics()  # flushes this process's pending counters
    since, seconds, statistics_note = _statistics_age(store)
    context = _Context(store, thresholds,
                       store.fetch_frame(_query("indexes")), store.fetch_frame(_query("tables")),
                       since, seconds, set())
    rows: list[dict[str, str]] = []
    for check in _CHECKS:
        rows.extend(check(context))
    if ef_search_advice is not None:
        rows.extend(_ef_search(ef_search_advice))
    rows.extend(_unused_indexes(context, statistics_note))
    frame = pd.DataFrame(rows, columns=list(FINDING_COLUMNS)).astype(FINDING_COLUMNS)
    if len(frame):
        frame = frame.sort_values(["severity", "check", "object"], key=lambda column: (
            column.map(_SEVERITY_ORDER) if column.name == "severity" else column),
            kind="stable").reset_index(drop=True)
    frame.attrs["statistics_since"] = since
    frame.attrs["statistics_note"] = statistics_note
    return frame


# -- indexes -----------------------------------------------------------------------------------

def _covers(covering: pd.Series, index: pd.Series) -> bool:
    """Whether ``covering`` answers every query ``index`` answers (PgHero's rule, plus
    operator classes): same table, method and predicate, and its leading key columns are
    the index's."""
    n = len(index["key_columns"])
    return (covering["method"] == index["method"] and covering["predicate"] == index["predicate"]
            and list(covering["key_columns"][:n]) == list(index["key_columns"])
            and _opclasses(covering)[:n] == _opclasses(index)
            and (index["method"] == "btree" or len(covering["key_columns"]) == n))


def _opclasses(index: pd.Series) -> list[str]:
    return str(index["operator_classes"]).strip("{}").split(",")


def _duplicate_indexes(context: _Context) -> Iterator[dict[str, str]]:
    valid = context.indexes[context.indexes["is_valid"]]
    for _, group in valid.groupby(["schema", "table"], sort=True):
        for _, index in group.iterrows():
            if index["is_unique"] or index["is_primary"]:
                continue
            for _, other in group.iterrows():
                if other["index"] == index["index"] or not _covers(other, index):
                    continue
                same = list(other["key_columns"]) == list(index["key_columns"])
                # Of two identical plain indexes, keep the one whose name sorts first.
                if same and not (other["is_unique"] or other["is_primary"]) \
                        and index["index"] < other["index"]:
                    continue
                context.flagged.add(index["index"])
                columns = ", ".join(index["key_columns"])
                relation = "duplicates" if same else "is a prefix of"
                yield _finding(
                    "duplicate_index", "warning", f"{index['schema']}.{index['index']}",
                    f"({columns}) {relation} {other['index']} "
                    f"({', '.join(other['key_columns'])}) on {index['table']}; "
                    f"{_size(index['size_bytes'])}, {index['idx_scan']:,} scans",
                    f"Drop it: {other['index']} answers the same lookups, and every insert "
                    "and non-HOT update of the table writes both.",
                    [f"DROP INDEX CONCURRENTLY IF EXISTS {_name(index['schema'], index['index'])}"])
                break


def _invalid_indexes(context: _Context) -> Iterator[dict[str, str]]:
    invalid = context.indexes[~context.indexes["is_valid"] & ~context.indexes["being_built"]]
    for _, index in invalid.iterrows():
        context.flagged.add(index["index"])
        yield _finding(
            "invalid_index", "critical", f"{index['schema']}.{index['index']}",
            f"marked invalid (a failed CREATE INDEX CONCURRENTLY or REINDEX); "
            f"{_size(index['size_bytes'])}, still written by every insert; "
            f"definition: {index['definition']}",
            "Drop it, fix what made the build fail (for a unique index: the duplicate rows), "
            "then create it again with the definition shown.",
            [f"DROP INDEX CONCURRENTLY IF EXISTS {_name(index['schema'], index['index'])}"])


def _unused_indexes(context: _Context, statistics_note: str) -> Iterator[dict[str, str]]:
    limits = context.limits
    candidates = context.indexes[
        context.indexes["is_valid"] & ~context.indexes["is_unique"]
        & ~context.indexes["is_primary"] & (context.indexes["idx_scan"] <= limits.unused_max_scans)
        & (context.indexes["size_bytes"] >= limits.unused_min_bytes)
        & ~context.indexes["index"].isin(context.flagged)]
    candidates = candidates.sort_values(["size_bytes", "index"], ascending=[False, True])
    if candidates.empty:
        return
    young = context.statistics_seconds is None or \
        context.statistics_seconds < limits.min_statistics_days * 86400
    if young:
        # Minutes of statistics say nothing about a weekly job: one question, not advice.
        names = [f"{r['schema']}.{r['index']}" for _, r in candidates.iterrows()]
        yield _finding(
            "unused_index", "info", f"{len(names)} indexes",
            f"{', '.join(names)}: at most {limits.unused_max_scans} scans each since "
            f"{statistics_note}; {_size(candidates['size_bytes'].sum())} in all",
            f"Statistics cover less than {limits.min_statistics_days:g} days: too little to "
            "call an index unused. Check again after a normal workload (the statement lists "
            "them with their scans).",
            ["SELECT schemaname, relname, indexrelname, idx_scan, "
             "pg_size_pretty(pg_relation_size(indexrelid)) FROM pg_stat_user_indexes "
             "WHERE indexrelname = ANY (" + _literal([r["index"] for _, r in
                                                     candidates.iterrows()]) + "::text[]) "
             "ORDER BY pg_relation_size(indexrelid) DESC"])
        return
    for _, index in candidates.iterrows():
        scans = "never scanned" if index["idx_scan"] == 0 else f"{index['idx_scan']} scans"
        yield _finding("unused_index", "warning", f"{index['schema']}.{index['index']}",
                       f"{scans} since {statistics_note}; {_size(index['size_bytes'])} "
                       f"({index['method']} on {index['table']})",
                       "Drop it: it costs a write on every insert and non-HOT update.",
                       [f"DROP INDEX CONCURRENTLY IF EXISTS "
                        f"{_name(index['schema'], index['index'])}"])


def _hot_updates(context: _Context) -> Iterator[dict[str, str]]:
    limits = context.limits
    nodes = context.tables[(context.tables["schema"] == "public")
                           & (context.tables["table"] == "nodes")]
    if nodes.empty:
        return
    row = nodes.iloc[0]
    updates = int(row["n_tup_upd"])
    if updates < limits.hot_min_updates:
        return
    share = int(row["n_tup_hot_upd"]) / updates
    if share >= limits.hot_min_fraction:
        return
    indexes = context.indexes[(context.indexes["schema"] == "public")
                              & (context.indexes["table"] == "nodes")]
    blocking = indexes[indexes["referenced_columns"].map(
        lambda columns: bool(set(columns) & set(RECALL_COLUMNS)))
        & ~indexes["is_unique"] & ~indexes["is_primary"]]
    named = ", ".join(f"{r['index']} ({r['idx_scan']:,} scans)" for _, r in blocking.iterrows())
    context.flagged.update(blocking["index"])
    statements = [f"DROP INDEX CONCURRENTLY IF EXISTS {_name('public', name)}"
                  for name in blocking["index"]]
    statements.append(f"ALTER TABLE {_name('public', 'nodes')} SET (fillfactor = 90)")
    yield _finding(
        "hot_updates", "warning", "public.nodes",
        f"{share:.0%} of {updates:,} updates of nodes were HOT; the others wrote an entry into "
        f"every index of nodes, HNSW included. Indexes on the columns a recall changes "
        f"({', '.join(RECALL_COLUMNS)}): {named or 'none'}",
        "Every recall rewrites access_count, last_accessed and in_working_memory; an index on "
        "any of them makes the update non-HOT. No query of the store reads these indexes. "
        f"Dropping them and leaving 10 % free space per page measured {MEASURED_RECALL_WRITE_GAIN}"
        " (docs/benchmarks.md). fillfactor applies to pages written from now on (VACUUM FULL "
        "or pg_repack rewrites the old ones).", statements)


# -- tables ------------------------------------------------------------------------------------

def _sequential_scans(context: _Context) -> Iterator[dict[str, str]]:
    limits = context.limits
    for _, table in context.tables.iterrows():
        scans = int(table["seq_scan"]) + int(table["idx_scan"])
        if table["n_live_tup"] < limits.seq_scan_min_rows or scans == 0:
            continue
        share = int(table["seq_scan"]) / scans
        if share <= limits.seq_scan_max_share:
            continue
        name = _name(table["schema"], table["table"])
        yield _finding(
            "sequential_scans", "warning", f"{table['schema']}.{table['table']}",
            f"{share:.0%} of {scans:,} scans were sequential on {int(table['n_live_tup']):,} "
            f"rows ({int(table['seq_tup_read']):,} rows read by them)",
            "A query filters this big table on columns no index covers: find it (EXPLAIN, or "
            "pg_stat_statements) and index its filter columns. The statement shows the scans; "
            "ANALYZE refreshes the planner's statistics first.",
            [f"ANALYZE {name}",
             "SELECT relname, seq_scan, seq_tup_read, idx_scan, n_live_tup "
             f"FROM pg_stat_user_tables WHERE relid = {_literal(name)}::regclass"])


def _dead_rows(context: _Context) -> Iterator[dict[str, str]]:
    limits = context.limits
    for _, table in context.tables.iterrows():
        dead, live = int(table["n_dead_tup"]), int(table["n_live_tup"])
        share = dead / (dead + live) if dead + live else 0.0
        if dead < limits.dead_min_rows or share < limits.dead_min_fraction:
            continue
        when = table["last_vacuumed"]
        vacuumed = "never vacuumed" if pd.isna(when) else f"last vacuumed {when:%Y-%m-%d %H:%M}"
        yield _finding(
            "dead_rows", "warning", f"{table['schema']}.{table['table']}",
            f"{dead:,} dead rows, {share:.0%} of the table; {vacuumed}",
            "Vacuum it so the space is reused and scans skip fewer dead rows; if autovacuum is "
            "off for it or cannot keep up, lower its autovacuum_vacuum_scale_factor.",
            [f"VACUUM (ANALYZE) {_name(table['schema'], table['table'])}"])


def _wraparound(context: _Context) -> Iterator[dict[str, str]]:
    for _, table in context.tables.iterrows():
        left = _XID_MAX - int(table["xid_age"])
        if left >= context.limits.xid_min_left:
            continue
        yield _finding(
            "xid_wraparound", "critical", f"{table['schema']}.{table['table']}",
            f"{left:,} transactions left before wraparound (oldest unfrozen transaction "
            f"{int(table['xid_age']):,} old)",
            "Freeze it now: at 1 million left PostgreSQL stops accepting writes. Check for "
            "long transactions or abandoned replication slots holding the horizon back.",
            [f"VACUUM (FREEZE, ANALYZE) {_name(table['schema'], table['table'])}"])


def _cache_hit(context: _Context) -> Iterator[dict[str, str]]:
    row = context.store.fetch_frame(_query("cache_hit")).iloc[0]
    hit = int(row["heap_hit"]) + int(row["index_hit"])
    total = hit + int(row["heap_read"]) + int(row["index_read"])
    if total < context.limits.cache_min_blocks or hit / total >= context.limits.cache_hit_min:
        return
    yield _finding(
        "cache_hit_ratio", "warning", "shared_buffers",
        f"{hit / total:.1%} of {total:,} table and index block reads came from shared buffers "
        f"(shared_buffers = {row['shared_buffers']})",
        f"Below {context.limits.cache_hit_min:.0%}, reads go to the OS cache or disk. Raise "
        "shared_buffers (about 25 % of RAM, in postgresql.conf, then restart) or add memory; "
        "the statement lists the tables read from outside shared buffers most.",
        ["SELECT relname, heap_blks_read, heap_blks_hit, idx_blks_read, idx_blks_hit "
         "FROM pg_statio_user_tables ORDER BY heap_blks_read + idx_blks_read DESC LIMIT 10"])


def _sequences(context: _Context) -> Iterator[dict[str, str]]:
    frame = context.store.fetch_frame(_query("sequences"))
    for _, seq in frame.iterrows():
        fraction = int(seq["last_value"]) / int(seq["max_value"])
        if fraction <= context.limits.sequence_max_fraction:
            continue
        sequence = _name(seq["sequence_schema"], seq["sequence"])
        statements = [f"ALTER SEQUENCE {sequence} AS bigint NO MAXVALUE"]
        if seq["column_type"] in ("smallint", "integer"):
            statements.insert(0, f"ALTER TABLE {_name(seq['schema'], seq['table'])} "
                                 f"ALTER COLUMN {_name(seq['column'])} TYPE bigint")
        yield _finding(
            "sequence_near_max", "critical" if fraction > 0.98 else "warning",
            f"{seq['sequence_schema']}.{seq['sequence']}",
            f"at {int(seq['last_value']):,} of {int(seq['max_value']):,} ({fraction:.1%}) for "
            f"{seq['table']}.{seq['column']} ({seq['column_type']})",
            "Widen the column and the sequence to bigint before inserts start failing (the "
            "column change rewrites the table: plan a maintenance window on big tables).",
            statements)


def _sessions(context: _Context) -> Iterator[dict[str, str]]:
    limits = context.limits
    for _, session in context.store.fetch_frame(_query("activity")).iterrows():
        where = f"pid {session['pid']}" + (f" ({session['application']})"
                                           if session["application"] else "")
        if session["state"] == "active" and session["query_seconds"] > limits.long_query_seconds:
            yield _finding(
                "long_running_query", "warning", where,
                f"running for {_age(session['query_seconds'])}: {session['query']}",
                "Find out why (EXPLAIN it, look for locks it waits on); cancel it if it is "
                "stuck. A statement_timeout bounds such queries.",
                [f"SELECT pg_cancel_backend({int(session['pid'])})"])
        elif session["state"] != "active" \
                and session["state_seconds"] > limits.idle_transaction_seconds:
            yield _finding(
                "idle_in_transaction", "warning", where,
                f"idle inside a transaction for {_age(session['state_seconds'])}; last "
                f"statement: {session['query']}",
                "An open transaction holds locks and stops vacuum from removing dead rows "
                "anywhere. Fix the client (commit or roll back); end this session; set "
                "idle_in_transaction_session_timeout.",
                [f"SELECT pg_terminate_backend({int(session['pid'])})"])


def _slow_queries(context: _Context) -> Iterator[dict[str, str]]:
    available = bool(context.store.fetch_frame(_query("statements_available")).iloc[0, 0])
    if not available:
        yield _finding(
            "slow_queries", "info", "pg_stat_statements",
            "pg_stat_statements is not loaded here, so slow statements cannot be listed",
            "Add pg_stat_statements to shared_preload_libraries (restart), then create the "
            "extension in this database.",
            ["CREATE EXTENSION IF NOT EXISTS pg_stat_statements"])
        return
    limits = context.limits
    slow = context.store.fetch_frame(_query("slow_queries"), {
        "slow_ms": limits.slow_query_ms, "min_calls": limits.slow_query_calls})
    for _, statement in slow.iterrows():
        yield _finding(
            "slow_queries", "warning", f"queryid {statement['queryid']}",
            f"{statement['mean_ms']:.1f} ms on average over {statement['calls']:,} calls "
            f"({statement['total_ms'] / 1000:.1f} s in all): {statement['query']}",
            "EXPLAIN (ANALYZE, BUFFERS) it with typical parameters and index what it filters.",
            ["SELECT query, calls, mean_exec_time FROM pg_stat_statements "
             f"WHERE queryid = {int(statement['queryid'])}"])


# -- vectors -----------------------------------------------------------------------------------

def _hnsw_memory(context: _Context) -> Iterator[dict[str, str]]:
    frame = context.store.fetch_frame(_query("hnsw_indexes"))
    residency: dict[str, float] = {}
    if not frame.empty and context.store.fetch_frame(
            "SELECT to_regclass('pg_buffercache') IS NOT NULL").iloc[0, 0]:
        cached = context.store.fetch_frame(_query("hnsw_residency"))
        residency = dict(zip(cached["index"], cached["cached_pages"] / cached["pages"]))
    for _, index in frame.iterrows():
        name = _name(index["schema"], index["index"])
        size, buffers = int(index["size_bytes"]), int(index["shared_buffers_bytes"])
        if size > buffers:
            yield _finding(
                "hnsw_cache", "warning", f"{index['schema']}.{index['index']}",
                f"{_size(size)} index, shared_buffers {_size(buffers)}",
                "Searches walk the graph in random order: pages outside shared buffers come "
                "from the OS cache or disk. Raise shared_buffers above the index size, or "
                "index at the native dimension (smaller).",
                [f"SELECT pg_size_pretty(pg_relation_size({_literal(name)}::regclass)), "
                 "current_setting('shared_buffers')"])
        elif index["index"] in residency and residency[index["index"]] \
                < context.limits.hnsw_min_cached_fraction:
            yield _finding(
                "hnsw_cache", "info", f"{index['schema']}.{index['index']}",
                f"{residency[index['index']]:.0%} of the {_size(size)} index is in shared "
                f"buffers (pg_buffercache); shared_buffers {_size(buffers)} would hold it",
                "The first searches after a restart read the graph from disk; prewarm it.",
                ["CREATE EXTENSION IF NOT EXISTS pg_prewarm",
                 f"SELECT pg_prewarm({_literal(name)}::regclass)"])
        dimension = int(index["dimension"]) if pd.notna(index["dimension"]) else 0
        # One graph element: the vector (4d + 8 bytes), its layer-0 neighbours (2m candidates
        # of 16 bytes) and about 100 bytes of header (pgvector's hnsw.h).
        needed = int(index["indexed_rows"]) * (4 * dimension + 8 + 32 * int(index["m"]) + 100)
        if needed > int(index["maintenance_work_mem_bytes"]):
            megabytes = -(-needed * 5 // 4 // 2**20)  # a quarter more as margin
            yield _finding(
                "hnsw_build_memory", "warning", f"{index['schema']}.{index['index']}",
                f"a rebuild needs about {_size(needed)} for {int(index['indexed_rows']):,} "
                f"vectors of {dimension} dimensions (m={index['m']}); maintenance_work_mem is "
                f"{index['maintenance_work_mem']}",
                "A graph that does not fit is built far slower (pgvector notes 'hnsw graph no "
                "longer fits into maintenance_work_mem'). Raise it for the rebuild's session.",
                [f"SET maintenance_work_mem = {_literal(f'{megabytes}MB')}",
                 f"REINDEX INDEX CONCURRENTLY {name}"])


def _vectors(context: _Context) -> Iterator[dict[str, str]]:
    if not (context.tables["table"] == "nodes").any():
        return
    dimensions = context.store.fetch_frame(_query("vector_dimensions"))
    for _, row in dimensions.iterrows():
        dimension = int(row["dimension"])
        if row["has_native_index"] or dimension >= 2000:
            continue
        yield _finding(
            "padded_vectors", "warning", "public.nodes",
            f"{int(row['vectors']):,} vectors of {dimension} dimensions are searched through "
            "the reference schema's index on vectors zero-padded to 2000",
            f"Index them at their own dimension: 2-5x faster builds and searches (README); "
            f"searches use it automatically (LongTermMemory.create_native_index({dimension})).",
            [f"CREATE INDEX CONCURRENTLY IF NOT EXISTS "
             f"{_name(f'idx_nodes_embedding_{dimension}')} ON {_name('public', 'nodes')} "
             f"USING hnsw ((subvector(embedding, 1, {dimension})::vector({dimension})) "
             f"vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
             f"WHERE embedding_dimension = {dimension}"])
    models = context.store.embedding_models()
    if len(models) > 1:
        described = "; ".join(
            f"{'unknown model' if pd.isna(r.provider) else f'{r.provider}/{r.model}'} "
            f"({r.dimension}-d): {r.nodes:,}" for r in models.itertuples())
        yield _finding(
            "mixed_embeddings", "warning", "public.nodes",
            f"stored vectors come from {len(models)} models or dimensions: {described}",
            "Vectors of different models are not comparable: a search with one model ranks "
            "the others' memories at random. Re-embed them with one model (the statement "
            "lists the memories per model).",
            ["SELECT m.provider, m.model, n.embedding_dimension, count(*) FROM nodes n "
             "LEFT JOIN node_embedding_models m ON m.node_id = n.id "
             "WHERE n.embedding IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 4 DESC"])


def _ef_search(advice: Any) -> Iterator[dict[str, str]]:
    chosen, target = advice.ef_search, advice.target_recall
    in_use = DEFAULT_EF_SEARCH
    evidence = f"{advice.evidence}; searches of this toolkit run at ef_search {in_use} " \
               "(raised to the result limit)"
    if chosen is None:
        yield _finding(
            "ef_search", "warning", advice.index,
            evidence, f"No swept setting reached recall {target:g}: rebuild the index with a "
                      "larger m or ef_construction (htm-analytics bench build).",
            ["SELECT indexrelid::regclass, pg_size_pretty(pg_relation_size(indexrelid)) "
             "FROM pg_index WHERE indexrelid = " + _literal(advice.index) + "::regclass"])
        return
    if chosen == in_use:
        return
    severity = "warning" if chosen > in_use else "info"
    why = (f"ef_search {in_use} misses the target recall {target:g}" if chosen > in_use else
           f"ef_search {chosen} already reaches recall {target:g}, faster than {in_use}")
    yield _finding(
        "ef_search", severity, advice.index, evidence,
        f"{why}. Clients that use the server setting (the reference Ruby code) get it from "
        "the database default; per session, SET hnsw.ef_search.",
        [f"SET hnsw.ef_search = {int(chosen)}",
         f"ALTER DATABASE {_name(advice.database)} SET hnsw.ef_search = {int(chosen)}"])


_CHECKS: tuple[Callable[[_Context], Iterator[dict[str, str]]], ...] = (
    _invalid_indexes, _duplicate_indexes, _hot_updates, _sequential_scans, _dead_rows,
    _wraparound, _cache_hit, _sequences, _sessions, _slow_queries, _hnsw_memory, _vectors)

