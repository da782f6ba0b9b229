"""The fast paths keep the behaviour: search connections, buffered recall writes, batched
remembering, threads."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import htm_analytics as ha
from htm_analytics import (
    HTM,
    DatabaseConnectionError,
    EmbeddingMismatchError,
    LongTermMemory,
    QueryTimeoutError,
    ValidationError,
)
from htm_analytics.store import DEFAULT_EF_SEARCH, recall_buffer, search_pool
from htm_analytics.store._vectors import stored_embedding_models
from tests.test_htm import FACTS, CountingEmbedder

SETTINGS = ("SELECT current_setting('hnsw.ef_search') AS ef, "
            "current_setting('hnsw.iterative_scan') AS iterative, "
            "current_setting('enable_seqscan') AS seqscan")


def unit(rng: np.random.Generator, n: int, d: int = 8) -> np.ndarray:
    vectors = rng.normal(size=(n, d)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def loaded(database_url: str) -> tuple[LongTermMemory, np.ndarray, list[int]]:
    rng = np.random.default_rng(15)
    vectors = unit(rng, 60)
    store = LongTermMemory(database_url, pool_size=1, cache_size=0)
    frame = store.bulk_add([f"memory {i} about postgres tuning" for i in range(60)],
                           robots="speed-bot", embeddings=vectors,
                           tags=[["db:postgres"]] * 60, token_counts=[5] * 60)
    yield store, vectors, frame["node_id"].tolist()
    store.close()


def test_search_settings_stay_on_search_connections(loaded: tuple) -> None:
    store, vectors, ids = loaded
    now = dt.datetime.now(dt.UTC)
    # a larger ef_search and the iterative scan, for one transaction each
    wide = store.search(embedding=vectors[0], limit=50)
    store.search(embedding=vectors[0], limit=5, timeframe=(now - dt.timedelta(days=1), now))
    store.search_hybrid(query="postgres", embedding=vectors[0], fusion="rrf",
                        prefilter_limit=200)
    assert len(wide) == 50 and wide[0]["id"] == ids[0]
    # pool_size=1: the only connection of each pool is the one the searches used; the main
    # pool's sessions keep the server's settings
    assert store.fetch_frame(SETTINGS).iloc[0].tolist() == ["40", "off", "on"]
    with store._search_cursor(ef_search=None) as cur:
        row = cur.execute(SETTINGS).fetchone()
    # the search connection's session: the depth of the last search, no iterative scan
    assert row == {"ef": "200", "iterative": "off", "seqscan": "off"}
    store.search(embedding=vectors[0], limit=5)
    with store._search_cursor(ef_search=None) as cur:
        assert cur.execute(SETTINGS).fetchone()["ef"] == str(DEFAULT_EF_SEARCH)


def test_default_search_is_one_traced_statement(database_url: str) -> None:
    seen: list[str] = []
    vector = unit(np.random.default_rng(1), 1)[0]
    # pool_size=1: one search connection, so every statement below is traced in order
    with LongTermMemory(database_url, tracer=lambda text, *_: seen.append(text),
                        cache_size=0, pool_size=1) as store:
        store.bulk_add(["one traced memory"], robots="trace-bot", embeddings=[vector])
        store.search(embedding=vector, limit=3)  # opens the search connection

        def traced(call: object) -> list[str]:
            start = len(seen)
            call()
            # '' is the pool's liveness check of a connection idle over 50 ms: whether it
            # runs depends on the machine's load, not on the search.
            return [text for text in seen[start:] if text]

        plain = traced(lambda: store.search(embedding=vector, limit=3))
        deeper = traced(lambda: store.search(embedding=vector, limit=DEFAULT_EF_SEARCH + 1))
        recall = traced(lambda: store.search_vector_bm25(query="one memory", embedding=vector))
        again = traced(lambda: store.search_vector_bm25(query="traced", embedding=vector))
    assert len(plain) == 1 and "<=>" in plain[0]
    # another depth: the session's setting changes with the search, and stays
    assert len(deeper) == 2 and "hnsw.ef_search" in deeper[0] and "<=>" in deeper[1]
    # the first default search also reads the robots' names (again after cache_ttl only)
    assert len(recall) == 3 and "tsvector_to_array" in recall[0]
    assert "hnsw.ef_search" in recall[1] and "bm25" in recall[2]
    assert len(again) == 1 and "bm25" in again[0]


def test_a_cached_search_reads_the_generation_with_the_search(database_url: str) -> None:
    seen: list[str] = []
    vector = unit(np.random.default_rng(2), 1)[0]
    with LongTermMemory(database_url, tracer=lambda text, *_: seen.append(text)) as store:
        assert store.cache_scope == "database"
        store.bulk_add(["a cached memory"], robots="cache-bot", embeddings=[vector])
        store.search(embedding=vector, limit=3)  # opens the search connection
        before = len(seen)
        store.search(embedding=vector, limit=4)  # a miss: the search reads the generation
        miss = seen[before:]
        store.search(embedding=vector, limit=4)  # a hit: the generation alone
        hit = seen[before + len(miss):]
        start = len(seen)
        assert store.search_fulltext(query="cached")  # full text: one statement too
        text = [t for t in seen[start:] if t]  # not the check of a connection idle > 50 ms
        start = len(seen)
        assert store.search_fuzzy(query="cachd memory", exhaustive=True)  # its setting first
        fuzzy = [t for t in seen[start:] if t]
        db = psycopg.connect(database_url, autocommit=True)
        db.execute("DELETE FROM nodes")  # another writer: the entry is stale
        db.close()
        assert store.search(embedding=vector, limit=4) == []
    assert len(miss) == 1 and "htm_analytics_cache_generation" in miss[0] and "<=>" in miss[0]
    assert len(hit) == 1 and "<=>" not in hit[0]
    assert len(text) == 1 and "htm_analytics_cache_generation" in text[0]
    assert len(fuzzy) == 2 and "htm_analytics_cache_generation" in fuzzy[1]


def counts(store: LongTermMemory, ids: list[int]) -> dict[int, int]:
    frame = store.fetch_frame("SELECT id, access_count FROM nodes WHERE id = ANY(%s)", (ids,))
    return dict(zip(frame["id"], frame["access_count"]))


def test_buffered_steps_from_many_threads_are_all_written(
        loaded: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _, ids = loaded
    monkeypatch.setattr(recall_buffer, "FLUSH_CHUNK", 7)
    robot = store.register_robot("speed-bot")
    store.recall_buffer.flush_interval = 0.05  # the background thread flushes meanwhile
    store.recall_buffer.flush_every = 7
    expected = dict.fromkeys(ids, 0)
    plans = [[ids[(t * 13 + s * 7 + k) % 60] for k in range(5)]
             for t in range(4) for s in range(40)]
    for plan in plans:
        for node in set(plan):
            expected[node] += 1

    def work(t: int) -> None:
        for s, plan in enumerate(plans[t * 40:(t + 1) * 40]):
            store.buffer_working_memory(robot, recalled=plan, held=plan[:2])
            if s % 5 == t:  # flushes from the callers too, racing the background thread's
                store.flush_recall_writes()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(4)))
    store.flush_recall_writes()
    assert counts(store, ids) == expected
    events = store.fetch_frame("SELECT count(*) AS n FROM memory_events WHERE kind = 'recall'")
    assert events["n"].iloc[0] == sum(expected.values())
    assert store.recall_buffer.flushed_steps == 160 and not store.recall_buffer.pending


def test_a_failed_flush_keeps_what_it_did_not_write(database_url: str, loaded: tuple,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, ids = loaded
    monkeypatch.setattr(recall_buffer, "FLUSH_CHUNK", 1)  # one statement per node
    store = LongTermMemory(database_url, query_timeout=300)
    robot = store.register_robot("speed-bot")
    store.recall_buffer.flush_interval = 3600  # flushed by hand only
    store.buffer_working_memory(robot, recalled=ids[:3], held=ids[:3])
    with psycopg.connect(database_url) as blocker:  # holds the last row: its part times out
        blocker.execute("SELECT id FROM nodes WHERE id = %s FOR UPDATE", (ids[2],))
        with pytest.raises(QueryTimeoutError):
            store.flush_recall_writes()
        assert counts(store, ids[:3]) == {ids[0]: 1, ids[1]: 1, ids[2]: 0}  # parts written
        store.buffer_working_memory(robot, recalled=ids[:1], evicted=ids[2:3])
    assert store.recall_buffer.pending_steps == 2
    assert store.flush_recall_writes() == 2
    assert counts(store, ids[:3]) == {ids[0]: 2, ids[1]: 1, ids[2]: 1}  # none twice
    flags = store.fetch_frame("SELECT id, in_working_memory FROM nodes WHERE id = ANY(%s) "
                              "ORDER BY id", (ids[:3],))["in_working_memory"].tolist()
    assert flags == [True, True, False]  # the later eviction wins over the earlier hold
    events = store.fetch_frame("SELECT kind, count(*) AS n FROM memory_events "
                               "WHERE kind <> 'remember' GROUP BY kind ORDER BY kind")
    assert events.values.tolist() == [["evict", 1], ["recall", 4]]
    store.close()


def test_full_buffer_direct_writes_and_close_flush(database_url: str, loaded: tuple) -> None:
    _, _, ids = loaded
    store = LongTermMemory(database_url)
    robot = store.register_robot("speed-bot")
    store.recall_buffer.flush_interval = 3600
    store.recall_buffer.max_pending = 8
    store.buffer_working_memory(robot, recalled=ids[:3])  # 6 entries: kept
    assert store.recall_buffer.pending_steps == 1
    store.buffer_working_memory(robot, recalled=ids[3:4])  # 8: written before returning
    assert store.recall_buffer.pending_steps == 0 and counts(store, ids[:4])[ids[3]] == 1
    store.buffer_working_memory(robot, held=ids[5:6])
    store.mark_evicted(ids[5:6])  # a direct write is not overtaken by the buffered hold
    store.buffer_working_memory(robot, recalled=ids[6:7])
    store.close()
    with LongTermMemory(database_url) as reopened:
        assert counts(reopened, ids[6:7]) == {ids[6]: 1}
        flag = reopened.fetch_frame("SELECT in_working_memory FROM nodes WHERE id = %s",
                                    (ids[5],))["in_working_memory"].iloc[0]
        assert not flag


def test_steps_left_in_an_open_store_are_written_at_exit(database_url: str,
                                                         loaded: tuple) -> None:
    store, _, ids = loaded
    script = ("import sys\nfrom htm_analytics import LongTermMemory\n"
              "store = LongTermMemory(sys.argv[1])\n"
              "store.recall_buffer.flush_interval = 3600\n"
              "robot = store.register_robot('exit-bot')\n"
              "store.buffer_working_memory(robot, recalled=[int(a) for a in sys.argv[2:]])\n")
    done = subprocess.run([sys.executable, "-c", script, database_url,
                           *map(str, ids[10:13])], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0, done.stderr
    assert counts(store, ids[10:13]) == dict.fromkeys(ids[10:13], 1)


def test_remember_many_matches_remember_one_by_one(ltm: LongTermMemory) -> None:
    single, batch = CountingEmbedder(64), CountingEmbedder(64)
    one = HTM("one-by-one", store=ltm, embedder=single, working_memory_size=30)
    many = HTM("in-batches", store=ltm, embedder=batch, working_memory_size=30)
    known = one.remember(FACTS[0][0], tags=FACTS[0][1])
    contents = [text for text, _ in FACTS] + [FACTS[1][0]]  # one repeated in the batch
    tags = [t for _, t in FACTS] + [["cache"]]
    ids = many.remember_many(contents, tags=tags)
    assert ids[0] == known and ids[4] == ids[1] and len(set(ids)) == 4
    assert sorted(batch.texts) == sorted(text for text, _ in FACTS[1:])  # new ones, once
    many.flush()
    frame = ltm.fetch_frame(
        "SELECT rn.node_id, rn.remember_count, n.in_working_memory, n.token_count, "
        "(SELECT count(*) FROM node_embedding_models m WHERE m.node_id = n.id) AS models "
        "FROM robot_nodes rn JOIN nodes n ON n.id = rn.node_id WHERE rn.robot_id = %s "
        "ORDER BY rn.node_id", (many.robot_id,))
    counts = {i: contents.count(c) for i, c in zip(ids, contents)}
    assert dict(zip(frame["node_id"], frame["remember_count"])) == counts
    assert dict(zip(frame["node_id"], frame["token_count"])) == {
        i: ha.count_tokens(c) for i, c in zip(ids, contents)}
    assert frame["models"].tolist() == [1, 1, 1, 1]
    assert ltm.get_node_tags(ids[3]) == ["database", "database:postgresql",
                                         "database:postgresql:extensions"]
    # a 30-token working memory holds the last memories that fit, flagged as held
    held = set(many.working_memory.keys())
    assert many.working_memory.token_count <= 30 and ids[4] in held
    assert set(frame.loc[frame["in_working_memory"], "node_id"]) >= held
    events = ltm.fetch_frame("SELECT count(*) AS n FROM memory_events WHERE kind = 'remember' "
                             "AND robot_id = %s", (many.robot_id,))
    assert events["n"].iloc[0] == 5


def test_remember_many_validates_everything_first(ltm: LongTermMemory) -> None:
    robot = HTM("careful", store=ltm)
    with pytest.raises(ValidationError) as error:
        robot.remember_many(["fine", "  "])
    assert error.value.field == "contents[1]"
    with pytest.raises(ValidationError) as error:
        robot.remember_many(["a", "b"], tags=[["ok"], ["Not A Tag"]])
    assert error.value.field == "tags[1]"
    with pytest.raises(ValidationError) as error:
        robot.remember_many(["a", "b"], token_counts=[1])
    assert error.value.field == "token_counts"
    for counts in (b"x", bytearray(b"x")):  # bytes are a sequence of ints, not of counts
        with pytest.raises(ValidationError) as error:
            robot.remember_many(["a"], token_counts=counts)
        assert error.value.field == "token_counts"
    assert robot.remember_many([]) == []
    assert ltm.fetch_frame("SELECT count(*) AS n FROM nodes")["n"].iloc[0] == 0


def test_sixteen_threads_share_one_connection_per_pool_without_errors(loaded: tuple) -> None:
    store, vectors, ids = loaded  # pool_size=1: every thread waits its turn, none fails
    robots = [HTM(f"thread-{t}", store=store) for t in range(16)]

    def work(t: int) -> tuple[list[int], int]:
        nearest = [store.search(embedding=vectors[(t + k) % 60], limit=3)[0]["id"]
                   for k in range(4)]
        recalled = sum(len(robots[t].recall("postgres tuning", strategy="fulltext", limit=5))
                       for _ in range(3))
        return nearest, recalled

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(work, range(16)))
    for t, (nearest, recalled) in enumerate(results):
        assert nearest == [ids[(t + k) % 60] for k in range(4)]
        assert recalled == 15
    store.flush_recall_writes()
    total = store.fetch_frame("SELECT sum(access_count) AS n FROM nodes")["n"].iloc[0]
    assert total == 16 * 15


def _terminate_search_connections(store: LongTermMemory, database_url: str) -> int:
    """End the backends of the store's idle search connections, waiting until they are gone;
    returns how many."""
    pids = [session.conn.info.backend_pid for session in store._search._idle]
    with psycopg.connect(database_url, autocommit=True) as admin:
        for pid in pids:  # the timeout makes the call wait until the backend has exited
            assert admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone()[0]
    return len(pids)


@pytest.mark.parametrize("checked", [True, False], ids=["idle-checked", "used-at-once"])
def test_a_search_connection_that_comes_back_broken_is_replaced(
        loaded: tuple, database_url: str, monkeypatch: pytest.MonkeyPatch, checked: bool) -> None:
    store, vectors, ids = loaded
    assert store.search(embedding=vectors[3], limit=1)[0]["id"] == ids[3]
    assert _terminate_search_connections(store, database_url) == 1
    # Checked before use (idle past IDLE_CHECK_SECONDS), or taken at once without a check.
    monkeypatch.setattr(search_pool, "IDLE_CHECK_SECONDS", 0.0 if checked else float("inf"))
    if checked:  # the check finds it broken and opens another: the caller sees nothing
        assert store.search(embedding=vectors[4], limit=1)[0]["id"] == ids[4]
    else:  # the search itself meets it: a typed error, and the connection is not kept
        with pytest.raises(DatabaseConnectionError):
            store.search(embedding=vectors[4], limit=1)
        assert store._search._idle == []
        assert store.search(embedding=vectors[4], limit=1)[0]["id"] == ids[4]
    assert len(store._search._idle) == 1  # one live connection, in place of the broken one
    assert store._search._open == 1


def _stored_models(url: str) -> list[tuple]:
    """The stored vectors' models as a store that has just opened reads them."""
    with LongTermMemory(url) as fresh:
        return sorted(map(tuple, stored_embedding_models(fresh)), key=repr)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(
    st.sampled_from(["add", "bulk_add"]),
    st.sampled_from([None, ("test", "model-a"), ("test", "model-b")]),
    st.sampled_from([3, 5]),
    st.integers(0, 6)), min_size=1, max_size=6))
def test_a_search_after_adds_reads_no_models_and_knows_them(database_url: str, steps) -> None:
    """Remember, then search, as an agent does: the store counts the vectors it added in the
    models it read instead of reading every memory's model again, and what it keeps is what a
    fresh read finds (re-remembered content, models, unnamed vectors, other dimensions)."""
    seen: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as db:
        db.execute("TRUNCATE nodes, robots CASCADE")
    with LongTermMemory(database_url, tracer=lambda text, *_: seen.append(text)) as store:
        robot = store.register_robot("agent")
        store.add(content="first", robot_id=robot, embedding=[1.0, 0.0, 0.0])
        store.search(embedding=[1.0, 0.0, 0.0], limit=1)  # reads the models once
        for kind, names, dimension, text in steps:
            vectors = unit(np.random.default_rng(text), 2, dimension)
            try:
                if kind == "add":
                    store.add(content=f"memory {text}", robot_id=robot, embedding=vectors[0],
                              embedding_model=names)
                else:
                    store.bulk_add([f"memory {text}", f"other {text}"], robots="agent",
                                   embeddings=vectors, embedding_model=names)
            except EmbeddingMismatchError:  # another model than the stored one: refused
                pass
        start = len(seen)
        assert store._embedding_models is not None
        kept = sorted(map(tuple, store._embedding_models), key=repr)
        if {d for _, _, d, _ in kept} == {3}:
            store.search(embedding=[1.0, 0.0, 0.0], limit=1)
        assert not [t for t in seen[start:] if "node_embedding_models" in t]
    assert kept == _stored_models(database_url)


def test_models_another_process_stores_are_seen_after_cache_ttl(database_url: str) -> None:
    with LongTermMemory(database_url, cache_ttl=0.5) as store, \
            LongTermMemory(database_url) as other:
        robot = store.register_robot("agent")
        store.add(content="mine", robot_id=robot, embedding=[1.0, 0.0, 0.0],
                  embedding_model=("test", "model-a"))
        store.check_embedding_model("test", "model-a", 3)  # reads the models: model-a only
        other.add(content="theirs", robot_id=robot, embedding=[0.0, 1.0, 0.0],
                  embedding_model=("test", "model-b"), check_models=False)
        store.check_embedding_model("test", "model-a", 3)  # kept: not read again yet
        time.sleep(0.6)
        with pytest.raises(EmbeddingMismatchError, match="test/model-b"):
            store.check_embedding_model("test", "model-a", 3)


def test_models_stored_in_a_block_that_rolls_back_are_not_kept(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as db:
        db.execute("TRUNCATE nodes, robots CASCADE")
    with LongTermMemory(database_url) as store:
        robot = store.register_robot("agent")
        store.add(content="kept", robot_id=robot, embedding=[1.0, 0.0, 0.0],
                  embedding_model=("test", "model-a"))
        store.check_embedding_model("test", "model-a", 3)  # reads the models
        with pytest.raises(RuntimeError), store.atomic():
            store.add(content="rolled back", robot_id=robot, embedding=[0.0, 1.0, 0.0],
                      embedding_model=("test", "model-b"), check_models=False)
            raise RuntimeError("the block fails")
        store.check_embedding_model("test", "model-a", 3)  # model-b was never stored
        assert sorted(map(tuple, stored_embedding_models(store)), key=repr) == \
            _stored_models(database_url)


def test_models_are_read_again_after_a_delete(database_url: str) -> None:
    """A deleted memory takes its vector with it: the kept models would still hold it."""
    with psycopg.connect(database_url, autocommit=True) as db:
        db.execute("TRUNCATE nodes, robots CASCADE")
    with LongTermMemory(database_url) as store:
        robot = store.register_robot("agent")
        store.check_embedding_model("test", "model-b", 3)  # reads the models: none
        node = store.add(content="gone soon", robot_id=robot, embedding=[1.0, 0.0, 0.0],
                         embedding_model=("test", "model-a"))["node_id"]
        store.delete(node)
        store.check_embedding_model("test", "model-b", 3)  # nothing of model-a is left
