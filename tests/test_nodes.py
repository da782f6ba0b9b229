"""add / retrieve / exists / delete / track_access / mark_evicted, and robots."""

from __future__ import annotations

import datetime as dt
import threading

import numpy as np
import psycopg
import pytest

from htm_analytics import LongTermMemory, NotFoundError, ValidationError, content_hash


def test_add_new_content(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    robot = ltm.register_robot("planner")
    result = ltm.add(content="PostgreSQL is our primary database", token_count=8,
                     robot_id=robot)
    assert result["is_new"] is True
    assert result["robot_node"]["remember_count"] == 1
    row = db.execute("SELECT content, content_hash, token_count FROM nodes WHERE id = %s",
                     (result["node_id"],)).fetchone()
    assert row == ("PostgreSQL is our primary database",
                   content_hash("PostgreSQL is our primary database"), 8)
    import hashlib
    assert row[1] == hashlib.sha256(b"PostgreSQL is our primary database").hexdigest()


def test_same_robot_again_counts_a_remember(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("planner")
    first = ltm.add(content="Vector search is powerful", robot_id=robot)
    second = ltm.add(content="  Vector search is powerful\n", robot_id=robot)  # stripped
    assert second["node_id"] == first["node_id"] and second["is_new"] is False
    link = second["robot_node"]
    assert link["remember_count"] == 2
    assert link["first_remembered_at"] == first["robot_node"]["first_remembered_at"]
    assert link["last_remembered_at"] > first["robot_node"]["last_remembered_at"]


def test_another_robot_shares_the_node(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    one, two = ltm.register_robot("one"), ltm.register_robot("two")
    first = ltm.add(content="shared fact", robot_id=one)
    second = ltm.add(content="shared fact", robot_id=two)
    assert second == {"node_id": first["node_id"], "is_new": False,
                      "robot_node": second["robot_node"]}
    assert second["robot_node"]["robot_id"] == two
    assert second["robot_node"]["remember_count"] == 1
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (1,)
    assert db.execute("SELECT robot_id, remember_count FROM robot_nodes ORDER BY robot_id"
                      ).fetchall() == [(one, 1), (two, 1)]


def test_embedding_is_padded_and_cosine_is_unchanged(ltm: LongTermMemory,
                                                     db: psycopg.Connection) -> None:
    robot = ltm.register_robot("r")
    vector = np.array([0.3, -1.2, 0.5], dtype=np.float32)
    node = ltm.add(content="with a vector", robot_id=robot, embedding=vector.tolist())["node_id"]
    dims, stored_dims = db.execute(
        "SELECT embedding_dimension, vector_dims(embedding) FROM nodes WHERE id = %s",
        (node,)).fetchone()
    assert (dims, stored_dims) == (3, 2000)
    query = np.array([0.1, -1.0, 0.9])
    expected = float(query @ vector / np.linalg.norm(query) / np.linalg.norm(vector))
    hit = ltm.search(embedding=query, limit=1)[0]
    assert hit["id"] == node
    assert hit["similarity"] == pytest.approx(expected, abs=1e-6)
    assert np.array_equal(ltm.retrieve(node)["embedding"], vector)


def test_embedding_accepts_numpy_and_fills_a_missing_vector(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("r")
    node = ltm.add(content="no vector yet", robot_id=robot)["node_id"]
    assert ltm.retrieve(node)["embedding"] is None
    ltm.add(content="no vector yet", robot_id=robot, embedding=np.ones(5, dtype=np.float64))
    assert ltm.retrieve(node)["embedding"].tolist() == [1.0] * 5


@pytest.mark.parametrize("bad, message", [
    ([], "must not be empty"),
    ([1.0, float("nan")], "NaN"),
    ([1.0, float("inf")], "NaN or infinite"),
    (np.ones(2001), "2001 dimensions"),
    (np.zeros(4), "all zeros"),
    ([[1.0, 2.0]], "one-dimensional"),
    (["a", "b"], "sequence of numbers"),
    ("0.1,0.2", "sequence of numbers"),
])
def test_bad_embeddings_are_rejected_and_nothing_is_written(
        ltm: LongTermMemory, db: psycopg.Connection, bad: object, message: str) -> None:
    robot = ltm.register_robot("r")
    with pytest.raises(ValidationError, match=message) as info:
        ltm.add(content="anything", robot_id=robot, embedding=bad)
    assert info.value.field == "embedding"
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (0,)


@pytest.mark.parametrize("content, message", [
    ("", "empty"), ("   \n\t", "empty"), ("a\x00b", "NUL"), (None, "must be a string"),
    (42, "must be a string"), ("x" * 1_000_001, "larger than"),
])
def test_bad_content_is_rejected(ltm: LongTermMemory, content: object, message: str) -> None:
    robot = ltm.register_robot("r")
    with pytest.raises(ValidationError, match=message) as info:
        ltm.add(content=content, robot_id=robot)  # type: ignore[arg-type]
    assert info.value.field == "content"


def test_unknown_robot_is_a_clear_error_and_leaves_no_node(ltm: LongTermMemory,
                                                           db: psycopg.Connection) -> None:
    with pytest.raises(ValidationError, match="no robot with id 999") as info:
        ltm.add(content="orphan", robot_id=999)
    assert info.value.field == "robot_id"
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM memory_events").fetchone() == (0,)


@pytest.mark.parametrize("kwargs, field", [
    ({"robot_id": 0}, "robot_id"), ({"robot_id": True}, "robot_id"),
    ({"robot_id": "1"}, "robot_id"), ({"token_count": -1}, "token_count"),
])
def test_bad_ids_and_counts(ltm: LongTermMemory, kwargs: dict, field: str) -> None:
    args = {"content": "x", "robot_id": ltm.register_robot("r"), **kwargs}
    with pytest.raises(ValidationError) as info:
        ltm.add(**args)
    assert info.value.field == field


def test_retrieve_counts_accesses(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("r")
    node = ltm.add(content="remember me", robot_id=robot)["node_id"]
    first = ltm.retrieve(node)
    second = ltm.retrieve(node)
    assert (first["access_count"], second["access_count"]) == (1, 2)
    assert second["last_accessed"] >= first["last_accessed"]
    assert set(first) >= {"id", "content", "access_count", "created_at", "updated_at",
                          "last_accessed", "token_count", "in_working_memory",
                          "embedding_dimension", "content_hash", "embedding"}
    assert ltm.retrieve(123456) is None


def test_exists_and_delete_cascade(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    one, two = ltm.register_robot("one"), ltm.register_robot("two")
    node = ltm.add(content="to be forgotten", robot_id=one)["node_id"]
    ltm.add(content="to be forgotten", robot_id=two)
    ltm.add_tag(node_id=node, tag="topic:sub")
    assert ltm.exists(node)
    assert ltm.delete(node) is True
    assert not ltm.exists(node)
    assert ltm.delete(node) is False
    for table in ("robot_nodes", "node_tags"):
        assert db.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM tags").fetchone() == (2,)  # tags stay
    assert db.execute("SELECT count(*) FROM robots").fetchone() == (2,)


def test_deleting_a_robot_cascades_to_its_links(ltm: LongTermMemory,
                                                db: psycopg.Connection) -> None:
    robot = ltm.register_robot("gone")
    ltm.add(content="kept memory", robot_id=robot)
    db.execute("DELETE FROM robots WHERE id = %s", (robot,))
    assert db.execute("SELECT count(*) FROM robot_nodes").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (1,)


def test_track_access_and_working_memory_flags(ltm: LongTermMemory,
                                               db: psycopg.Connection) -> None:
    robot = ltm.register_robot("r")
    a = ltm.add(content="a", robot_id=robot)["node_id"]
    b = ltm.add(content="b", robot_id=robot)["node_id"]
    assert ltm.track_access([a, b, a, 999]) == 2
    assert db.execute("SELECT access_count FROM nodes ORDER BY id").fetchall() == [(1,), (1,)]
    assert ltm.mark_in_working_memory([a, b]) == 2
    assert ltm.mark_evicted([a], robot_id=robot) == 1
    assert db.execute("SELECT id, in_working_memory FROM nodes ORDER BY id").fetchall() == [
        (a, False), (b, True)]
    assert db.execute("SELECT kind, robot_id, node_id FROM memory_events WHERE kind = 'evict'"
                      ).fetchall() == [("evict", robot, a)]
    assert ltm.track_access([]) == 0
    with pytest.raises(ValidationError, match="list of node ids"):
        ltm.track_access(5)  # type: ignore[arg-type]


def test_events_of_unknown_nodes_or_robots_are_not_logged(ltm: LongTermMemory,
                                                          db: psycopg.Connection) -> None:
    """The event log has no foreign keys: these calls used to log events pointing at no
    node or no robot."""
    robot = ltm.register_robot("r")
    a = ltm.add(content="a", robot_id=robot)["node_id"]

    def state() -> list[tuple]:
        return db.execute("SELECT (SELECT count(*) FROM memory_events), "
                          "(SELECT sum(access_count) FROM nodes), "
                          "(SELECT bool_or(in_working_memory) FROM nodes)").fetchall()

    assert ltm.track_access([a, 10**12], robot_id=robot) == 1
    assert db.execute("SELECT node_id FROM memory_events WHERE kind = 'retrieve'"
                      ).fetchall() == [(a,)]
    assert ltm.mark_evicted([10**12], robot_id=robot) == 0
    ltm.mark_in_working_memory([a])
    before = state()
    for call in (lambda: ltm.track_access([a], robot_id=10**12),
                 lambda: ltm.mark_evicted([a], robot_id=10**12)):
        with pytest.raises(NotFoundError, match="no robot with id"):
            call()
        assert state() == before
    assert db.execute("SELECT count(*) FROM memory_events e WHERE NOT EXISTS (SELECT 1 FROM "
                      "nodes n WHERE n.id = e.node_id) OR NOT EXISTS (SELECT 1 FROM robots r "
                      "WHERE r.id = e.robot_id)").fetchone() == (0,)


def test_update_working_memory_writes_one_step_once(ltm: LongTermMemory,
                                                    db: psycopg.Connection) -> None:
    robot = ltm.register_robot("r")
    a, b, c = (ltm.add(content=t, robot_id=robot)["node_id"] for t in ("a", "b", "c"))
    ltm.mark_in_working_memory([c])

    def rows() -> list[tuple]:  # xmin: the transaction that wrote each row's current version
        return db.execute("SELECT id, xmin::text, access_count, last_accessed, "
                          "in_working_memory FROM nodes ORDER BY id").fetchall()

    before = rows()
    active = db.execute("SELECT last_active FROM robots WHERE id = %s", (robot,)).fetchone()[0]
    ltm.update_working_memory(robot, recalled=[a, b], held=[a, b], evicted=[c])
    after = rows()
    assert [r[2] for r in after] == [1, 1, 0] and [r[4] for r in after] == [True, True, False]
    assert after[0][3] > before[0][3] and after[1][3] > before[1][3]
    assert after[2][3] == before[2][3]  # evicting is not an access
    assert len({r[1] for r in after}) == 1  # one transaction wrote all three
    assert db.execute("SELECT kind, node_id FROM memory_events WHERE robot_id = %s "
                      "AND kind <> 'remember' ORDER BY kind, node_id", (robot,)).fetchall() == [
        ("evict", c), ("recall", a), ("recall", b)]
    assert db.execute("SELECT last_active FROM robots WHERE id = %s",
                      (robot,)).fetchone()[0] > active
    # Holding what is held and evicting what is out changes nothing: no row is rewritten.
    ltm.update_working_memory(robot, held=[a], evicted=[c])
    assert rows() == after
    with pytest.raises(ValidationError, match="both held and evicted"):
        ltm.update_working_memory(robot, held=[a], evicted=[a])
    with pytest.raises(NotFoundError):
        ltm.update_working_memory(424242, recalled=[a])
    assert rows() == after


def test_event_log_records_each_change(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    robot = ltm.register_robot("r")
    node = ltm.add(content="logged", robot_id=robot)["node_id"]
    ltm.add(content="logged", robot_id=robot)
    ltm.retrieve(node)
    ltm.delete(node)
    assert db.execute("SELECT kind, robot_id, node_id FROM memory_events ORDER BY id"
                      ).fetchall() == [("remember", robot, node), ("remember", robot, node),
                                       ("retrieve", None, node), ("delete", None, node)]


def test_register_robot_is_find_or_create(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    first = ltm.register_robot("planner", metadata={"role": "plans"})
    before = db.execute("SELECT last_active FROM robots WHERE id = %s", (first,)).fetchone()[0]
    assert ltm.register_robot("  planner ") == first
    after = db.execute("SELECT last_active, metadata FROM robots WHERE id = %s",
                       (first,)).fetchone()
    assert after[0] > before and after[1] == {"role": "plans"}
    assert ltm.register_robot("other") != first
    ltm.update_robot_activity(first)
    with pytest.raises(NotFoundError):
        ltm.update_robot_activity(424242)
    with pytest.raises(ValidationError):
        ltm.register_robot("   ")


def test_concurrent_adds_of_the_same_content(database_url: str) -> None:
    """N threads x M adds of one text: one node, and exact per-robot counts."""
    threads, repeats = 8, 5
    with LongTermMemory(database_url, pool_size=threads) as ltm:
        robots = [ltm.register_robot(f"robot-{i % 2}") for i in range(threads)]
        barrier = threading.Barrier(threads)
        results: list[dict] = []
        errors: list[BaseException] = []

        def work(robot: int) -> None:
            barrier.wait()
            try:
                for _ in range(repeats):
                    results.append(ltm.add(content="the same memory", robot_id=robot))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(r,)) for r in robots]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert not errors
        assert len({r["node_id"] for r in results}) == 1
        assert sum(r["is_new"] for r in results) == 1
        counts = ltm._fetch("SELECT robot_id, remember_count FROM robot_nodes ORDER BY 1")
        assert [c["remember_count"] for c in counts] == [threads // 2 * repeats] * 2


def test_concurrent_robot_registration_gives_one_robot(database_url: str) -> None:
    with LongTermMemory(database_url, pool_size=6) as ltm:
        barrier = threading.Barrier(6)
        ids: list[int] = []

        def work() -> None:
            barrier.wait()
            ids.append(ltm.register_robot("twin"))

        workers = [threading.Thread(target=work) for _ in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert len(set(ids)) == 1 and len(ids) == 6


def test_timeframe_validation(ltm: LongTermMemory) -> None:
    now = dt.datetime.now(dt.UTC)
    with pytest.raises(ValidationError, match="after end") as info:
        ltm.search_fulltext(query="x", timeframe=(now, now - dt.timedelta(days=1)))
    assert info.value.field == "timeframe"
    for bad in ("last week", (now,), 5, (now, "tomorrow")):
        with pytest.raises(ValidationError):
            ltm.search_fulltext(query="x", timeframe=bad)  # type: ignore[arg-type]


def test_atomic_commits_several_calls_together_or_nothing(ltm: LongTermMemory,
                                                          db: psycopg.Connection) -> None:
    robot = ltm.register_robot("atomic")
    with pytest.raises(RuntimeError), ltm.atomic():
        node = ltm.add(content="written, then rolled back", robot_id=robot)["node_id"]
        ltm.add_tag(node_id=node, tag="atomic:test")
        # Visible inside the block (one connection), invisible to others until the end.
        assert ltm.exists(node)
        assert db.execute("SELECT count(*) FROM nodes WHERE id = %s", (node,)).fetchone()[0] == 0
        raise RuntimeError("the caller fails midway")
    assert db.execute("SELECT count(*) FROM nodes").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM tags WHERE name LIKE 'atomic%'").fetchone()[0] == 0
    with ltm.atomic():
        first = ltm.add(content="kept with its tag", robot_id=robot)["node_id"]
        with ltm.atomic():  # nested: a savepoint of the same transaction
            ltm.add_tag(node_id=first, tag="atomic:kept")
        with pytest.raises(ValidationError), ltm.atomic():  # a failed savepoint only
            ltm.add_tag(node_id=first, tag="NOT A TAG")
    assert db.execute("SELECT count(*) FROM nodes").fetchone()[0] == 1
    assert ltm.get_node_tags(first) == ["atomic", "atomic:kept"]
