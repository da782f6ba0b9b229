"""The query log (migration 011): recalls log their query vectors, bounded, only where the
role may; collect measures recall on a sample of them against exact search, flags its drift,
and says so where nothing is logged. Recall samples stay put as memories are added."""

from __future__ import annotations

import json
import uuid

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from fixtures_db import select_only_role
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from htm_analytics import HTM, LongTermMemory, ValidationError, benchmark_recall
from htm_analytics.advisor import collect_sample, drift_findings, history, split_statements
from htm_analytics.advisor.collect import _sampled_recall
from htm_analytics.cli import cli
from htm_analytics.store.query_log import QUERY_LOG_SLOTS
from htm_analytics.tuning import stable_sample

LOGGED_ROWS = "SELECT count(*) FROM memory_query_vectors"



def _statements(text: str) -> list[str]:
    """The statements of a finding's ``sql``, without their semicolons."""
    return [statement.rstrip(";") for statement in split_statements(text)]

def _logged(db: psycopg.Connection) -> int:
    return int(db.execute(LOGGED_ROWS).fetchone()[0])


def test_recalls_log_their_query_vectors_bounded(database_url, db):
    with LongTermMemory(database_url) as store, \
            HTM("asker", store=store, embedder="hashing", log_queries=3) as htm:
        htm.remember_many([f"note {i} about postgres indexes and vacuum" for i in range(20)])
        topics = [f"question {i} about vacuum" for i in range(5)]
        for topic in topics:
            htm.recall(topic)
        htm.recall("vacuum", strategy="fulltext")  # no vector: nothing to log
        rows = db.execute("SELECT query_id, robot_id, embedding::real[] "
                          "FROM memory_query_vectors ORDER BY query_id").fetchall()
        assert len(rows) == 2  # the first vector recall, then one in three: the 4th
        assert {robot for _, robot, _ in rows} == {htm.robot_id}
        expected = htm.embedder.embed([topics[0], topics[3]])
        np.testing.assert_allclose([row[2] for row in rows], expected, rtol=1e-6)
    # However many are logged, the log keeps the last QUERY_LOG_SLOTS.
    last = db.execute("SELECT max(query_id) FROM memory_query_vectors").fetchone()[0]
    db.execute("SELECT htm_analytics_log_query_vector('[1,2,3]'::vector, NULL) "
               "FROM generate_series(1, %s)", [QUERY_LOG_SLOTS + 5])
    low, high, rows = db.execute("SELECT min(query_id), max(query_id), count(*) "
                                 "FROM memory_query_vectors").fetchone()
    assert rows == QUERY_LOG_SLOTS and high == last + QUERY_LOG_SLOTS + 5
    assert high - low == QUERY_LOG_SLOTS - 1


def test_only_roles_that_may_write_log(database_url, db):
    vector = np.ones(8, dtype=np.float32)
    with LongTermMemory(database_url, read_only=True) as store:
        assert not store.logs_query_vectors and store.log_query_vector(vector) is None
    with select_only_role(database_url, db) as reader, LongTermMemory(reader) as store:
        assert not store.logs_query_vectors and store.log_query_vector(vector) is None
        ids, vectors = store.logged_query_vectors(8)  # readers read it
        assert len(ids) == 0 and vectors.shape == (0, 8)
    # A writer made after init-db, without EXECUTE on the log: its recalls work, unlogged.
    writer = f"htm_late_writer_{uuid.uuid4().hex[:8]}"
    db.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(writer)))
    try:
        for grant in ("GRANT USAGE ON SCHEMA public TO {}",
                      "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {}",
                      "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {}"):
            db.execute(sql.SQL(grant).format(sql.Identifier(writer)))
        url = f"{database_url} user={writer}"
        with LongTermMemory(url) as store, \
                HTM("late", store=store, embedder="hashing", log_queries=1) as htm:
            assert not store.logs_query_vectors
            htm.remember("vacuum keeps tables healthy")
            assert htm.recall("vacuum") == ["vacuum keeps tables healthy"]
        assert _logged(db) == 0
        db.execute(sql.SQL("GRANT EXECUTE ON FUNCTION htm_analytics_log_query_vector(vector, "
                           "bigint) TO {}").format(sql.Identifier(writer)))
        with LongTermMemory(url) as store, \
                HTM("late", store=store, embedder="hashing", log_queries=1) as htm:
            htm.recall("vacuum")
        assert _logged(db) == 1
    finally:
        db.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(writer)))
        db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(writer)))
    # Without the log (removed as docs/production.md says): nothing logged, nothing created.
    db.execute("DROP FUNCTION htm_analytics_log_query_vector(vector, bigint)")
    db.execute("DROP TABLE memory_query_vectors")
    with LongTermMemory(database_url) as store:
        assert not store.logs_query_vectors and store.log_query_vector(vector) is None
        assert store.logged_query_vectors(8) is None
    assert db.execute("SELECT to_regclass('memory_query_vectors')").fetchone()[0] is None


def _set_ef_search(db: psycopg.Connection, value: int) -> None:
    db.execute(sql.SQL("ALTER DATABASE {} SET hnsw.ef_search = {}").format(
        sql.Identifier(db.info.dbname), sql.Literal(value)))


def test_collect_measures_recall_on_logged_queries(history_reader_url, database_url, db,
                                                   tmp_path):
    rng = np.random.default_rng(11)
    with LongTermMemory(database_url) as store:
        for vector in rng.normal(size=(30, 16)):
            store.log_query_vector(vector)
        store.log_query_vector(rng.normal(size=8))  # another model's: not comparable
    path = tmp_path / "history.duckdb"

    def collect() -> dict:
        with LongTermMemory(history_reader_url, read_only=True) as store:
            return collect_sample(store, path, recall_queries=20)["samples"].iloc[0]

    _set_ef_search(db, 400)  # an exhaustive search of 120 vectors: recall 1
    first = collect()
    assert first["logged_queries"] == 30 and first["logged_recall_queries"] == 20
    assert first["logged_recall"] == 1.0
    assert first["logged_recall_low"] < 1.0 == first["logged_recall_high"]
    assert collect()["logged_recall"] == 1.0  # nothing changed: the same
    # nothing but, when other tests' statements filled pg_stat_statements, its evictions
    assert set(drift_findings(history(path))["check"]) <= {"statements_evicted"}

    _set_ef_search(db, 1)  # one candidate per search: recall at most 1/10
    done = CliRunner().invoke(cli, ["--db", history_reader_url, "collect", "--history",
                                    str(path), "--recall-queries", "20", "--check",
                                    "--json"])
    assert done.exit_code == 4, done.output
    document = json.loads(done.stdout)
    assert "logged queries" in document["sample"]["recall"]
    findings = [f for f in document["findings"] if f["check"] != "statements_evicted"]
    checks = {f["check"]: f["severity"] for f in findings}
    assert checks == {"recall_drift": "critical", "logged_recall_drift": "warning"}
    # Both searched the padded index (no native one here): the rebuild names it; the
    # logged-query warning suggests no rebuild of its own.
    statements = {f["check"]: _statements(f["sql"]) for f in findings}
    assert statements == {
        "recall_drift": ["SHOW hnsw.ef_search",
                         'REINDEX INDEX CONCURRENTLY "public"."idx_nodes_embedding"'],
        "logged_recall_drift": ["SHOW hnsw.ef_search"]}
    last = history(path).recall.iloc[-1]
    assert last["logged_recall"] <= 0.1 + 1e-9 < last["logged_baseline_low"]
    # Both samples are searched in one pass, by the rules of benchmark_recall: the same
    # stored queries give the same recall there.
    with LongTermMemory(history_reader_url, read_only=True) as store:
        for ef in (4, 8):
            measured = _sampled_recall(store, ef, 20, 10, 0)
            swept = benchmark_recall(store, queries=20, k=10, ef_search=[ef], repeats=1,
                                     seed=0, progress=False)
            assert 0 < measured["recall"] < 1, measured
            assert measured["recall"] == pytest.approx(swept["recall_mean"].iloc[0])


def test_recall_samples_stay_put_as_memories_are_added(history_reader_url, database_url):
    """The held-out sample is the ids hashing lowest: adding 12 memories to 120 displaces
    exactly as many chosen ones as new ones enter it, and an unchanged memory gives the same
    sample (and the same recall: tests/test_history.py)."""
    def ids() -> np.ndarray:
        with LongTermMemory(history_reader_url, read_only=True) as store, \
                store.tuning_session() as session:
            return session.stored_ids(16)

    before = ids()
    chosen = stable_sample(before, 40, seed=0)
    assert np.array_equal(chosen, stable_sample(ids(), 40, seed=0))
    rng = np.random.default_rng(5)
    with LongTermMemory(database_url) as store:
        robot = store.register_robot("newcomer")
        for i in range(12):
            store.add(content=f"new memory {i}", robot_id=robot, embedding=rng.normal(size=16))
    after = ids()
    now = stable_sample(after, 40, seed=0)
    added = set(after) - set(before)
    assert len(set(chosen) - set(now)) == len(set(now) & added) <= 8
    assert len(set(chosen) & set(now)) >= 32


@settings(max_examples=200, deadline=None)
@given(ids=st.sets(st.integers(1, 2**62), min_size=1, max_size=300),
       extra=st.sets(st.integers(1, 2**62), max_size=60), n=st.integers(1, 50),
       seed=st.integers(-(2**63), 2**63 - 1))
def test_a_stable_sample_only_changes_by_what_was_added(ids, extra, n, seed):
    old = np.array(sorted(ids), dtype=np.int64)
    grown = np.array(sorted(ids | extra), dtype=np.int64)
    before, after = stable_sample(old, n, seed), stable_sample(grown, n, seed)
    assert len(before) == min(n, len(old)) and len(set(before)) == len(before)
    assert set(before) <= set(old)
    new = set(after) - set(before)
    assert new <= extra - ids  # only added ids can enter ...
    assert len(set(before) - set(after)) == len(new) - (len(after) - len(before))  # ... each
    assert np.array_equal(stable_sample(old[::-1], n, seed), before)  # order does not matter
    unchosen = np.setdiff1d(old, before)
    if len(unchosen):  # removing an id not chosen changes nothing
        assert np.array_equal(stable_sample(np.setdiff1d(old, unchosen[:1]), n, seed), before)


def test_seeds_choose_differently_and_bad_arguments_are_named():
    ids = np.arange(1, 1001)
    assert len(set(stable_sample(ids, 100, 0)) & set(stable_sample(ids, 100, 1))) < 40
    for n, seed, field in ((-1, 0, "n"), (2.5, 0, "n"), (10, "0", "seed"), (10, 2**64, "seed")):
        with pytest.raises(ValidationError) as raised:
            stable_sample(ids, n, seed)
        assert raised.value.field == field
