"""Table, sequence and session checks, after PgHero's."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pandas as pd

from ..store import STATEMENT_MARKER, quote_identifier
from ._common import (
    TOOLKIT_CURSOR,
    Context,
    age_text,
    finding,
    query_text,
    regclass,
    size_text,
)

# PostgreSQL's wraparound limit as PgHero counts it.
XID_MAX = 2_146_483_648


# The copy of the vectors a bench build makes (store/tuning_session.py), named after its
# process: a finished, failed or stopped build drops it, so one still here was left by a
# build killed outright (SIGKILL, a crash), or belongs to one running now.
_BENCH_COPY = re.compile(r"htm_analytics_bench_\d+_[0-9a-f]{6}")


def bench_leftovers(context: Context) -> Iterator[dict[str, str]]:
    left = context.tables[[bool(_BENCH_COPY.fullmatch(str(name)))
                           for name in context.tables["table"]]]
    if not len(left):
        return
    names = [quote_identifier(schema, table) for schema, table in zip(left["schema"],
                                                                      left["table"])]
    yield finding(
        "bench_leftovers", "warning", ", ".join(f"{schema}.{table}" for schema, table in
                                                zip(left["schema"], left["table"])),
        f"{len(left)} copies of the vectors that htm-analytics bench build "
        f"(benchmark_index_build) makes, {size_text(int(left['total_bytes'].sum()))} with "
        "their indexes",
        "A build drops its copy when it ends, fails or is stopped (Ctrl-C, SIGTERM): these "
        "were left by builds killed outright. Drop them, unless a build is running now (its "
        "process id is in the name).",
        [f"DROP TABLE IF EXISTS {name}" for name in names])


def sequential_scans(context: Context) -> Iterator[dict[str, str]]:
    limits = context.limits
    for _, table in context.tables.iterrows():
        scans = int(table["seq_scan"]) + int(table["idx_scan"])
        if table["n_live_tup"] < limits.seq_scan_min_rows or scans == 0:
            continue
        share = int(table["seq_scan"]) / scans
        if share <= limits.seq_scan_max_share:
            continue
        name = quote_identifier(table["schema"], table["table"])
        yield finding(
            "sequential_scans", "warning", f"{table['schema']}.{table['table']}",
            f"{share:.0%} of {scans:,} scans were sequential on {int(table['n_live_tup']):,} "
            f"rows ({int(table['seq_tup_read']):,} rows read by them)",
            "A query filters this big table on columns no index covers: find it (EXPLAIN, or "
            "pg_stat_statements) and index its filter columns. The statement shows the scans; "
            "ANALYZE refreshes the planner's statistics first.",
            [f"ANALYZE {name}",
             "SELECT relname, seq_scan, seq_tup_read, idx_scan, n_live_tup "
             "FROM pg_stat_user_tables WHERE relid = "
             f"{regclass(table['schema'], table['table'])}"])


def dead_rows(context: Context) -> Iterator[dict[str, str]]:
    limits = context.limits
    for _, table in context.tables.iterrows():
        dead, live = int(table["n_dead_tup"]), int(table["n_live_tup"])
        share = dead / (dead + live) if dead + live else 0.0
        if dead < limits.dead_min_rows or share < limits.dead_min_fraction:
            continue
        when = table["last_vacuumed"]
        vacuumed = "never vacuumed" if pd.isna(when) else f"last vacuumed {when:%Y-%m-%d %H:%M}"
        yield finding(
            "dead_rows", "warning", f"{table['schema']}.{table['table']}",
            f"{dead:,} dead rows, {share:.0%} of the table; {vacuumed}",
            "Vacuum it so the space is reused and scans skip fewer dead rows; if autovacuum is "
            "off for it or cannot keep up, lower its autovacuum_vacuum_scale_factor.",
            [f"VACUUM (ANALYZE) {quote_identifier(table['schema'], table['table'])}"])


def wraparound(context: Context) -> Iterator[dict[str, str]]:
    for _, table in context.tables.iterrows():
        left = XID_MAX - int(table["xid_age"])
        if left >= context.limits.xid_min_left:
            continue
        yield finding(
            "xid_wraparound", "critical", f"{table['schema']}.{table['table']}",
            f"{left:,} transactions left before wraparound (oldest unfrozen transaction "
            f"{int(table['xid_age']):,} old)",
            "Freeze it now: at 1 million left PostgreSQL stops accepting writes. Check for "
            "long transactions or abandoned replication slots holding the horizon back.",
            [f"VACUUM (FREEZE, ANALYZE) {quote_identifier(table['schema'], table['table'])}"])


def cache_hit(context: Context) -> Iterator[dict[str, str]]:
    row = context.store.fetch_frame(query_text("cache_hit")).iloc[0]
    hit = int(row["heap_hit"]) + int(row["index_hit"])
    total = hit + int(row["heap_read"]) + int(row["index_read"])
    if total < context.limits.cache_min_blocks or hit / total >= context.limits.cache_hit_min:
        return
    yield finding(
        "cache_hit_ratio", "warning", "shared_buffers",
        f"{hit / total:.1%} of {total:,} table and index block reads came from shared buffers "
        f"(shared_buffers = {row['shared_buffers']})",
        f"Below {context.limits.cache_hit_min:.0%}, reads go to the OS cache or disk. Raise "
        "shared_buffers (about 25 % of RAM, in postgresql.conf, then restart) or add memory; "
        "the statement lists the tables read from outside shared buffers most.",
        ["SELECT relname, heap_blks_read, heap_blks_hit, idx_blks_read, idx_blks_hit "
         "FROM pg_statio_user_tables ORDER BY heap_blks_read + idx_blks_read DESC LIMIT 10"])


def sequences(context: Context) -> Iterator[dict[str, str]]:
    frame = context.store.fetch_frame(query_text("sequences"))
    for _, seq in frame.iterrows():
        last, low, high = int(seq["last_value"]), int(seq["min_value"]), int(seq["max_value"])
        descending = int(seq["increment_by"]) < 0
        # The share of its range used, from the end it starts at towards the one it runs to:
        # a descending sequence runs out at its minimum (and last / max divided by a
        # maximum of 0).
        fraction = (high - last if descending else last - low) / max(high - low, 1)
        if fraction <= context.limits.sequence_max_fraction:
            continue
        limit = low if descending else high
        sequence = quote_identifier(seq["sequence_schema"], seq["sequence"])
        statements = [f"ALTER SEQUENCE {sequence} AS bigint "
                      f"{'NO MINVALUE' if descending else 'NO MAXVALUE'}"]
        if seq["column_type"] in ("smallint", "integer"):
            statements.insert(0, f"ALTER TABLE {quote_identifier(seq['schema'], seq['table'])} "
                                 f"ALTER COLUMN {quote_identifier(seq['column'])} TYPE bigint")
        yield finding(
            "sequence_near_max", "critical" if fraction > 0.98 else "warning",
            f"{seq['sequence_schema']}.{seq['sequence']}",
            f"at {last:,} of {limit:,} ({fraction:.1%}) for "
            f"{seq['table']}.{seq['column']} ({seq['column_type']})",
            "Widen the column and the sequence to bigint before inserts start failing (the "
            "column change rewrites the table: plan a maintenance window on big tables).",
            statements)


def sessions(context: Context) -> Iterator[dict[str, str]]:
    limits = context.limits
    for _, session in context.store.fetch_frame(query_text("activity")).iterrows():
        where = f"pid {session['pid']}" + (f" ({session['application']})"
                                           if session["application"] else "")
        if session["state"] == "active" and session["query_seconds"] > limits.long_query_seconds:
            yield finding(
                "long_running_query", "warning", where,
                f"running for {age_text(session['query_seconds'])}: {session['query']}",
                "Find out why (EXPLAIN it, look for locks it waits on); cancel it if it is "
                "stuck. A statement_timeout bounds such queries.",
                [f"SELECT pg_cancel_backend({int(session['pid'])})"])
        elif session["state"] != "active" \
                and session["state_seconds"] > limits.idle_transaction_seconds:
            yield finding(
                "idle_in_transaction", "warning", where,
                f"idle inside a transaction for {age_text(session['state_seconds'])}; last "
                f"statement: {session['query']}",
                "An open transaction holds locks and stops vacuum from removing dead rows "
                "anywhere. Fix the client (commit or roll back); end this session; set "
                "idle_in_transaction_session_timeout.",
                [f"SELECT pg_terminate_backend({int(session['pid'])})"])


def slow_queries(context: Context) -> Iterator[dict[str, str]]:
    available = bool(context.store.fetch_frame(query_text("statements_available")).iloc[0, 0])
    if not available:
        yield finding(
            "slow_queries", "info", "pg_stat_statements",
            "pg_stat_statements is not loaded here, so slow statements cannot be listed",
            "Add pg_stat_statements to shared_preload_libraries (restart), then create the "
            "extension in this database.",
            ["CREATE EXTENSION IF NOT EXISTS pg_stat_statements"])
        return
    limits = context.limits
    slow = context.store.fetch_frame(query_text("slow_queries"), {
        "slow_ms": limits.slow_query_ms, "min_calls": limits.slow_query_calls,
        "marker": STATEMENT_MARKER, "cursor_prefix": TOOLKIT_CURSOR})
    own = slow[slow["toolkit"]]
    for _, statement in slow[~slow["toolkit"]].iterrows():
        yield finding(
            "slow_queries", "warning", f"queryid {statement['queryid']}",
            f"{statement['mean_ms']:.1f} ms on average (standard deviation "
            f"{statement['stddev_ms']:.1f} ms) over {statement['calls']:,} calls "
            f"({statement['total_ms'] / 1000:.1f} s in all): {statement['query']}",
            "EXPLAIN (ANALYZE, BUFFERS) it with typical parameters and index what it filters.",
            ["SELECT query, calls, mean_exec_time FROM pg_stat_statements "
             f"WHERE queryid = {int(statement['queryid'])}"])
    if len(own):
        # The toolkit's analyses read the whole memory: slow by nature, not the application's.
        count = int(own["of_its_kind"].iloc[0])
        yield finding(
            "slow_queries", "info", "htm_analytics",
            f"{count:,} slow statement{'s' if count != 1 else ''} of this toolkit's own "
            f"analyses (marked {STATEMENT_MARKER}) left out of the slow statements; the one "
            f"that took most time, {own['total_ms'].iloc[0] / 1000:.1f} s in all: "
            f"{own['query'].iloc[0]}",
            "Nothing for the application to index: these are whole-memory reads of reports, "
            "checks and sweeps. Where they compete with the agents' queries, run the analyses "
            "on a replica (docs/scaling.md).",
            ["SELECT queryid, calls, mean_exec_time, query FROM pg_stat_statements "
             f"WHERE strpos(query, '{STATEMENT_MARKER}') > 0 "
             f"OR strpos(query, '{TOOLKIT_CURSOR}') > 0 ORDER BY total_exec_time DESC"])
