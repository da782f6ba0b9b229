"""The statements of a history: pg_stat_statements' evictions between samples told per
period, each statement's text and whether the toolkit ran it, and a statement first run (or
reset) since the last sample counted whole."""

from __future__ import annotations

import duckdb
import pandas as pd
import psycopg
import pytest
from history_helpers import collect_read_only, finding_statements

from htm_analytics import LongTermMemory
from htm_analytics.advisor.collect import collect_sample
from htm_analytics.advisor.history import drift_findings, history


def test_evictions_between_samples_are_told_per_period(history_reader_url, tmp_path):
    """pg_stat_statements full: its evictions between two samples (or since its reset, when
    the count went back) flag the period's statements and give an info finding; samples
    that do not say (a server before PostgreSQL 14, a history before version 5) flag
    nothing."""
    path = tmp_path / "history.duckdb"
    for _ in range(4):
        collect_read_only(history_reader_url, path)

    def evictions(*counts: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
        with duckdb.connect(str(path)) as con:
            for sample_id, count in enumerate(counts, start=1):
                con.execute("UPDATE samples SET statements_evicted = ? WHERE sample_id = ?",
                            [count, sample_id])
        frames = history(path)
        found = drift_findings(frames)
        return frames, found[found["check"] == "statements_evicted"]

    frames, found = evictions(None, 5, 5, 12)
    assert frames.samples["entries_evicted"].tolist() == [False, False, False, True]
    assert frames.samples["statements_evicted"].tolist() == [None, 5, 5, 12]
    periods = frames.statements.groupby("sample_id")["entries_evicted"].agg(["all", "any"])
    assert periods.loc[4].all() and not periods.drop(4)["any"].any()
    assert found[["severity", "object"]].values.tolist() == [["info", "pg_stat_statements"]]
    assert found["evidence"].iloc[0].startswith(
        "evicted its least-used entries 7 times since sample 3 (")
    assert finding_statements(found["sql"].iloc[0]) == [
        "SHOW pg_stat_statements.max", "SELECT dealloc, stats_reset FROM pg_stat_statements_info"]
    # Reset in between (the count went back): its evictions since the reset.
    frames, found = evictions(None, 5, 12, 3)
    assert frames.samples["entries_evicted"].tolist() == [False, False, True, True]
    assert "entries 3 times since sample 3" in found["evidence"].iloc[0]
    # None in the last period, or a last sample that does not say: nothing to tell.
    for counts in [(1, 5, 12, 12), (1, 5, 12, None), (None,) * 4]:
        frames, found = evictions(*counts)
        assert found.empty and not frames.samples["entries_evicted"].iloc[-1]


def test_history_statements_carry_their_text_and_tell_the_toolkits_own(history_reader_url,
                                                                       tmp_path,
                                                                       statement_statistics):
    if not statement_statistics.recorded:
        pytest.skip("the test server does not preload pg_stat_statements")
    path = tmp_path / "history.duckdb"
    application = "SELECT name FROM robots WHERE id = $1"

    def workload(calls: int) -> None:
        with psycopg.connect(history_reader_url, autocommit=True) as conn:
            for _ in range(calls):
                conn.execute("SELECT name FROM robots WHERE id = %s", [1]).fetchall()

    def evictions() -> int:
        with psycopg.connect(history_reader_url) as conn:
            return conn.execute("SELECT dealloc FROM pg_stat_statements_info").fetchone()[0]

    evicted = evictions()
    with LongTermMemory(history_reader_url, read_only=True) as store:
        workload(2)
        collect_sample(store, path, recall_queries=5, statements=1000)
        workload(3)
        collect_sample(store, path, recall_queries=5, statements=1000)
    # A server full of other tests' statements (pg_stat_statements.max) evicts entries,
    # whose counts then start again: the counts are exact only when none went meanwhile.
    exact = evictions() == evicted
    statements = history(path).statements
    assert list(statements.columns[:5]) == ["sample_id", "collected_at", "queryid", "query",
                                            "toolkit"]
    assert statements["query"].notna().all() and statements["toolkit"].dtype == bool
    by_text = statements.set_index("query")
    assert by_text.loc[application, "calls"] == 3 or not exact
    assert not by_text.loc[application, "toolkit"]
    # collect's own reading of the index statistics is one of the toolkit's analyses
    own = statements[statements["query"].str.contains("FROM pg_stat_user_indexes")]
    assert len(own) == 1 and own["toolkit"].all()
    assert own["calls"].iloc[0] == 1 or not exact
    assert by_text["toolkit"].sum() < len(by_text)


def test_a_statement_started_since_the_last_sample_shows_its_whole_count(
        history_reader_url, db, tmp_path, statement_statistics):
    # pg_stat_statements 1.11 (PostgreSQL 17) dates each entry (stats_since): a statement
    # first run after the previous sample is counted in its first period instead of being
    # left out, and one whose counters started again is counted from zero.
    if not statement_statistics.dated:
        pytest.skip("this server's pg_stat_statements does not record or date its entries")
    path = tmp_path / "history.duckdb"
    again = "SELECT name FROM robots WHERE id = $1"
    new = "SELECT count(*) FROM tags WHERE id = $1"

    def run(statement: str, calls: int) -> None:
        with psycopg.connect(history_reader_url, autocommit=True) as conn:
            for _ in range(calls):
                conn.execute(statement.replace("$1", "%s"), [1]).fetchall()

    with LongTermMemory(history_reader_url, read_only=True) as store:
        run(again, 2)
        collect_sample(store, path, recall_queries=5, statements=1000)
        queryid = db.execute(
            "SELECT queryid FROM pg_stat_statements WHERE query = %s AND dbid = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())",
            [again]).fetchone()[0]
        db.execute("SELECT pg_stat_statements_reset(0, 0, %s)", [queryid])
        run(again, 5)
        run(new, 4)
        collect_sample(store, path, recall_queries=5, statements=1000)
    statements = history(path).statements.set_index("query")
    assert statements.loc[new, ["calls", "counters_reset"]].tolist() == [4, False]
    assert statements.loc[again, ["calls", "counters_reset"]].tolist() == [5, True]
