"""Index checks: duplicate, invalid and unused indexes, and the indexes that block HOT
updates of the recalled rows."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from ..store import quote_identifier, quote_literal
from ._common import (
    RECALL_COLUMNS,
    Context,
    finding,
    size_text,
)

# Measured in docs/benchmarks.md (bench_htm.py): recall writes after dropping the recall
# columns' indexes and setting fillfactor = 90 on nodes.
MEASURED_RECALL_WRITE_GAIN = "35x cheaper recall writes, HTM.recall 8.7x faster"


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


def duplicate_indexes(context: Context) -> Iterator[dict[str, str]]:
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
                context.flagged.add((index["schema"], index["index"]))
                columns = ", ".join(index["key_columns"])
                relation = "duplicates" if same else "is a prefix of"
                yield finding(
                    "duplicate_index", "warning", f"{index['schema']}.{index['index']}",
                    f"({columns}) {relation} {other['index']} "
                    f"({', '.join(other['key_columns'])}) on {index['table']}; "
                    f"{size_text(index['size_bytes'])}, {index['idx_scan']:,} scans",
                    f"Drop it: {other['index']} answers the same lookups, and every insert "
                    "and non-HOT update of the table writes both.",
                    ["DROP INDEX CONCURRENTLY IF EXISTS "
                     f"{quote_identifier(index['schema'], index['index'])}"])
                break


def invalid_indexes(context: Context) -> Iterator[dict[str, str]]:
    invalid = context.indexes[~context.indexes["is_valid"] & ~context.indexes["being_built"]]
    for _, index in invalid.iterrows():
        context.flagged.add((index["schema"], index["index"]))
        yield finding(
            "invalid_index", "critical", f"{index['schema']}.{index['index']}",
            f"marked invalid (a failed CREATE INDEX CONCURRENTLY or REINDEX); "
            f"{size_text(index['size_bytes'])}, still written by every insert; "
            f"definition: {index['definition']}",
            "Drop it, fix what made the build fail (for a unique index: the duplicate rows), "
            "then create it again with the definition shown.",
            ["DROP INDEX CONCURRENTLY IF EXISTS "
             f"{quote_identifier(index['schema'], index['index'])}"])


def unused_candidates(context: Context) -> pd.DataFrame:
    """The indexes the unused check reports: valid, not a key, scanned at most
    ``unused_max_scans`` times, not flagged by another check; biggest first."""
    limits, frame = context.limits, context.indexes
    # By schema and name: an index flagged in one schema says nothing of its namesake in
    # another.
    flagged = pd.Series([(schema, name) in context.flagged for schema, name in
                         zip(frame["schema"], frame["index"])], index=frame.index, dtype=bool)
    candidates = frame[
        frame["is_valid"] & ~frame["is_unique"] & ~frame["is_primary"]
        & (frame["idx_scan"] <= limits.unused_max_scans)
        & (frame["size_bytes"] >= limits.unused_min_bytes) & ~flagged]
    return candidates.sort_values(["size_bytes", "index"], ascending=[False, True])


def unused_indexes(context: Context, statistics_note: str) -> Iterator[dict[str, str]]:
    limits = context.limits
    candidates = unused_candidates(context)
    if candidates.empty:
        return
    young = context.statistics_seconds is None or \
        context.statistics_seconds < limits.min_statistics_days * 86400
    if young:
        # Minutes of statistics say nothing about a weekly job: one question, not advice.
        names = [f"{r['schema']}.{r['index']}" for _, r in candidates.iterrows()]
        yield finding(
            "unused_index", "info", f"{len(names)} indexes",
            f"{', '.join(names)}: at most {limits.unused_max_scans} scans each since "
            f"{statistics_note}; {size_text(candidates['size_bytes'].sum())} in all",
            f"Statistics cover less than {limits.min_statistics_days:g} days: too little to "
            "call an index unused. Check again after a normal workload (the statement lists "
            "them with their scans).",
            ["SELECT schemaname, relname, indexrelname, idx_scan, "
             "pg_size_pretty(pg_relation_size(indexrelid)) FROM pg_stat_user_indexes "
             "WHERE (schemaname, indexrelname) IN (" + ", ".join(
                 f"({quote_literal(r['schema'])}, {quote_literal(r['index'])})"
                 for _, r in candidates.iterrows()) + ") "
             "ORDER BY pg_relation_size(indexrelid) DESC"])
        return
    for _, index in candidates.iterrows():
        scans = "never scanned" if index["idx_scan"] == 0 else f"{index['idx_scan']} scans"
        yield finding("unused_index", "warning", f"{index['schema']}.{index['index']}",
                       f"{scans} since {statistics_note}; {size_text(index['size_bytes'])} "
                       f"({index['method']} on {index['table']})",
                       "Drop it: it costs a write on every insert and non-HOT update.",
                       [f"DROP INDEX CONCURRENTLY IF EXISTS "
                        f"{quote_identifier(index['schema'], index['index'])}"])


def hot_updates(context: Context) -> Iterator[dict[str, str]]:
    limits = context.limits
    nodes = context.tables[(context.tables["schema"] == "public")
                           & (context.tables["table"] == "nodes")]
    if nodes.empty:
        return
    row = nodes.iloc[0]
    updates = int(row["n_tup_upd"])
    if updates == 0 or updates < limits.hot_min_updates:  # no share of nothing
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
    context.flagged.update(("public", name) for name in blocking["index"])
    statements = [f"DROP INDEX CONCURRENTLY IF EXISTS {quote_identifier('public', name)}"
                  for name in blocking["index"]]
    statements.append(f"ALTER TABLE {quote_identifier('public', 'nodes')} SET (fillfactor = 90)")
    yield finding(
        "hot_updates", "warning", "public.nodes",
        f"{share:.0%} of {updates:,} updates of nodes were HOT; the others wrote an entry into "
        f"every index of nodes, HNSW included. Indexes on the columns a recall changes "
        f"({', '.join(RECALL_COLUMNS)}): {named or 'none'}",
        "Every recall rewrites access_count, last_accessed and in_working_memory; an index on "
        "any of them makes the update non-HOT. No query of the store reads these indexes. "
        f"Dropping them and leaving 10 % free space per page measured {MEASURED_RECALL_WRITE_GAIN}"
        " (docs/benchmarks.md). fillfactor applies to pages written from now on (VACUUM FULL "
        "or pg_repack rewrites the old ones).", statements)
