"""Concurrent writers, readers and the query cache, against a real PostgreSQL.

Threads (and one second process) interleave add, delete, search, retrieve and tags on the
same contents. What must hold: counts add up, a race surfaces as success or a typed error
naming the truth, and no search started after a delete returned ever returns the deleted
node, whether the delete ran in this store, another store or another process.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from htm_analytics import ConcurrencyError, HTMError, LongTermMemory, ValidationError

pytestmark = pytest.mark.reliability

CONTENT = "shared memory about the postgresql database"


def blocking_tracer(statement_marker: str, reached: threading.Event,
                    release: threading.Event) -> Callable[[Any, Any, float], None]:
    """A tracer that holds the thread after the statement containing ``statement_marker``
    ran: its result is computed but not yet returned (or cached)."""
    def tracer(query: Any, _params: Any, _seconds: float) -> None:
        text = query if isinstance(query, str) else str(query)
        if statement_marker in text and threading.current_thread().name == "slow-search":
            reached.set()
            assert release.wait(30)
    return tracer


def search_across_a_delete(url: str) -> tuple[list[int], list[int], int]:
    """Start a search, delete its node while the search's result is in flight, search again.

    Returns the ids of the first search, of the search after the delete, and the node id.
    """
    reached, release = threading.Event(), threading.Event()
    with LongTermMemory(url, tracer=blocking_tracer("ts_rank", reached, release)) as store:
        robot = store.register_robot("r")
        node = store.add(content=CONTENT, robot_id=robot)["node_id"]
        first: list[int] = []
        search = threading.Thread(
            name="slow-search",
            target=lambda: first.extend(r["id"] for r in store.search_fulltext(query="postgresql")))
        search.start()
        assert reached.wait(30)
        assert store.delete(node)  # the delete returns while the search is still running
        release.set()
        search.join(30)
        after = [r["id"] for r in store.search_fulltext(query="postgresql")]
    return first, after, node


def test_a_search_overlapping_a_delete_does_not_cache_the_deleted_node(
        database_url: str) -> None:
    first, after, node = search_across_a_delete(database_url)
    assert first == [node]  # the slow search did see the node...
    assert after == []      # ...but its result was not served after the delete


def test_without_the_database_counter_the_process_generation_protects_this_process(
        database_url: str, db: psycopg.Connection) -> None:
    with LongTermMemory(database_url, init_schema=False) as running:
        assert running.search_fulltext(query="anything") == []
        assert running.cache_scope == "database"
        db.execute("DROP TABLE htm_analytics_cache_generation")
        db.execute("DROP FUNCTION htm_analytics_bump_cache_generation() CASCADE")
        assert running.search_fulltext(query="anything") == []  # dropped under it: falls back
        assert running.cache_scope == "process"
    with LongTermMemory(database_url, init_schema=False) as store:
        assert store.cache_scope == "process"
    first, after, node = search_across_a_delete(database_url)
    assert first == [node] and after == []


def test_a_delete_by_another_store_or_application_is_seen_by_the_next_search(
        database_url: str, db: psycopg.Connection) -> None:
    with LongTermMemory(database_url) as reader, LongTermMemory(database_url) as writer:
        assert reader.cache_scope == "database"
        robot = writer.register_robot("w")
        ids = [writer.add(content=f"{CONTENT} {i}", robot_id=robot)["node_id"]
               for i in range(3)]
        assert {r["id"] for r in reader.search_fulltext(query="postgresql")} == set(ids)
        assert reader.search_fulltext(query="postgresql") and reader.cache.hits == 1
        writer.delete(ids[0])  # another store: another pool, another cache
        assert {r["id"] for r in reader.search_fulltext(query="postgresql")} == set(ids[1:])
        db.execute("DELETE FROM nodes WHERE id = %s", (ids[1],))  # another application
        assert [r["id"] for r in reader.search_fulltext(query="postgresql")] == [ids[2]]
        # Writes that change no result (access counts) keep the cache warm.
        hits = reader.cache.hits
        reader.track_access([ids[2]])
        reader.search_fulltext(query="postgresql")
        assert reader.cache.hits == hits + 1


def run_threads(workers: list[Callable[[], None]], seconds: float) -> None:
    threads = [threading.Thread(target=w) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 30)
        assert not thread.is_alive()


def test_add_racing_delete_of_the_same_content_succeeds_or_says_why(
        ltm: LongTermMemory, db: psycopg.Connection,
        request: pytest.FixtureRequest) -> None:
    robot = ltm.register_robot("racer")
    stop = time.monotonic() + 3
    outcomes: dict[str, int] = {"added": 0, "deleted": 0, "conflict": 0}
    unexpected: list[BaseException] = []
    lock = threading.Lock()

    def adder() -> None:
        while time.monotonic() < stop:
            try:
                ltm.add(content=CONTENT, robot_id=robot, tags=["database:postgresql"])
                key = "added"
            except ConcurrencyError:
                key = "conflict"
            except BaseException as exc:  # a wrong field or a raw error: the bug
                unexpected.append(exc)
                return
            with lock:
                outcomes[key] += 1

    def deleter() -> None:
        while time.monotonic() < stop:
            node = ltm.node_ids_by_content([CONTENT])[0]
            try:
                if node is not None and ltm.delete(node):
                    with lock:
                        outcomes["deleted"] += 1
            except BaseException as exc:
                unexpected.append(exc)
                return

    run_threads([adder, adder, deleter, deleter], 3)
    request.node.user_properties.append(("outcomes", outcomes))
    assert unexpected == []
    assert outcomes["added"] > 20 and outcomes["deleted"] > 5, outcomes
    # Every surviving link points at a node, and the node's counts add up.
    orphans = db.execute("""SELECT count(*) FROM robot_nodes rn
                            LEFT JOIN nodes n ON n.id = rn.node_id WHERE n.id IS NULL""")
    assert orphans.fetchone()[0] == 0  # type: ignore[index]
    assert db.execute("SELECT count(*) FROM nodes WHERE content = %s",
                      (CONTENT,)).fetchone()[0] <= 1  # type: ignore[index]


def test_interleaved_calls_never_return_a_node_after_its_delete_returned(
        ltm: LongTermMemory, db: psycopg.Connection,
        request: pytest.FixtureRequest) -> None:
    robot = ltm.register_robot("mixer")
    contents = [f"memory {i} about postgresql tuning" for i in range(8)]
    deleted_at: dict[int, float] = {}
    seen: list[tuple[float, set[int]]] = []
    errors: list[BaseException] = []
    calls = {"n": 0}
    stop = time.monotonic() + 3
    lock = threading.Lock()

    def guarded(body: Callable[[int], None]) -> Callable[[], None]:
        def loop() -> None:
            i = 0
            while time.monotonic() < stop:
                i += 1
                try:
                    body(i)
                except (ConcurrencyError, ValidationError) as exc:
                    if isinstance(exc, ValidationError):
                        errors.append(exc)
                except BaseException as exc:
                    errors.append(exc)
                    return
                with lock:
                    calls["n"] += 1
        return loop

    def add(i: int) -> None:
        ltm.add(content=contents[i % len(contents)], robot_id=robot, tags=["db:pg"])

    def delete(i: int) -> None:
        node = ltm.node_ids_by_content([contents[i % len(contents)]])[0]
        if node is not None and ltm.delete(node):
            with lock:
                deleted_at[node] = time.monotonic()

    def search(i: int) -> None:
        started = time.monotonic()
        rows = (ltm.search_fulltext(query="postgresql tuning") if i % 2
                else ltm.search_by_tags(tags=["db:pg"]) if i % 3 else
                ltm.search_fuzzy(query="postgresql tunin"))
        seen.append((started, {int(r["id"]) for r in rows}))

    def retrieve_and_tag(i: int) -> None:
        node = ltm.node_ids_by_content([contents[i % len(contents)]])[0]
        if node is not None:
            ltm.retrieve(node)
            try:
                ltm.add_tag(node_id=node, tag="db:extra")
            except HTMError as exc:  # deleted meanwhile: must say so
                assert "no node" in str(exc)

    run_threads([guarded(add), guarded(add), guarded(delete), guarded(search),
                 guarded(search), guarded(retrieve_and_tag)], 3)
    request.node.user_properties += [("calls", calls["n"]), ("deletes", len(deleted_at)),
                                     ("searches", len(seen))]
    assert errors == []
    stale = [(node, started) for started, ids in seen for node in ids
             if node in deleted_at and deleted_at[node] < started]
    assert stale == [], f"{len(stale)} results returned nodes deleted before the search began"
    assert len(deleted_at) > 5 and len(seen) > 50 and calls["n"] > 200
    links = db.execute("""SELECT count(*) FROM node_tags nt
                          LEFT JOIN nodes n ON n.id = nt.node_id WHERE n.id IS NULL""")
    assert links.fetchone()[0] == 0  # type: ignore[index]


def _delete_in_another_process(url: str, content: str, done: Any) -> None:
    with LongTermMemory(url) as store:
        node = store.node_ids_by_content([content])[0]
        done.put(bool(node and store.delete(node)))


def test_a_delete_in_another_process_is_seen_at_once(database_url: str) -> None:
    with LongTermMemory(database_url) as store:
        robot = store.register_robot("p")
        node = store.add(content=CONTENT, robot_id=robot)["node_id"]
        assert [r["id"] for r in store.search_fulltext(query="postgresql")] == [node]
        context = multiprocessing.get_context("spawn")
        done = context.Queue()
        process = context.Process(target=_delete_in_another_process,
                                  args=(database_url, CONTENT, done))
        process.start()
        assert done.get(timeout=60) is True
        process.join(30)
        assert store.search_fulltext(query="postgresql") == []


def test_bulk_add_racing_deletes_loads_everything_or_nothing(
        ltm: LongTermMemory, db: psycopg.Connection, request: pytest.FixtureRequest) -> None:
    contents = [f"bulk memory {i} about postgresql" for i in range(40)]
    # Two seconds of racing and at least four whole loads, however loaded the machine is
    # (a minute at most).
    stop, give_up = time.monotonic() + 2, time.monotonic() + 60
    loads = {"loaded": 0, "conflict": 0}
    unexpected: list[BaseException] = []
    done = threading.Event()

    def loader() -> None:
        try:
            while (time.monotonic() < stop or loads["loaded"] < 4) \
                    and time.monotonic() < give_up:
                try:
                    frame = ltm.bulk_add(contents, robots="bulk",
                                         tags=[["db:pg"]] * len(contents))
                    assert len(frame) == len(contents)
                    loads["loaded"] += 1
                except ConcurrencyError:
                    loads["conflict"] += 1
        except BaseException as exc:
            unexpected.append(exc)
        finally:
            done.set()

    def deleter() -> None:
        i = 0
        while not done.is_set():
            i += 1
            node = ltm.node_ids_by_content([contents[i % len(contents)]])[0]
            if node is not None:
                ltm.delete(node)

    run_threads([loader, deleter], 60)
    request.node.user_properties.append(("loads", loads))
    assert unexpected == [] and loads["loaded"] > 3, (loads, unexpected)
    # Whatever survived is whole: each node has its robot link and its tags.
    broken = db.execute("""SELECT count(*) FROM nodes n
                           WHERE NOT EXISTS (SELECT 1 FROM robot_nodes rn WHERE rn.node_id = n.id)
                              OR NOT EXISTS (SELECT 1 FROM node_tags nt WHERE nt.node_id = n.id)
                        """).fetchone()
    assert broken is not None and broken[0] == 0
