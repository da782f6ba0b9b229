"""Timestamps at ``infinity`` and ``-infinity``: PostgreSQL holds them, Python's datetime does
not. They read as Python's latest and earliest datetimes, live and from a snapshot; the
periods of trends and growth leave them out and count them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import htm_analytics as ha
from htm_analytics.store.timestamps import register_infinite_timestamps

LATEST_UTC = dt.datetime.max.replace(tzinfo=dt.UTC)
EARLIEST_UTC = dt.datetime.min.replace(tzinfo=dt.UTC)
INFINITIES = "SELECT 'infinity'::timestamptz, '-infinity'::timestamptz, " \
             "'infinity'::timestamp, '-infinity'::timestamp"


@pytest.fixture(scope="module")
def connections(server_url: str) -> Iterator[dict[str, psycopg.Connection[Any]]]:
    """Two connections in UTC: psycopg's own loaders, and with the infinities registered."""
    with psycopg.connect(server_url, autocommit=True) as plain, \
            psycopg.connect(server_url, autocommit=True) as ours:
        for conn in (plain, ours):
            conn.execute("SET TimeZone = 'UTC'")
        register_infinite_timestamps(ours)
        yield {"plain": plain, "ours": ours}


@pytest.mark.parametrize("binary", [False, True])
def test_infinities_read_as_the_extremes(connections: dict[str, Any], binary: bool) -> None:
    row = connections["ours"].cursor(binary=binary).execute(INFINITIES).fetchone()
    assert row == (LATEST_UTC, EARLIEST_UTC, dt.datetime.max, dt.datetime.min)
    with pytest.raises(psycopg.DataError):  # what psycopg alone does
        connections["plain"].cursor(binary=binary).execute(INFINITIES).fetchone()


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moment=st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                           timezones=st.just(dt.UTC)),
       binary=st.booleans())
def test_finite_timestamps_read_as_psycopg_reads_them(connections: dict[str, Any],
                                                      moment: dt.datetime,
                                                      binary: bool) -> None:
    query = "SELECT %s::timestamptz, %s::timestamp"
    values = (moment, moment.replace(tzinfo=None))
    read = {name: conn.cursor(binary=binary).execute(query, values).fetchone()
            for name, conn in connections.items()}
    assert read["ours"] == read["plain"] == values


# Rows set to infinity (id % 5 == 1) and to -infinity (id % 5 == 2) in every timestamp column.
_COLUMNS = {"nodes": ("created_at", "updated_at", "last_accessed"),
            "robots": ("created_at", "last_active"),
            "robot_nodes": ("first_remembered_at", "last_remembered_at", "created_at",
                            "updated_at"),
            "tags": ("created_at",), "node_tags": ("created_at",),
            "memory_events": ("occurred_at",)}


@pytest.fixture
def infinite_memory(ltm: ha.LongTermMemory, database_url: str) -> ha.LongTermMemory:
    rng = np.random.default_rng(0)
    for robot in ("a", "b"):
        robot_id = ltm.register_robot(robot)
        for i in range(12):  # b remembers what a did: shared and repeated remembers
            node = ltm.add(content=f"memory {i} about {'xyz'[i % 3]}", robot_id=robot_id,
                           embedding=rng.normal(size=8))
            ltm.add_tag(node_id=node["node_id"], tag=f"topic:{'xy'[i % 2]}")
    with psycopg.connect(database_url, autocommit=True) as conn:
        for table, columns in _COLUMNS.items():
            for column in columns:
                for value, remainder in (("infinity", 1), ("-infinity", 2)):
                    conn.execute(f"UPDATE {table} SET {column} = %s "  # our names
                                 f"WHERE id %% 5 = %s", (value, remainder))
    return ltm


def _count(url: str, query: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute(query).fetchone()[0])


def test_every_read_takes_infinite_timestamps(infinite_memory: ha.LongTermMemory,
                                              database_url: str, tmp_path: Path) -> None:
    store = infinite_memory
    assert store.describe_nodes([1, 2, 3]).set_index("id")["created_at"].tolist() == \
        [LATEST_UTC, EARLIEST_UTC, store.describe_nodes([3])["created_at"].iloc[0]]

    untimed_events = _count(database_url, "SELECT count(*) FROM memory_events "
                                          "WHERE kind = 'remember' AND NOT isfinite(occurred_at)")
    assert untimed_events > 0
    remembers = _count(database_url, "SELECT sum(remember_count) FROM robot_nodes")
    trends = ha.remember_trends(store, freq="W")
    assert trends.attrs["untimed_remembers"] == untimed_events
    assert trends["remembers"].sum() + untimed_events == remembers  # none lost, none twice
    assert len(trends) <= 2  # this week's periods, not every week since year 1

    by_week = ha.popular_tags(store, limit=None, freq="W")
    assert by_week.attrs["untimed_nodes"] > 0 and len(by_week) < 10  # this week's, not every week
    assert by_week["nodes"].sum() + by_week.attrs["untimed_nodes"] == \
        ha.popular_tags(store, limit=None)["nodes"].sum()

    untimed_nodes = _count(database_url, "SELECT count(*) FROM nodes "
                                         "WHERE NOT isfinite(created_at)")
    growth = ha.memory_growth(store, freq="M")
    observed = growth[(growth["robot"] == "(all robots)") & (growth["kind"] == "observed")]
    assert growth.attrs["untimed_memories"] == untimed_nodes > 0
    assert observed["memories"].iloc[-1] + untimed_nodes == store.stats()["total_nodes"]
    assert len(observed) <= 2

    # Streamed as a snapshot reads them, and described one by one: the same instants.
    streamed = pd.concat(store.iter_table_chunks("nodes"), ignore_index=True)
    described = store.describe_nodes(streamed["id"].tolist())
    assert streamed["created_at"].tolist() == described["created_at"].tolist()
    assert len(ha.stale_memories(store)) <= len(streamed)
    for policy in (ha.ExpiryPolicy(10), ha.DecayPolicy(half_life_days=10)):
        hidden = ha.retention_what_if(store, policy)  # reads every memory's times
        assert set(hidden["node_id"]) <= set(streamed["id"])

    report = ha.build_report(store, sweep_queries=10).to_html()
    assert f"{untimed_events} remembers at infinity or -infinity fall in no period" in report

    path = ha.export_snapshot(store, tmp_path / "infinite.duckdb")
    with duckdb.connect(str(path), read_only=True) as con:
        for table, columns in _COLUMNS.items():  # links packed, the rest through a cursor
            for column in columns:
                kept = con.execute(f"SELECT count(*) FILTER (WHERE {column} = 'infinity'), "
                                   f"count(*) FILTER (WHERE {column} = '-infinity') "
                                   f"FROM {table}").fetchone()
                expected = _count(database_url, f"SELECT count(*) FROM {table} "
                                                f"WHERE id % 5 = 1"), \
                    _count(database_url, f"SELECT count(*) FROM {table} WHERE id % 5 = 2")
                assert kept == expected, (table, column)
    with ha.Snapshot(path) as snapshot:
        offline = ha.remember_trends(snapshot, freq="W")
        assert offline.attrs["untimed_remembers"] == untimed_events
        assert offline.drop(columns="partial").equals(trends.drop(columns="partial"))
