"""Bulk loading, and a 10k-row load of the real corpus with its index plans."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import psycopg
import pytest
from fixtures_db import temporary_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from htm_analytics import DatabaseError, LongTermMemory, ValidationError
from htm_analytics.agent.datasets import normalize_tag, read_corpus, read_dev_queries
from htm_analytics.store.imports import MAX_IMPORT_KEY_BYTES

EVENT_KINDS = ["remember", "retrieve", "recall", "evict", "delete", "restore", "purge"]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.tuples(*[st.text(st.sampled_from("a\u00e9\u4e2d\U0001f600"), min_size=1,
                                 max_size=255)] * 2),
       key=st.tuples(st.sampled_from("k\u00e9\u4e2d\U0001f600"), st.integers(1, 3000)),
       kind=st.sampled_from([*EVENT_KINDS, "forget", "Remember", "recall "]))
def test_record_imports_refuses_what_the_table_cannot_hold_before_writing(
        ltm: LongTermMemory, names: tuple[str, str], key: tuple[str, int], kind: str) -> None:
    """An event kind the log's check constraint refuses, or a key the primary key's index
    cannot hold with the two names, is a ValidationError naming the record, not the
    database's refusal; everything else is recorded."""
    text = key[0] * key[1]
    size = sum(len(part.encode("utf-8")) for part in (*names, text))
    record = {"key": text, "record": {}, "event": (None, kind)}
    if size <= MAX_IMPORT_KEY_BYTES and kind.strip() in EVENT_KINDS:
        assert ltm.record_imports(*names, [record]) in (0, 1)  # 0: that key drawn before
        return
    with pytest.raises(ValidationError) as raised:
        ltm.record_imports(*names, [record])
    assert raised.value.field == "records[0]", raised.value


def test_bulk_add_deduplicates_like_add(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    ltm.add(content="already here", robot_id=ltm.register_robot("a"))
    when = [dt.datetime(2026, 1, d, tzinfo=dt.UTC) for d in (1, 2, 3, 4)]
    result = ltm.bulk_add(["already here", "new one", "new one", "new one"],
                          robots=["a", "a", "a", "b"], remembered_at=when,
                          tags=[["x:y"], [], ["z"], ["z"]],
                          embeddings=np.eye(4, dtype=np.float32))
    assert result["is_new"].tolist() == [False, True, False, False]
    assert result["node_id"].nunique() == 2
    earlier = db.execute("SELECT first_remembered_at FROM robot_nodes WHERE id = 1"
                         ).fetchone()[0]
    # An imported older remember counts, but never moves last_remembered_at backwards.
    assert db.execute("""SELECT r.name, n.content, rn.remember_count, rn.first_remembered_at,
                                rn.last_remembered_at
                         FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
                         JOIN nodes n ON n.id = rn.node_id ORDER BY 1, 2""").fetchall() == [
        ("a", "already here", 2, earlier, earlier),
        ("a", "new one", 2, when[1], when[2]),
        ("b", "new one", 1, when[3], when[3]),
    ]
    assert db.execute("SELECT created_at, embedding_dimension FROM nodes "
                      "WHERE content = 'new one'").fetchone() == (when[1], 4)
    assert ltm.get_node_tags(int(result["node_id"][1])) == ["z"]
    assert ltm.get_node_tags(int(result["node_id"][0])) == ["x", "x:y"]
    assert db.execute("SELECT count(*) FROM memory_events WHERE kind = 'remember'"
                      ).fetchone() == (5,)


@pytest.mark.parametrize("dimension", [None, 1, 384, 1999, 2000])
def test_bulk_add_pads_vectors_to_the_seed_column(ltm: LongTermMemory, db: psycopg.Connection,
                                                  dimension: int | None) -> None:
    """Each vector is stored whole, then zeros up to 2000; none at 2000, NULL without."""
    rng = np.random.default_rng(2)
    vectors = None if dimension is None else rng.normal(size=(3, dimension)).astype(np.float32)
    ltm.bulk_add(["one", "two", "three"], robots="r", embeddings=vectors, defer_indexes=True)
    stored = db.execute("SELECT embedding::text, embedding_dimension FROM nodes ORDER BY id"
                        ).fetchall()
    if vectors is None:
        assert stored == [(None, None)] * 3
        return
    for (text, stored_dimension), vector in zip(stored, vectors):
        values = np.array(json.loads(text), dtype=np.float32)
        assert stored_dimension == dimension and len(values) == 2000
        assert np.array_equal(values[:dimension], vector) and not values[dimension:].any()


def test_bulk_add_links_each_tag_at_its_first_remember(ltm: LongTermMemory,
                                                       db: psycopg.Connection) -> None:
    """A content remembered many times, out of time order and with different tags, gets each
    tag (and its ancestors) once, dated by the earliest remember that carried it."""
    rng = np.random.default_rng(5)
    names = ["a", "a:b", "a:b:c", "d", "d:e", "f"]
    contents = [f"memory {int(i)}" for i in rng.integers(0, 12, size=300)]
    when = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=int(h))
            for h in rng.integers(0, 40, size=300)]  # many equal times
    tags = [list(rng.choice(names, size=int(rng.integers(0, 3)), replace=False))
            for _ in range(300)]
    ltm.bulk_add(contents, robots="r", remembered_at=when, tags=tags)
    expected: dict[tuple[str, str], dt.datetime] = {}
    for content, at, row_tags in zip(contents, when, tags):
        for tag in row_tags:
            parts = tag.split(":")
            for depth in range(1, len(parts) + 1):
                key = (content, ":".join(parts[:depth]))
                expected[key] = min(at, expected.get(key, at))
    found = db.execute("""SELECT n.content, t.name, nt.created_at FROM node_tags nt
                          JOIN nodes n ON n.id = nt.node_id JOIN tags t ON t.id = nt.tag_id
                          """).fetchall()
    assert {(c, t): at for c, t, at in found} == expected and len(found) == len(expected)


def test_bulk_add_rejects_bad_rows_and_writes_nothing(ltm: LongTermMemory,
                                                      db: psycopg.Connection) -> None:
    with pytest.raises(ValidationError, match=r"contents\[1\]"):
        ltm.bulk_add(["fine", "  "], robots="r")
    with pytest.raises(ValidationError, match=r"tags\[0\]"):
        ltm.bulk_add(["fine"], robots="r", tags=[["Not Valid"]])
    with pytest.raises(ValidationError, match="row 1"):
        ltm.bulk_add(["a", "b"], robots="r", embeddings=np.array([[1.0, 0], [0, 0]]))
    with pytest.raises(ValidationError, match="one entry per content"):
        ltm.bulk_add(["a", "b"], robots=["r"])
    with pytest.raises(ValidationError) as info:
        ltm.bulk_add(["a"], robots="r", maintenance_work_mem="1.5GB")
    assert info.value.field == "maintenance_work_mem"
    assert db.execute("SELECT (SELECT count(*) FROM nodes) + (SELECT count(*) FROM robots)"
                      ).fetchone() == (0,)


def test_bulk_add_runs_several_times_in_one_transaction(ltm: LongTermMemory,
                                                        db: psycopg.Connection) -> None:
    """Each load stages its rows in temporary tables of its own call: a second load in the
    same atomic block (an importer's rows of two embedding dimensions, or none) works, a
    failed one in the block leaves nothing of itself, and rolling the block back leaves
    nothing at all."""
    with ltm.atomic():
        ltm.bulk_add(["x1"], robots="bb", tags=[["t:a"]])
        ltm.bulk_add(["x2"], robots="bb", tags=[["t:b"]], embeddings=np.ones((1, 3)))
        with pytest.raises(ValidationError):  # a bad load inside: its savepoint only
            ltm.bulk_add(["x3", " "], robots="bb")
        ltm.bulk_add(["x4", "x1"], robots=["bb", "cc"], embeddings=np.eye(2, 4),
                     check_models=False)
        ltm.record_imports("test", "t", [{"key": "1", "record": {}}])
        ltm.record_imports("test", "t", [{"key": "2", "record": {}}])
    assert db.execute("SELECT array_agg(content ORDER BY content) FROM nodes"
                      ).fetchone()[0] == ["x1", "x2", "x4"]
    assert db.execute("SELECT count(*) FROM import_records").fetchone()[0] == 2
    assert db.execute("SELECT sum(remember_count) FROM robot_nodes").fetchone()[0] == 4
    with pytest.raises(RuntimeError), ltm.atomic():
        ltm.bulk_add(["y1"], robots="dd")
        ltm.bulk_add(["y2"], robots="dd")
        raise RuntimeError("the block fails")
    assert db.execute("SELECT count(*) FROM robots WHERE name = 'dd'").fetchone()[0] == 0
    assert ltm.bulk_add(["y1"], robots="dd")["is_new"].tolist() == [True]


def test_bulk_add_with_deferred_indexes_rebuilds_them(ltm: LongTermMemory,
                                                      db: psycopg.Connection) -> None:
    before = db.execute("SELECT indexname, indexdef FROM pg_indexes "
                        "WHERE tablename = 'nodes' ORDER BY 1").fetchall()
    vectors = np.random.default_rng(1).normal(size=(50, 8)).astype(np.float32)
    ltm.bulk_add([f"row {i}" for i in range(50)], robots="r", embeddings=vectors,
                 defer_indexes=True)
    after = db.execute("SELECT indexname, indexdef FROM pg_indexes "
                       "WHERE tablename = 'nodes' ORDER BY 1").fetchall()
    assert after == before
    assert ltm.search(embedding=vectors[3], limit=1)[0]["content"] == "row 3"


def test_the_first_remember_creates_the_node_and_ids_follow_time(
        ltm: LongTermMemory, db: psycopg.Connection) -> None:
    day = [dt.datetime(2026, 3, d, tzinfo=dt.UTC) for d in (1, 2, 3)]
    result = ltm.bulk_add(["late", "early", "late"], robots="r",
                          remembered_at=[day[2], day[0], day[1]])
    assert result["is_new"].tolist() == [False, True, True]  # row 2 remembered "late" first
    assert db.execute("SELECT content, created_at FROM nodes ORDER BY id").fetchall() == [
        ("early", day[0]), ("late", day[1])]


def test_a_fleet_of_robots_in_one_load(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    # More robots than the server's lock table holds for one transaction (64 locks per
    # connection): find-or-create locks a bounded number of name buckets, not each name.
    start = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    known = ltm.register_robot("robot-00000")
    robots = [f"robot-{i % 20000:05d}" for i in range(20400)]
    times = [start + dt.timedelta(minutes=i) for i in range(20400)]
    result = ltm.bulk_add([f"note {i}" for i in range(20400)], robots=robots,
                          remembered_at=times)
    assert result["is_new"].all()
    assert db.execute("SELECT count(*), count(DISTINCT name) FROM robots").fetchone() \
        == (20000, 20000)
    assert db.execute("SELECT min(id) FROM robots WHERE name = 'robot-00000'").fetchone() \
        == (known,)
    # created at its first remember, active at its last (robot 7 remembered rows 7 and 20007)
    assert db.execute("SELECT created_at, last_active FROM robots WHERE name = 'robot-00007'"
                      ).fetchone() == (times[7], times[20007])
    assert db.execute("""SELECT count(*) FROM robot_nodes rn JOIN robots r
                         ON r.id = rn.robot_id""").fetchone() == (20400,)

# Every index of the database with its definition, and what a load sets for itself.
_INDEXES = ("SELECT tablename, indexname, indexdef FROM pg_indexes "
            "WHERE schemaname = 'public' ORDER BY 1, 2")
_LOAD_SETTINGS = ("SELECT name, coalesce(current_setting(name, true), '') AS value "
                  "FROM unnest(ARRAY['maintenance_work_mem', 'min_parallel_table_scan_size', "
                  "'max_parallel_maintenance_workers', 'statement_timeout', "
                  "'htm_analytics.events_written']) AS name ORDER BY 1")


def test_a_deferred_load_sizes_its_builds_and_leaves_indexes_and_settings_as_they_were(
        database_url: str, db: psycopg.Connection) -> None:
    # A server with little maintenance memory: 300 padded vectors take about 2.8MB as an
    # HNSW graph, so the load raises the setting for its own transaction.
    db.execute(sql.SQL("ALTER DATABASE {} SET maintenance_work_mem = '1MB'").format(
        sql.Identifier(db.info.dbname)))
    frame, vectors = read_corpus(rows=300)
    traced: list[tuple[str, Any]] = []
    with LongTermMemory(database_url, pool_size=1,
                        tracer=lambda text, params, _: traced.append((text, params))) as store:
        store.create_native_index(384)
        indexes = db.execute(_INDEXES).fetchall()
        settings = store.fetch_frame(_LOAD_SETTINGS)
        del traced[:]
        store.bulk_add(frame["content"].tolist(), robots="r", embeddings=vectors,
                       defer_indexes=True)
        assert db.execute(_INDEXES).fetchall() == indexes
        assert store.fetch_frame(_LOAD_SETTINGS).equals(settings)  # the same connection
        assert store.search(embedding=vectors[5], limit=1)[0]["content"] == \
            frame["content"].iloc[5]
    raised = [params[0] for text, params in traced
              if "set_config('maintenance_work_mem'" in text]
    assert len(raised) == 1 and int(raised[0].removesuffix("kB")) * 1024 >= 300 * 9_300


def test_a_native_index_build_sizes_its_memory(database_url: str,
                                              db: psycopg.Connection) -> None:
    db.execute(sql.SQL("ALTER DATABASE {} SET maintenance_work_mem = '1MB'").format(
        sql.Identifier(db.info.dbname)))
    frame, vectors = read_corpus(rows=3000)
    traced: list[tuple[str, Any]] = []
    with LongTermMemory(database_url, tracer=lambda text, params, _: traced.append(
            (text, params))) as store:
        store.bulk_add(frame["content"].tolist(), robots="r", embeddings=vectors)
        with pytest.raises(ValidationError) as bad:
            store.create_native_index(384, maintenance_work_mem="lots")
        assert bad.value.field == "maintenance_work_mem"
        stored, counted = db.execute("SELECT reltuples::bigint, (SELECT count(*) FROM nodes) "
                                     "FROM pg_class WHERE oid = 'nodes'::regclass").fetchone()
        del traced[:]
        store.create_native_index(384)  # 3,000 vectors of 384: about 8MB of graph
        raised = [params[0] for text, params in traced
                  if "set_config('maintenance_work_mem'" in text]
        # the graph's bytes (hnsw_graph_bytes: 4 * 384 + 8 + 80 * 16 per vector, as many as
        # the planner counts), a tenth more, and 16MB
        assert counted > 2800 and abs(stored - counted) < counted / 20
        assert raised == [f"{int(stored * 2824 * 1.1) // 1024 + 16 * 1024}kB"]
        store.create_native_index(16, maintenance_work_mem="64MB")  # as asked, not sized
        raised = [params[0] for text, params in traced
                  if "set_config('maintenance_work_mem'" in text]
        assert raised[1:] == ["65536kB"]
        assert store.fetch_frame("SHOW maintenance_work_mem").iloc[0, 0] == "1MB"
        assert store.search(embedding=vectors[7], limit=1)[0]["content"] == \
            frame["content"].iloc[7]


def test_a_load_failing_in_its_index_rebuild_writes_nothing_and_keeps_the_indexes(
        ltm: LongTermMemory, db: psycopg.Connection) -> None:
    ltm.bulk_add(["stored before"], robots="r", embeddings=np.ones((1, 4), np.float32))
    indexes = db.execute(_INDEXES).fetchall()
    counts = ("SELECT (SELECT count(*) FROM nodes), (SELECT count(*) FROM robot_nodes), "
              "(SELECT count(*) FROM node_tags), (SELECT count(*) FROM memory_events), "
              "(SELECT count(*) FROM node_search_vectors), (SELECT count(*) FROM robots)")
    before = db.execute(counts).fetchone()
    # The last step of a deferred load fails: every row is in, the indexes are dropped.
    db.execute("""CREATE FUNCTION refuse_index() RETURNS event_trigger LANGUAGE plpgsql AS
                  $$ BEGIN RAISE EXCEPTION 'no index today'; END $$""")
    db.execute("CREATE EVENT TRIGGER refuse_index ON ddl_command_end "
               "WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION refuse_index()")
    vectors = np.random.default_rng(3).normal(size=(40, 4)).astype(np.float32)
    with pytest.raises(DatabaseError, match="no index today"):
        ltm.bulk_add([f"row {i}" for i in range(40)], robots=["r", "s"] * 20,
                     embeddings=vectors, tags=[["a:b"]] * 40, defer_indexes=True,
                     maintenance_work_mem="64MB")
    db.execute("DROP EVENT TRIGGER refuse_index")
    assert db.execute(counts).fetchone() == before
    assert db.execute(_INDEXES).fetchall() == indexes
    assert ltm.search(embedding=np.ones(4, np.float32), limit=1)[0]["content"] == \
        "stored before"


def test_index_builds_fall_back_to_serial_without_shared_memory(server_url: str) -> None:
    # A parallel HNSW build asks for maintenance_work_mem of shared memory up front; 100GB is
    # more than the server can have, as 1GB is in a Docker container with a 64MB /dev/shm.
    frame, vectors = read_corpus(rows=300)
    with temporary_database(server_url, "htm_shm") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            database = conn.info.dbname
            conn.execute(sql.SQL("ALTER DATABASE {} SET maintenance_work_mem = '100GB'").format(
                sql.Identifier(database)))
        with LongTermMemory(url) as store:
            store.bulk_add(frame["content"].tolist(), robots="r", embeddings=vectors,
                           defer_indexes=True)
            with psycopg.connect(url) as conn:  # the precondition: a parallel build fails
                conn.execute("SET min_parallel_table_scan_size = 0")
                try:
                    conn.execute("CREATE INDEX ON nodes USING hnsw (embedding vector_cosine_ops)")
                except psycopg.errors.DiskFull:
                    conn.rollback()
                else:
                    pytest.skip("this server can allocate 100GB of shared memory")
            name = store.create_native_index(384)
            assert store.search(embedding=vectors[7], limit=1)[0]["content"] == \
                frame["content"].iloc[7]
            assert name in store.index_list()["index"].tolist()


def test_normalize_tag() -> None:
    assert normalize_tag("devel:lang:c++") == "devel:lang:cpp"
    assert normalize_tag("implemented-in:TODO") is None
    assert normalize_tag("Works-With:Foo Bar") == "works-with:foo-bar"


@pytest.fixture(scope="module")
def corpus_store(server_url: str) -> object:
    """10,000 corpus rows loaded once for this module, in their own database."""

    frame, vectors = read_corpus(rows=10_000)
    with temporary_database(server_url, "htm_corpus") as url, LongTermMemory(url) as store:
        result = store.bulk_add(frame["content"].tolist(),
                                robots=frame["maintainer"].tolist(),
                                embeddings=vectors, tags=frame["tags"].tolist())
        store.create_native_index(384)
        store._fetch("ANALYZE nodes")  # fresh statistics for the plans below
        yield store, frame, vectors, result


def plan(store: LongTermMemory, statement: str, params: object = None) -> str:
    """The plan of a statement on a search connection, under the settings searches use."""
    with store._search_cursor(ef_search=40) as cur:
        rows = cur.execute("EXPLAIN " + statement, params).fetchall()
    return "\n".join(r["QUERY PLAN"] for r in rows)


@pytest.mark.slow
def test_corpus_load_counts(corpus_store: tuple) -> None:
    store, frame, _, result = corpus_store
    distinct = frame["content"].str.strip().nunique()
    counts = store.table_counts().set_index("table")["rows"]
    assert counts["nodes"] == distinct == int(result["is_new"].sum())
    assert counts["robots"] == frame["maintainer"].nunique()
    assert counts["memory_events"] == 10_000
    pairs = frame.assign(content=frame["content"].str.strip()).drop_duplicates(
        ["maintainer", "content"])
    assert counts["robot_nodes"] == len(pairs)


@pytest.mark.slow
def test_corpus_searches_use_the_indexes(corpus_store: tuple) -> None:
    store, _, vectors, _ = corpus_store
    padded = np.zeros(2000, dtype=np.float32)
    padded[:384] = vectors[0]
    assert "idx_nodes_embedding " in plan(
        store, "SELECT id FROM nodes n WHERE n.embedding IS NOT NULL "
               "ORDER BY n.embedding <=> %s LIMIT 10", (padded,)) + " "
    assert "idx_nodes_embedding_384" in plan(
        store, "SELECT id FROM nodes n WHERE n.embedding_dimension = 384 ORDER BY "
               "(subvector(n.embedding, 1, 384)::vector(384)) <=> %s LIMIT 10", (vectors[0],))
    assert "idx_nodes_content_gin" in plan(
        store, "SELECT id FROM nodes n, (SELECT plainto_tsquery('english', 'python library') "
               "AS q) tsq WHERE to_tsvector('english', n.content) @@ q")
    assert "idx_nodes_content_trgm" in plan(
        store, "SELECT id FROM nodes n WHERE 'pyhton libary' <% n.content")


@pytest.mark.slow
def test_corpus_vector_recall_is_real(corpus_store: tuple) -> None:
    """Titles find their package description through both indexes, as on production data."""
    store, frame, _, _ = corpus_store
    queries, query_vectors = read_dev_queries()
    content_of_row = dict(zip(frame["row"], frame["content"].str.strip()))
    chosen = [i for i, row in enumerate(queries["row"]) if row in content_of_row][:200]
    assert len(chosen) >= 100

    def recall(pad: bool) -> float:
        if pad:  # the seed's padded index even where a native one exists, at ef_search 40
            with store.tuning_session() as session:
                found = session.knn(query_vectors[chosen], dimension=384, k=10, ef_search=40,
                                    target="padded")
            contents = store.fetch_frame("SELECT id, content FROM nodes WHERE id = ANY(%s)",
                                         ([int(i) for ids in found["ids"] for i in ids],))
            content_of_id = dict(zip(contents["id"], contents["content"]))
            results = [{content_of_id[int(i)] for i in ids} for ids in found["ids"]]
        else:
            results = [{r["content"] for r in store.search(embedding=query_vectors[i], limit=10)}
                       for i in chosen]
        hits = sum(content_of_row[queries["row"][i]] in found_contents
                   for i, found_contents in zip(chosen, results))
        return hits / len(chosen)

    native, padded = recall(pad=False), recall(pad=True)
    print(f"recall@10 on {len(chosen)} dev queries: native {native:.3f}, padded {padded:.3f}")
    assert native > 0.6 and padded > 0.6  # dense MiniLM recall@10 is about 0.78 here


@pytest.mark.slow
def test_corpus_hybrid_and_tag_queries(corpus_store: tuple) -> None:
    store, _, vectors, _ = corpus_store
    rows = store.search_hybrid(query="python library for parsing xml", embedding=vectors[0],
                               fusion="rrf", limit=10)
    assert len(rows) == 10 and all(r["rrf_score"] > 0 for r in rows)
    tagged = store.nodes_by_topic("devel:lang", limit=5)
    assert len(tagged) == 5
    for node in tagged:
        assert any(t == "devel:lang" or t.startswith("devel:lang:")
                   for t in store.get_node_tags(node["id"]))
    popular = store.popular_tags(limit=5)
    assert popular[0]["usage_count"] >= popular[-1]["usage_count"]


def test_a_load_larger_than_the_table_refreshes_planner_statistics(
        ltm: LongTermMemory, db: psycopg.Connection) -> None:
    for table in ("nodes", "node_search_vectors"):  # only the load may analyze them
        db.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    frame, _ = read_corpus(rows=1_000, embeddings=False)
    statistics = ("SELECT count(*) FROM pg_stats WHERE schemaname = 'public' "
                  "AND tablename = 'node_search_vectors' AND attname = 'content_tsv'")
    assert db.execute(statistics).fetchone()[0] == 0
    ltm.bulk_add(frame["content"].tolist(), robots="loader", defer_indexes=True)
    assert db.execute(statistics).fetchone()[0] == 1
    analyzed = db.execute("SELECT reltuples FROM pg_class WHERE relname = 'nodes'").fetchone()
    assert analyzed[0] == len(set(frame["content"].str.strip()))
