"""Faults in the middle of calls, timeouts, lock waits, threads and close(), against a real
PostgreSQL.

A call is held at a known point by another session's lock (``LOCK TABLE ... IN ACCESS
EXCLUSIVE MODE``): its backend is then seen waiting in ``pg_stat_activity`` and is killed
(``pg_terminate_backend``), the server restarted (on a server of its own, as in
``test_faults.py``), or the wait runs past ``query_timeout``. Every wait for the server is
polled with a bound; no sleep stands for synchronisation.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import pytest

import htm_analytics as ha
from htm_analytics import (
    DatabaseConnectionError,
    DatabaseError,
    HTMError,
    LongTermMemory,
    QueryTimeoutError,
)
from tests.test_faults import own_server, restart  # noqa: F401 (fixture)

pytestmark = pytest.mark.reliability

FAR = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)
ALWAYS = (dt.datetime(2000, 1, 1, tzinfo=dt.UTC), FAR)


def wait_for(check: Callable[[], Any], seconds: float = 10.0) -> Any:
    """Poll ``check`` until it returns something true (its value), for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"not reached in {seconds} s")


def sessions(url: str, condition: str) -> list[int]:
    """Pids of the other sessions of ``url``'s database matching ``condition`` (SQL)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            f"AND pid <> pg_backend_pid() AND {condition}").fetchall()]


def lock_waiters(url: str, table: str = "nodes") -> list[int]:
    """Pids of the client sessions waiting for a lock on ``table`` (the test's ``locked``).

    Only that wait: an autovacuum worker analysing the rows just seeded also waits for the
    test's lock, and any wait of another kind (an advisory lock, a row) is not the call
    under test; taken for it, the restart came first and the call then succeeded."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [row[0] for row in conn.execute(
            "SELECT DISTINCT a.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE NOT l.granted AND l.relation = to_regclass(%s) "
            "AND a.backend_type = 'client backend' AND a.datname = current_database()",
            (table,)).fetchall()]


def idle_in_transaction(url: str) -> list[int]:
    return sessions(url, "state LIKE 'idle in transaction%'")


def state(url: str) -> tuple[dict[str, int], list[str]]:
    """Row counts of the memory's tables and the names of its indexes."""
    with psycopg.connect(url, autocommit=True) as conn:
        counts = dict(conn.execute(
            "SELECT 'nodes', count(*) FROM nodes UNION ALL SELECT 'robot_nodes', count(*) "
            "FROM robot_nodes UNION ALL SELECT 'node_tags', count(*) FROM node_tags "
            "UNION ALL SELECT 'memory_events', count(*) FROM memory_events").fetchall())
        indexes = [row[0] for row in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1")]
    return counts, indexes


@contextmanager
def locked(url: str, table: str = "nodes") -> Iterator[None]:
    """Another session holding ``table`` exclusively until the block ends."""
    conn = psycopg.connect(url)
    try:
        conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        yield
    finally:
        conn.close()  # rolls back (the session may be gone already: a restart)


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``call`` in a thread; its value or error lands in the dict."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:  # kept for the test to judge
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def seeded(store: LongTermMemory) -> int:
    robot = store.register_robot("seeded")
    for i in range(5):
        store.add(content=f"postgresql memory {i}", robot_id=robot,
                  embedding=np.array([1.0, i / 5, 0.5]))
    return robot


def calls_of(store: LongTermMemory, robot: int) -> dict[str, Callable[[], Any]]:
    return {
        "search": lambda: store.search_fulltext(query="postgresql"),
        "vector_search": lambda: store.search(embedding=[1.0, 0.1, 0.5], limit=3),
        "filtered_search": lambda: store.search(embedding=[1.0, 0.1, 0.5], timeframe=ALWAYS),
        "fetch_frame": lambda: store.fetch_frame("SELECT count(*) AS n FROM nodes"),
        "analysis": lambda: ha.robot_overlap(store),
        "add": lambda: store.add(content="one more memory", robot_id=robot, tags=["a:b"]),
        "bulk_add": lambda: store.bulk_add([f"bulk {i}" for i in range(30)], robots="bulk"),
        "bulk_add_deferred": lambda: store.bulk_add(
            [f"bulk {i}" for i in range(30)], robots="bulk", defer_indexes=True,
            tags=[["t:x"]] * 30),
        "iter_vectors": lambda: list(store.iter_vectors(3, batch_rows=2)),
        "stale_rows": lambda: store.stale_rows(FAR),
        "iter_contents": lambda: list(store.iter_contents(batch_rows=2)),
    }


# A deferred bulk load waits at robot_nodes, after it dropped the indexes of nodes.
_KILLED = ["search", "vector_search", "filtered_search", "fetch_frame", "add", "bulk_add",
           "bulk_add_deferred", "iter_vectors", "stale_rows"]


@pytest.mark.parametrize("call", _KILLED)
def test_a_call_whose_backend_is_killed_fails_typed_and_leaves_nothing(
        database_url: str, call: str) -> None:
    with LongTermMemory(database_url) as store:
        run = calls_of(store, seeded(store))[call]
        before = state(database_url)
        table = "robot_nodes" if call == "bulk_add_deferred" else "nodes"
        with locked(database_url, table):
            thread, out = in_thread(run)
            backend = wait_for(lambda: lock_waiters(database_url, table))[0]
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
            thread.join(20)
        assert not thread.is_alive()
        assert isinstance(out.get("error"), DatabaseConnectionError), out
        assert state(database_url) == before  # nothing half-written, every index there
        run()  # the same store works again, at once
        assert idle_in_transaction(database_url) == []


@pytest.mark.parametrize("call", ["iter_vectors", "iter_contents"])
def test_a_stream_whose_backend_is_killed_between_batches_fails_typed(
        database_url: str, call: str) -> None:
    with LongTermMemory(database_url, pool_size=1) as store:
        seeded(store)
        stream = (store.iter_vectors(3, batch_rows=2) if call == "iter_vectors"
                  else store.iter_contents(batch_rows=2))
        next(stream)
        holder = wait_for(lambda: idle_in_transaction(database_url))[0]
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (holder,))
        with pytest.raises(DatabaseConnectionError):
            list(stream)
        # The store's one pooled connection works again, for a stream and a query.
        assert sum(len(ids) for ids, _ in store.iter_vectors(3, batch_rows=2)) == 5
        assert len(store.fetch_frame("SELECT id FROM nodes")) == 5


@pytest.mark.parametrize("call", ["search", "filtered_search", "analysis", "add", "bulk_add",
                                  "bulk_add_deferred"])
def test_a_lock_held_past_query_timeout_is_a_query_timeout(database_url: str,
                                                           call: str) -> None:
    """A bulk load's own work has no ``query_timeout``, but its wait for another session's
    lock does: it used to wait for as long as the lock was held."""
    with LongTermMemory(database_url, query_timeout=300) as store:
        run = calls_of(store, seeded(store))[call]
        before = state(database_url)
        with locked(database_url):
            thread, out = in_thread(run)
            thread.join(10)
            waited_past = thread.is_alive()
        thread.join(10)
        assert not waited_past, "the call waited for the lock past query_timeout"
        assert isinstance(out.get("error"), QueryTimeoutError), out
        assert state(database_url) == before
        assert idle_in_transaction(database_url) == []
        run()  # the connections are reusable


@pytest.mark.parametrize("call", ["search", "bulk_add_deferred", "iter_vectors", "recall"])
def test_a_restart_in_the_middle_of_a_call(own_server: tuple[str, Any],  # noqa: F811
                                           call: str) -> None:
    url, server = own_server
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE nodes, robots, tags, memory_events RESTART IDENTITY CASCADE")
    with LongTermMemory(url, pool_size=3) as store:
        robot = seeded(store)
        ids = [int(i) for i in store.fetch_frame("SELECT id FROM nodes ORDER BY id")["id"]]
        before = state(url)
        out: dict[str, Any] = {}
        if call == "iter_vectors":
            stream = store.iter_vectors(3, batch_rows=2)
            next(stream)
            restart(server)
            with pytest.raises(DatabaseConnectionError):
                list(stream)
        else:
            table = "robot_nodes" if call == "bulk_add_deferred" else "nodes"
            with locked(url, table):
                if call == "recall":  # a flush of buffered steps waits for the lock
                    store.recall_buffer.flush_interval = 0.05
                    store.buffer_working_memory(robot, recalled=ids[:3], held=ids[:3])
                else:
                    thread, out = in_thread(calls_of(store, robot)[call])
                wait_for(lambda: lock_waiters(url, table))
                restart(server)  # ends the lock's session too
            if call != "recall":
                thread.join(20)
                # A read may also finish: the restart ends the lock's session, and a waiter
                # granted the lock before it takes its own SIGTERM can still send its rows.
                assert isinstance(out.get("error"), DatabaseConnectionError) or (
                    call == "search" and out.get("value")), out
        assert state(url) == before
        for i in range(3):  # every call once the server is back succeeds
            store.add(content=f"after the restart {i}", robot_id=robot)
            assert store.search_fulltext(query=f"restart {i}")
        store.flush_recall_writes()
        with psycopg.connect(url, autocommit=True) as conn:
            accessed = conn.execute("SELECT coalesce(sum(access_count), 0), count(*) FILTER "
                                    "(WHERE in_working_memory) FROM nodes").fetchone()
        assert accessed == ((3, 3) if call == "recall" else (0, 0))  # nothing lost


def test_steps_buffered_after_close_are_refused_not_lost(database_url: str) -> None:
    store = LongTermMemory(database_url)
    robot = seeded(store)
    store.buffer_working_memory(robot, recalled=[1])
    store.close()
    with pytest.raises(DatabaseError, match="closed"):
        store.buffer_working_memory(robot, recalled=[2])  # used to vanish silently
    store.close()  # twice: nothing more
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT id, access_count FROM nodes WHERE access_count > 0"
                            ).fetchall() == [(1, 1)]


def test_recall_writes_flushed_in_a_block_that_rolls_back_stay_pending(
        ltm: LongTermMemory, db: psycopg.Connection) -> None:
    """A direct write inside ``atomic`` flushes the buffer first, in the block's transaction;
    its rollback used to lose the steps, which the buffer counted as written."""
    robot = seeded(ltm)
    ltm.recall_buffer.flush_interval = 3600  # flushed by the calls below only
    ltm.buffer_working_memory(robot, recalled=[1, 2])
    with pytest.raises(KeyError), ltm.atomic():
        ltm.mark_evicted([3], robot_id=robot)
        raise KeyError("the block fails")
    with ltm.atomic():
        ltm.buffer_working_memory(robot, recalled=[4])
        with pytest.raises(KeyError), ltm.atomic():  # a savepoint that rolls back
            ltm.mark_evicted([3], robot_id=robot)
            raise KeyError("the inner block fails")
    ltm.flush_recall_writes()
    counts = db.execute("SELECT id, access_count FROM nodes ORDER BY id").fetchall()
    assert counts == [(1, 1), (2, 1), (3, 0), (4, 1), (5, 0)]
    assert ltm.recall_buffer.flushed_steps == 2 and not ltm.recall_buffer.pending


def test_ensure_pool_size_serves_the_callers_already_waiting(database_url: str) -> None:
    with LongTermMemory(database_url, pool_size=1) as store:
        seeded(store)
        with locked(database_url):
            holder, _ = in_thread(lambda: store.fetch_frame("SELECT count(*) FROM nodes"))
            wait_for(lambda: lock_waiters(database_url))
            waiting, out = in_thread(lambda: store.fetch_frame("SELECT 1 AS one"))
            wait_for(lambda: store._pool.get_stats().get("requests_waiting"))
            assert store.ensure_pool_size(3) == 3
            waiting.join(10)  # it used to wait for the lock's holder (or 30 s)
            assert not waiting.is_alive() and out["value"]["one"].tolist() == [1]
        holder.join(10)


def test_close_while_other_threads_wait(database_url: str) -> None:
    store = LongTermMemory(database_url, pool_size=1)
    seeded(store)
    store.search(embedding=[1.0, 0.2, 0.5])  # reads the stored models (a pooled connection)
    with locked(database_url):
        search, searched = in_thread(lambda: store.search(embedding=[1.0, 0.1, 0.5], limit=3))
        pooled, _ = in_thread(lambda: store.fetch_frame("SELECT count(*) FROM nodes"))
        wait_for(lambda: len(lock_waiters(database_url)) == 2)
        queued, out = in_thread(lambda: store.fetch_frame("SELECT 1"))
        wait_for(lambda: store._pool.get_stats().get("requests_waiting"))
        store.close()  # returns at once: calls in flight finish on their connections
        queued.join(10)
        error = out.get("error")
        assert isinstance(error, DatabaseError) and "closed" in str(error), out
        assert not isinstance(error, DatabaseConnectionError)  # not "is the server up?"
    for thread in (search, pooled):
        thread.join(10)
        assert not thread.is_alive()
    assert len(searched["value"]) == 3
    for call in calls_of(store, 1).values():
        with pytest.raises(DatabaseError, match="closed"):
            call()
    store.close()
    wait_for(lambda: sessions(database_url, "true") == [])  # every connection closed


def test_a_context_exit_after_an_error_flushes_and_keeps_the_error(database_url: str) -> None:
    with pytest.raises(KeyError, match="mine"), LongTermMemory(database_url) as store:
        store.buffer_working_memory(seeded(store), recalled=[2])
        raise KeyError("mine")
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT access_count FROM nodes WHERE id = 2").fetchone() == (1,)


def test_threads_sharing_a_store_see_no_forgotten_row(
        ltm: LongTermMemory, db: psycopg.Connection,
        request: pytest.FixtureRequest) -> None:
    """Searches, remembers, forgets and cache clears at once on one store (and a pool
    smaller than the threads): typed errors only, no result holding a memory forgotten
    before the search began, counts that add up."""
    ltm.ensure_pool_size(2)
    robot = ltm.register_robot("sharer")
    forgotten_at: dict[int, float] = {}
    seen: list[tuple[float, set[int]]] = []
    errors: list[BaseException] = []
    added: set[int] = set()
    lock = threading.Lock()
    stop = time.monotonic() + 2.5

    def loop(body: Callable[[int], None]) -> Callable[[], None]:
        def run() -> None:
            i = 0
            while time.monotonic() < stop:
                i += 1
                try:
                    body(i)
                except HTMError as exc:  # typed: counted, not expected here
                    errors.append(exc)
                except BaseException as exc:
                    errors.append(exc)
                    raise
        return run

    def remember(i: int) -> None:
        node = ltm.add(content=f"shared note {threading.get_ident()} {i}",
                       robot_id=robot, tags=["shared:note"])["node_id"]
        with lock:
            added.add(node)

    def forget(_: int) -> None:
        with lock:
            node = min(added - set(forgotten_at), default=None)
        if node is not None and ltm.forget(node, permanent=True, confirm="confirmed"):
            with lock:
                forgotten_at[node] = time.monotonic()

    def search(i: int) -> None:
        started = time.monotonic()
        rows = (ltm.search_fulltext(query="shared note", limit=1000) if i % 2 else
                ltm.search_by_tags(tags=["shared:note"], limit=1000))
        seen.append((started, {int(r["id"]) for r in rows}))

    workers = [loop(remember), loop(remember), loop(forget), loop(search), loop(search),
               loop(lambda _: ltm.clear_cache())]
    threads = [threading.Thread(target=w, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive(), "deadlock"
    request.node.user_properties.append(("shared_store", {
        "added": len(added), "forgotten": len(forgotten_at), "searches": len(seen)}))
    assert errors == []
    stale = [node for started, ids in seen for node in ids
             if node in forgotten_at and forgotten_at[node] < started]
    assert stale == [] and len(forgotten_at) > 5 and len(seen) > 20
    assert {r["id"] for r in ltm.search_by_tags(tags=["shared:note"], limit=1000)} == \
        added - set(forgotten_at)
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (len(added) - len(forgotten_at),)
