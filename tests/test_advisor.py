"""The advisor: each check provoked for real on its own database, found, absent from a clean
one, and every recommended statement run on a throwaway copy."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from htm_analytics import (
    AdvisorThresholds,
    LongTermMemory,
    ValidationError,
    advise,
    concurrency_sweep,
    recommend_ef_search,
)
from htm_analytics.advisor import (
    FINDING_COLUMNS,
    FINDINGS_SCHEMA_VERSION,
    gate_exit_code,
    split_statements,
)
from htm_analytics.cli import cli, main
from htm_analytics.store import database_name, hnsw_graph_bytes, scratch_database

# Long enough for the provoked sessions, short enough for a test.
FAST = AdvisorThresholds(long_query_seconds=0.3, idle_transaction_seconds=0.3)


def _flush(conn: psycopg.Connection) -> None:
    """Make this connection's statistics visible to other sessions."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")


def _sleep_in(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_sleep(2)")


def _wait_until_long_running(url: str, query: str, *, seconds: float) -> None:
    """Return once ``query`` has been running for ``seconds`` in another session (the
    server watches for it; at most 10 s)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET statement_timeout = '10s'")
        conn.execute(psycopg.sql.SQL("""
            DO $$ BEGIN
                WHILE NOT EXISTS (
                    SELECT 1 FROM pg_stat_activity WHERE query = {query} AND state = 'active'
                    AND clock_timestamp() - query_start > {age}::interval) LOOP
                    -- pg_stat_activity is read once per transaction unless cleared
                    PERFORM pg_sleep(0.02), pg_stat_clear_snapshot();
                END LOOP;
            END $$""").format(query=psycopg.sql.Literal(query),
                              age=psycopg.sql.Literal(f"{seconds} seconds")))


def _found(frame, check: str, obj: str | None = None):
    rows = frame[frame["check"] == check]
    return rows if obj is None else rows[rows["object"] == obj]


def test_clean_database_has_only_the_reference_schema_findings(ltm, statement_statistics):
    frame = advise(ltm)
    assert {c: str(t) for c, t in frame.dtypes.items()} == FINDING_COLUMNS
    # Where pg_stat_statements records (the embedded server preloads it): no slow statement
    # here; where it does not, one note says how to have it.
    assert set(frame["check"]) == {"duplicate_index", "unused_index"} | (
        set() if statement_statistics.recorded else {"slow_queries"})
    duplicates = _found(frame, "duplicate_index")
    assert sorted(duplicates["object"]) == ["public.idx_node_tags_node_id",
                                            "public.idx_robot_nodes_robot_id"]
    assert "prefix of idx_robot_nodes_unique (robot_id, node_id)" in " ".join(
        duplicates["evidence"])
    # Minutes-old statistics: one question, saying how old they are, not a list of drops.
    unused = _found(frame, "unused_index")
    assert len(unused) == 1 and unused["severity"].iloc[0] == "info"
    assert "the database was created" in unused["evidence"].iloc[0]
    assert re.search(r"created \(never reset\) \d+ (second|seconds|minutes) ago",
                     unused["evidence"].iloc[0])
    assert "DROP" not in unused["sql"].iloc[0]


def _has_statement_statistics(conn: psycopg.Connection) -> bool:
    return bool(conn.execute("SELECT count(*) FROM pg_extension "
                             "WHERE extname = 'pg_stat_statements'").fetchone()[0])


def _three_slow_application_statements(url: str, alias: str) -> None:
    """Three calls of a 20 ms statement, as the application's (skips without statistics)."""
    with psycopg.connect(url, autocommit=True) as conn:
        if os.environ.get("HTM_TEST_DSN") and not _has_statement_statistics(conn):
            pytest.skip("HTM_TEST_DSN's server does not load pg_stat_statements")
        for _ in range(3):
            conn.execute(sql.SQL("SELECT pg_sleep(0.02) AS {}").format(sql.Identifier(alias)))


def test_slow_statements_are_recorded_out_of_the_box(ltm, database_url):
    _three_slow_application_statements(database_url, "slow_marker")
    frame = advise(ltm, thresholds=AdvisorThresholds(slow_query_ms=15, slow_query_calls=3))
    slow = _found(frame, "slow_queries")
    assert slow["severity"].tolist() == ["warning"]
    assert "slow_marker" in slow["evidence"].iloc[0]
    with psycopg.connect(database_url, autocommit=True) as conn:
        mean, stddev = conn.execute(
            "SELECT mean_exec_time, stddev_exec_time FROM pg_stat_statements "
            "WHERE query LIKE '%slow_marker%' AND query NOT LIKE '%pg_stat_statements%' "
            "AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    # The average with its spread over the calls, as pg_stat_statements counted them.
    assert f"{mean:.1f} ms on average (standard deviation {stddev:.1f} ms) over 3 calls" in \
        slow["evidence"].iloc[0]


def test_the_toolkits_own_slow_statements_are_set_apart(ltm, database_url):
    _three_slow_application_statements(database_url, "application_marker")
    for _ in range(3):
        # A read through the toolkit, and rows through one of its named cursors (as the
        # stale listing's): slow here by pg_sleep. (Not the application's statement with
        # another alias: pg_stat_statements would count both as one, by their parse tree.)
        ltm.fetch_frame("SELECT count(*) AS analysis_marker FROM (SELECT pg_sleep(0.02)) s")
        with ltm._transaction() as cur, cur.connection.cursor(name="probe") as named:
            named.execute("SELECT pg_sleep(0.02) FROM generate_series(1, 2)")
            named.fetchall()
    frame = advise(ltm, thresholds=AdvisorThresholds(slow_query_ms=15, slow_query_calls=3))
    slow = _found(frame, "slow_queries")
    assert slow["severity"].tolist() == ["warning", "info"]
    application, own = slow["evidence"]
    assert "application_marker" in application
    assert "2 slow statements of this toolkit's own analyses" in own
    assert 'FETCH FORWARD ALL FROM "htm_analytics_probe"' in own  # the most time of the two
    assert slow["object"].tolist()[1] == "htm_analytics"
    with psycopg.connect(database_url, autocommit=True) as conn:  # what it says to run
        listed = [row[3] for row in conn.execute(slow["sql"].iloc[1]).fetchall()]
    assert any("analysis_marker" in text for text in listed)
    assert any('"htm_analytics_probe"' in text for text in listed)


def test_statement_statistics_are_created_by_init_db_only(empty_database_url, database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP EXTENSION IF EXISTS pg_stat_statements")
    with LongTermMemory(database_url) as store:  # a read: the extension stays absent
        frame = advise(store)
    assert _found(frame, "slow_queries")["severity"].tolist() == ["info"]
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert not _has_statement_statistics(conn)
    LongTermMemory(empty_database_url, init_schema=True).close()  # init-db
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        loaded = conn.execute("SELECT current_setting('shared_preload_libraries') "
                              "~ 'pg_stat_statements'").fetchone()[0]
        assert _has_statement_statistics(conn) == loaded
        assert loaded or os.environ.get("HTM_TEST_DSN")  # the embedded server loads it


def _provoke(url: str, conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE adv_dup (x int, y int)")
    conn.execute("CREATE INDEX adv_dup_a ON adv_dup (x)")
    conn.execute("CREATE INDEX adv_dup_b ON adv_dup (x)")
    conn.execute("CREATE INDEX adv_dup_xy ON adv_dup (x, y)")
    conn.execute("CREATE TABLE adv_invalid AS SELECT 1 AS x FROM generate_series(1, 2)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("CREATE UNIQUE INDEX CONCURRENTLY adv_invalid_x ON adv_invalid (x)")
    conn.execute("CREATE TABLE adv_dead (id int) WITH (autovacuum_enabled = off)")
    conn.execute("INSERT INTO adv_dead SELECT generate_series(1, 2000)")
    conn.execute("DELETE FROM adv_dead WHERE id > 500")
    conn.execute("CREATE TABLE adv_seq (id serial PRIMARY KEY, note text)")
    conn.execute("SELECT setval('adv_seq_id_seq', 2000000000)")
    conn.execute("CREATE TABLE adv_scan (id int PRIMARY KEY, v int)")
    conn.execute("INSERT INTO adv_scan SELECT i, i % 7 FROM generate_series(1, 10000) i")
    conn.execute("SELECT v FROM adv_scan WHERE id = 5")
    for _ in range(20):
        conn.execute("SELECT count(*) FROM adv_scan WHERE v = 3")
    # Cache misses for real: evict the table's pages, then read them back.
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_buffercache'"
                        ).fetchone():
        pytest.skip("needs pg_buffercache (PostgreSQL 18 for pg_buffercache_evict_relation)")
    conn.execute("CREATE EXTENSION pg_buffercache")
    if conn.execute("SELECT to_regproc('pg_buffercache_evict_relation')").fetchone()[0] is None:
        pytest.skip("needs pg_buffercache_evict_relation (PostgreSQL 18)")
    for _ in range(60):
        conn.execute("SELECT pg_buffercache_evict_relation('adv_scan')")
        conn.execute("SELECT count(*) FROM adv_scan")
    # A rebuild of the HNSW graph that cannot fit: new sessions get 1 MB.
    conn.execute(sql.SQL("ALTER DATABASE {} SET maintenance_work_mem = '1MB'").format(
        sql.Identifier(conn.info.dbname)))
    _flush(conn)


def test_provoked_checks_are_found_and_their_sql_runs(database_url, server_url):
    rng = np.random.default_rng(0)
    with psycopg.connect(database_url, autocommit=True) as conn:
        _provoke(database_url, conn)
    with LongTermMemory(database_url) as store:
        robot = store.register_robot("advisor")
        ids = [store.add(content=f"memory {i}", robot_id=robot, token_count=2,
                         embedding=rng.normal(size=16))["node_id"] for i in range(150)]
        store.add(content="three dimensions", robot_id=robot, embedding=[0.1, 0.2, 0.3],
                  check_models=False)
        for _ in range(3):  # recalls: updates of the recall columns, none HOT
            store.track_access(ids[:50], robot_id=robot)
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("VACUUM nodes")  # the HNSW index learns its row count
            conn.execute("SELECT pg_buffercache_evict_relation('idx_nodes_embedding')")
        busy = threading.Thread(target=_sleep_in, args=(database_url,), daemon=True)
        with psycopg.connect(database_url) as idle:
            idle.execute("SELECT 'left open'")
            busy.start()
            _wait_until_long_running(database_url, "SELECT pg_sleep(2)", seconds=0.4)
            frame = advise(store, thresholds=FAST)
            strict = advise(store, thresholds=AdvisorThresholds(min_statistics_days=0,
                                                                xid_min_left=3_000_000_000))
            idle.rollback()
    busy.join()

    assert _found(frame, "duplicate_index", "public.adv_dup_b")["evidence"].str.contains(
        "duplicates adv_dup_a").all()
    assert len(_found(frame, "duplicate_index", "public.adv_dup_a")) == 1  # prefix of (x, y)
    assert _found(frame, "invalid_index", "public.adv_invalid_x")["severity"].tolist() == \
        ["critical"]
    assert "1,500 dead rows, 75%" in _found(frame, "dead_rows", "public.adv_dead")[
        "evidence"].iloc[0]
    sequence = _found(frame, "sequence_near_max", "public.adv_seq_id_seq")
    assert "2,000,000,000 of 2,147,483,647 (93.1%)" in sequence["evidence"].iloc[0]
    with psycopg.connect(database_url, autocommit=True) as conn:
        seq, idx = conn.execute("SELECT seq_scan, idx_scan FROM pg_stat_user_tables "
                                "WHERE relname = 'adv_scan'").fetchone()
    assert seq >= 35 and idx == 1
    assert f"{seq / (seq + idx):.0%} of {seq + idx} scans were sequential on 10,000 rows" in \
        _found(frame, "sequential_scans", "public.adv_scan")["evidence"].iloc[0]
    assert len(_found(frame, "cache_hit_ratio")) == 1, frame["check"].tolist()
    hot = _found(frame, "hot_updates", "public.nodes")
    assert len(hot) == 1 and "idx_nodes_access_count" in hot["sql"].iloc[0]
    assert "fillfactor = 90" in hot["sql"].iloc[0]
    assert "pid " in _found(frame, "idle_in_transaction")["object"].iloc[0]
    assert "pg_sleep(2)" in _found(frame, "long_running_query")["evidence"].iloc[0]
    assert "0% of the" in _found(frame, "hnsw_cache", "public.idx_nodes_embedding")[
        "evidence"].iloc[0]
    assert "maintenance_work_mem is 1MB" in _found(frame, "hnsw_build_memory")[
        "evidence"].iloc[0]
    padded = _found(frame, "padded_vectors")
    assert "150 vectors of 16 dimensions" in padded["evidence"].iloc[0]
    assert "SET maintenance_work_mem" not in padded["sql"].iloc[0]  # a 0.2 MB graph fits 1MB
    assert "2 models or dimensions" in _found(frame, "mixed_embeddings")["evidence"].iloc[0]
    assert list(frame["severity"]) == sorted(frame["severity"], key=[
        "critical", "warning", "info"].index)
    # Old enough statistics: each unused index is its own finding; wraparound by threshold.
    assert len(_found(strict, "unused_index", "public.idx_nodes_updated_at")) == 1
    wrap = _found(strict, "xid_wraparound", "public.adv_dead")
    with psycopg.connect(database_url, autocommit=True) as conn:
        age = conn.execute("SELECT greatest(age(c.relfrozenxid), coalesce(age(t.relfrozenxid), "
                           "0)) FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid"
                           " WHERE c.oid = 'adv_dead'::regclass").fetchone()[0]
    reported = int(re.match(r"([\d,]+) transactions left", wrap["evidence"].iloc[0])
                   .group(1).replace(",", ""))
    # Read later, so a little older: other sessions' transactions age the table meanwhile.
    assert 0 <= reported - (2_146_483_648 - age) < 10_000

    # Every statement runs on a copy (no session may stay on the original while it is copied).
    original = database_name(database_url)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE datname = %s", (original,))
    with scratch_database(server_url, "htm_adv_copy", template=original) as copy_url:
        with psycopg.connect(copy_url, autocommit=True) as conn:
            # The strict run's other findings repeat the first run's.
            extra = strict[strict["check"].isin(["unused_index", "xid_wraparound"])]
            for statement in [s for text in (frame["sql"].tolist() + extra["sql"].tolist())
                              for s in split_statements(text)]:
                conn.execute(statement)
            left = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes").fetchall()}
        assert "adv_dup_b" not in left and "idx_robot_nodes_robot_id" not in left
        assert "adv_invalid_x" not in left and "idx_nodes_access_count" not in left
        assert "idx_nodes_embedding_16" in left  # the native index was built
        with psycopg.connect(copy_url, autocommit=True) as conn:
            # The way out of mixed models: the odd 3-d vector was cleared, its memory kept.
            assert conn.execute("SELECT array_agg(DISTINCT embedding_dimension) FROM nodes "
                                "WHERE embedding IS NOT NULL").fetchone()[0] == [16]
            assert conn.execute("SELECT count(*) FROM nodes WHERE content = "
                                "'three dimensions'").fetchone()[0] == 1


def test_the_native_index_advice_gives_its_build_the_graphs_memory(ltm, database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET maintenance_work_mem = '1MB'").format(
            sql.Identifier(conn.info.dbname)))
    vectors = np.random.default_rng(1).normal(size=(3000, 16)).astype(np.float32)
    ltm.bulk_add([f"memory {i}" for i in range(3000)], robots="builder", embeddings=vectors)
    with LongTermMemory(database_url) as store:
        padded = _found(advise(store), "padded_vectors")
    graph = 3000 * hnsw_graph_bytes(16)  # 3.9 MB: more than 1MB
    assert f"about {graph / 2**20:.1f} MB while it is built, more than maintenance_work_mem " \
           "(1MB)" in padded["recommendation"].iloc[0]
    setting, build = split_statements(padded["sql"].iloc[0])
    assert setting == f"SET maintenance_work_mem = '{-(-graph * 5 // 4 // 2**20)}MB'"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(setting)
        notices: list[str] = []
        conn.add_notice_handler(lambda notice: notices.append(notice.message_primary))
        conn.execute(build)
        assert conn.execute("SELECT to_regclass('idx_nodes_embedding_16')").fetchone()[0]
    # pgvector says when a graph outgrows the memory; this one was built in it
    assert not [n for n in notices if "maintenance_work_mem" in n], notices


def test_bad_input_is_rejected(ltm):
    with pytest.raises(ValidationError) as info:
        advise(ltm, thresholds={"long_query_seconds": 1})
    assert info.value.field == "thresholds"
    for call in (advise, recommend_ef_search,
                 lambda s: concurrency_sweep(s, ef_search=40)):
        with pytest.raises(ValidationError) as info:
            call("postgresql://not-a-store")
        assert info.value.field == "store"
    with pytest.raises(ValidationError) as info:
        concurrency_sweep(ltm, ef_search=40, threads=(1, 0))
    assert info.value.field == "threads"


def test_recommend_ef_search_and_concurrency(ltm, database_url):
    rng = np.random.default_rng(1)
    robot = ltm.register_robot("tuner")
    ltm.bulk_add([f"vector {i}" for i in range(600)], robots=["tuner"] * 600,
                 embeddings=rng.normal(size=(600, 24)).astype(np.float32))
    advice = recommend_ef_search(ltm, target_recall=0.9, k=5, queries=40, repeats=1,
                                 ef_search=(5, 10, 40, 200))
    sweep = advice.sweep
    reaching = sweep.loc[sweep["recall_mean"] >= 0.9, "ef_search"]
    assert advice.ef_search == int(reaching.min())
    assert advice.recall == pytest.approx(
        float(sweep.loc[sweep["ef_search"] == advice.ef_search, "recall_mean"].iloc[0]))
    assert f"ef_search {advice.ef_search} is the smallest" in advice.evidence
    # Searches run at 40: a smaller recommendation is an info finding, a larger a warning.
    for chosen, severity in ((10, "info"), (80, "warning")):
        finding = _found(advise(ltm, ef_search_advice=dataclasses.replace(
            advice, ef_search=chosen)), "ef_search")
        assert finding["severity"].tolist() == [severity]
        with psycopg.connect(database_url, autocommit=True) as conn:
            for statement in split_statements(finding["sql"].iloc[0]):
                conn.execute(statement)
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("SELECT '[1,2]'::vector")  # loads pgvector's settings
            assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] == str(chosen)
    with pytest.raises(ValidationError):
        recommend_ef_search(ltm, target_recall=1.5)
    assert robot

    sweep = concurrency_sweep(ltm, ef_search=advice.ef_search, k=5, threads=(1, 2, 4),
                              queries=40, repeats=2)
    assert sweep["threads"].tolist() == [1, 2, 4]
    assert (sweep["queries"] == 80).all() and (sweep["repeats"] == 2).all()
    assert (sweep[["qps_spread", "latency_p50_spread_ms"]] >= 0).all().all()
    once = concurrency_sweep(ltm, ef_search=advice.ef_search, k=5, threads=(1,), queries=40,
                             repeats=1)
    assert once[["qps_spread", "latency_p50_spread_ms"]].iloc[0].tolist() == [0.0, 0.0]
    assert (sweep["latency_p95_ms"] >= sweep["latency_p50_ms"]).all()
    assert sweep["speedup"].iloc[0] == 1.0 and (sweep["qps"] > 0).all()
    assert ltm.ensure_pool_size(1) >= 4  # the pool was grown for four clients


def test_advise_command(ltm, database_url):
    runner = CliRunner()
    as_json = runner.invoke(cli, ["--db", database_url, "advise", "--no-sweep", "--no-hygiene",
                                  "--json"])
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    assert document["schema_version"] == FINDINGS_SCHEMA_VERSION
    assert document["kind"] == "advise" and document["fail_on"] is None
    rows = document["findings"]
    expected = advise(ltm)
    assert [r["object"] for r in rows] == expected["object"].tolist()
    assert document["counts"] == {severity: int((expected["severity"] == severity).sum())
                                  for severity in ("critical", "warning", "info")}
    assert rows[0]["statements"] == split_statements(rows[0]["sql"])
    table = runner.invoke(cli, ["advise", "--no-sweep", "--db", database_url])
    assert table.exit_code == 0, table.output
    assert "1. WARNING duplicate_index: public.idx_node_tags_node_id" in table.output
    assert '   | DROP INDEX CONCURRENTLY IF EXISTS "public"."idx_node_tags_node_id";' in \
        table.output
    assert max(len(line) for line in table.stdout.splitlines()
               if not line.startswith("   | ")) <= 110


def test_fail_on_exit_codes(database_url, monkeypatch, capsys):
    """A clean memory has warnings (the reference schema's duplicate index) and no critical
    finding; an invalid index adds a critical one."""
    runner = CliRunner()

    def gate(*options: str):
        return runner.invoke(cli, ["--db", database_url, "advise", "--no-sweep",
                                   "--no-hygiene", *options])

    assert gate().exit_code == 0
    assert gate("--fail-on", "critical").exit_code == 0
    warned = gate("--fail-on", "warning", "--json")
    assert warned.exit_code == 3
    assert json.loads(warned.stdout)["exit_code"] == 3
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE gate_invalid AS SELECT 1 AS x FROM generate_series(1, 2)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY gate_invalid_x ON gate_invalid (x)")
    assert gate("--fail-on", "critical").exit_code == 4
    assert gate("--fail-on", "warning", "--csv").exit_code == 4
    assert gate().exit_code == 0  # no gate, no failure
    # The installed entry point passes the code on too.
    monkeypatch.setattr("sys.argv", ["htm-analytics", "--db", database_url, "advise",
                                     "--no-sweep", "--no-hygiene", "--fail-on", "critical"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 4
    assert "CRITICAL invalid_index: public.gate_invalid_x" in capsys.readouterr().out


def test_gate_exit_code_rules():
    assert gate_exit_code([], "warning") == 0
    assert gate_exit_code(["info", "warning"], "critical") == 0
    assert gate_exit_code(["info", "warning"], "warning") == 3
    assert gate_exit_code(["critical"], "warning") == 4
    assert gate_exit_code(["critical", "warning"], None) == 0
    with pytest.raises(ValidationError, match="fail_on"):
        gate_exit_code(["info"], "info")


def test_advise_sweeps_a_small_memory_with_the_vectors_it_has(ltm, database_url):
    """Fewer stored vectors than the sweep's 200 queries: the sweep uses them all; fewer than
    the report's minimum: no sweep (and no error either way)."""
    runner = CliRunner()
    robot = ltm.register_robot("r")
    vectors = np.random.default_rng(3).normal(size=(120, 8)).astype(np.float32)
    for i, vector in enumerate(vectors):
        ltm.add(content=f"memory {i}", robot_id=robot, embedding=vector)
        if i == 9:
            few = runner.invoke(cli, ["--db", database_url, "advise", "--no-hygiene"])
            assert few.exit_code == 0, few.output
            assert "ef_search sweep" not in few.stdout
    result = runner.invoke(cli, ["--db", database_url, "advise", "--no-hygiene"])
    assert result.exit_code == 0, result.output
    assert "ef_search sweep:" in result.stdout
    assert "120 held-out stored vectors x 2 repeats" in result.stdout


def test_a_bench_builds_copy_left_behind_is_found(ltm, database_url):
    """A build killed outright (SIGKILL) leaves its copy of the vectors: advise names it and
    gives the DROP; tables of the user's own that only look alike are left out."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE UNLOGGED TABLE htm_analytics_bench_424242_0a1b2c AS "
                     "SELECT 1 AS id")
        conn.execute("CREATE TABLE htm_analytics_bench_notes (id int)")
    left = _found(advise(ltm, ef_search_advice=None), "bench_leftovers")
    assert left["object"].tolist() == ["public.htm_analytics_bench_424242_0a1b2c"]
    assert 'DROP TABLE IF EXISTS "public"."htm_analytics_bench_424242_0a1b2c"' in \
        left["sql"].iloc[0]
