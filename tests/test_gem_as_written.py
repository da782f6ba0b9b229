"""The current HTM gem's databases as the gem (0.0.32) really writes them.

Its Sequel migrations create ``timestamp without time zone`` columns (:func:`migrations_schema`),
into which it writes the local time of its process;
it never writes ``embedding_dimension``; it stores vectors zero-padded to 2000; its ``forget``
soft-deletes the node with its robot and tag links. The toolkit opens such a database
without its additions (as a user would, read-only) and after ``init-db``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

import htm_analytics as ha
from htm_analytics import LongTermMemory
from htm_analytics.cli import cli
from htm_analytics.store import SEARCH_STRATEGIES
from tests.fixtures_db import temporary_database
from tests.test_existing_databases import CONTENTS as EXISTING_CONTENTS
from tests.test_existing_databases import (  # noqa: F401 (roles: a fixture)
    GEM_SCHEMA,
    REMEMBERS,
    TAGS,
    as_role,
    create_schema,
    footprint,
    roles,
)

DIMENSION = 8
WRITER_ZONE = "America/Chicago"  # the gem's process: UTC-6 in winter, UTC-5 in summer
CONTENTS = [c.strip() for c in EXISTING_CONTENTS]  # the current gem strips them
FORGOTTEN = 3  # soft-deleted by the gem's forget


def migrations_schema() -> str:
    """The gem's tables as its Sequel migrations create them (HTM::Database.setup): those of
    its db/schema.sql (gem_0032_schema.sql), but every timestamp column ``timestamp without
    time zone``, into which it writes its process's local time."""
    return GEM_SCHEMA.read_text().replace("timestamptz", "timestamp without time zone")


def vector(position: int) -> list[float]:
    rng = np.random.default_rng(position)
    return [float(v) for v in rng.normal(size=DIMENSION)]


def padded(position: int) -> str:
    """As the gem stores a vector: zero-padded to 2000, its dimension not recorded."""
    return str(vector(position) + [0.0] * (2000 - DIMENSION))


def gem_connection(url: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SELECT set_config('TimeZone', %s, false)", (WRITER_ZONE,))
    return conn


def forget_softly(conn: psycopg.Connection[Any], node_id: int) -> None:
    """The gem's forget (soft: true): the node, its robot links and its tag links."""
    for table in ("nodes", "robot_nodes", "node_tags"):
        column = "id" if table == "nodes" else "node_id"
        conn.execute(sql.SQL("UPDATE {} SET deleted_at = CURRENT_TIMESTAMP WHERE {} = %s")
                     .format(sql.Identifier(table), sql.Identifier(column)), (node_id,))


def write_as_the_gem(conn: psycopg.Connection[Any], *, forget: bool = True) -> list[int]:
    robots = {name: conn.execute("INSERT INTO robots (name) VALUES (%s) RETURNING id",
                                 (name,)).fetchone()[0] for name in ("gem-a", "gem-b")}
    nodes = []
    for position, content in enumerate(CONTENTS):
        nodes.append(conn.execute(
            "INSERT INTO nodes (content, content_hash, token_count, embedding) "
            "VALUES (%s, %s, 7, %s::vector) RETURNING id",
            (content, hashlib.sha256(content.encode()).hexdigest(),
             padded(position))).fetchone()[0])
    for robot, position, count in REMEMBERS:
        conn.execute("INSERT INTO robot_nodes (robot_id, node_id, remember_count) "
                     "VALUES (%s, %s, %s)", (robots[robot], nodes[position], count))
    for position, name in TAGS:
        tag = conn.execute("INSERT INTO tags (name) VALUES (%s) ON CONFLICT (name) DO UPDATE "
                           "SET name = EXCLUDED.name RETURNING id", (name,)).fetchone()[0]
        conn.execute("INSERT INTO node_tags (node_id, tag_id) VALUES (%s, %s)",
                     (nodes[position], tag))
    if forget:
        forget_softly(conn, nodes[FORGOTTEN])
    return nodes


@contextmanager
def gem_written(server_url: str, roles: dict[str, str], *,  # noqa: F811
                populate: bool = True) -> Iterator[str]:
    with temporary_database(server_url, "htm_gem_real", template=None) as url:
        create_schema(url, migrations_schema(), roles)
        if populate:
            with gem_connection(as_role(url, roles["writer"])) as conn:
                write_as_the_gem(conn)
            settled(url)
        yield url


def settled(url: str) -> None:
    """Wait until the writer's backend has gone: it flushes its statistics as it exits,
    after its client has, and a footprint taken before would miss its writes."""
    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND pid <> pg_backend_pid()").fetchone()[0] \
                and time.monotonic() < deadline:
            time.sleep(0.02)


@pytest.fixture(scope="module")
def gem_url(server_url: str, roles: dict[str, str]) -> Iterator[str]:  # noqa: F811
    with gem_written(server_url, roles) as url:
        yield url


def live_positions() -> list[int]:
    return [p for p in range(len(CONTENTS)) if p != FORGOTTEN]


def test_every_strategy_works_on_the_bare_gem_database(
        gem_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    before = footprint(gem_url)
    with LongTermMemory(as_role(gem_url, roles["reader"]), cache_size=0) as store:
        assert store.schema_info.additions == ()
        for strategy in SEARCH_STRATEGIES:
            hits = store.search_by_strategy(strategy, query="our database",
                                            embedding=vector(0), limit=3)
            assert hits, strategy
            assert hits[0]["content"] == CONTENTS[0], strategy
            assert CONTENTS[FORGOTTEN] not in {h["content"] for h in hits}, strategy
        any_word = store.search_by_strategy("fulltext_any", query="kafka sessions")
        assert {h["content"] for h in any_word} == {CONTENTS[1], CONTENTS[2]}
        fused = store.search_vector_bm25(query="order events", embedding=vector(2))
        assert fused[0]["content"] == CONTENTS[2] and fused[0]["bm25"] > 0
    assert footprint(gem_url) == before


def test_the_bare_lexical_candidates_use_the_seed_expression_index(
        gem_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    plans = []

    def explain(statement: str, params: Any, seconds: float) -> None:
        if "text_candidates" in statement and not statement.startswith("EXPLAIN"):
            plans.append(statement)

    with LongTermMemory(gem_url, cache_size=0, tracer=explain) as store:
        store.search_fulltext(query="kafka sessions", match="any")
    assert plans
    with psycopg.connect(gem_url) as conn:
        conn.execute("SET enable_seqscan = off")
        text = "\n".join(r[0] for r in conn.execute(
            ("EXPLAIN " + plans[0]).encode(),  # the statement as run, with literals bound
            {"query": "kafka sessions", "limit": 20, "budget": 500, "cap": 5000}).fetchall())
    assert "idx_nodes_content_gin" in text


def test_vectors_without_a_recorded_dimension(
        server_url: str, roles: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    with gem_written(server_url, roles) as url:
        with LongTermMemory(as_role(url, roles["reader"]), cache_size=0) as reader:
            assert "derived from the vectors" in reader.schema_info.describe()
            chunks = list(reader.iter_table_chunks("nodes"))
            vectors = chunks[0].set_index("content")["embedding"]
            assert chunks[0]["embedding_dimension"].tolist() == [DIMENSION] * 3
            for position in live_positions():
                np.testing.assert_allclose(vectors[CONTENTS[position]], vector(position),
                                           rtol=1e-6)
            with reader.tuning_session() as session:  # what recall sweeps measure
                assert session.vector_dimensions() == {DIMENSION: 3}
                ids, stored = session.stored_vectors(DIMENSION)
                assert len(ids) == 3 and stored.shape == (3, DIMENSION)
            models = reader.embedding_models()
            assert models["dimension"].tolist() == [DIMENSION]
            assert models["nodes"].tolist() == [3]
            snapshot = ha.export_snapshot(reader, tmp_path / "gem.duckdb")
        with ha.Snapshot(snapshot) as offline:
            assert offline.table_counts().set_index("table")["rows"]["nodes"] == 3
        with LongTermMemory(as_role(url, roles["writer"]), cache_size=0) as writer:
            node = writer.node_ids_by_content([CONTENTS[2]])[0]
            found = writer.retrieve(node)
            assert found is not None and found["embedding_dimension"] == DIMENSION
            np.testing.assert_allclose(found["embedding"], vector(2), rtol=1e-6)
        with LongTermMemory(url, cache_size=0) as owner:
            owner.create_native_index(DIMENSION)
        with LongTermMemory(as_role(url, roles["reader"]), cache_size=0) as reader:
            assert reader.native_dimensions == {DIMENSION}
            for position in live_positions():
                hits = reader.search(embedding=vector(position), limit=1)
                assert [h["content"] for h in hits] == [CONTENTS[position]]
            hits = reader.search_vector_bm25(query="order events", embedding=vector(2))
            assert hits[0]["content"] == CONTENTS[2] and hits[0]["similarity"] > 0.99
        # A vector the gem writes later is in the native index too.
        with gem_connection(as_role(url, roles["writer"])) as conn:
            conn.execute("INSERT INTO nodes (content, content_hash, embedding) "
                         "VALUES ('Nginx fronts the API', 'h-nginx', %s::vector)",
                         (padded(9),))
        with LongTermMemory(as_role(url, roles["reader"]), cache_size=0) as reader:
            hits = reader.search(embedding=vector(9), limit=1)
            assert [h["content"] for h in hits] == ["Nginx fronts the API"]
        status = CliRunner().invoke(cli, ["--db", as_role(url, roles["reader"]), "status"])
        assert status.exit_code == 0 and "derived from the vectors" in status.output


def test_trends_after_init_db_leave_out_what_the_gem_then_forgot(
        server_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    with gem_written(server_url, roles, populate=False) as url:
        LongTermMemory(url, init_schema=True).close()
        with gem_connection(as_role(url, roles["writer"])) as conn:
            nodes = write_as_the_gem(conn)  # after the log: every remember is logged
        live = sum(c for _, p, c in REMEMBERS if p != FORGOTTEN)
        with LongTermMemory(as_role(url, roles["reader"])) as reader:
            trends = ha.remember_trends(reader, freq="D")
            by_robot = ha.remember_trends(reader, freq="D", by="robot")
        assert trends["remembers"].sum() == live
        assert trends["new_memories"].sum() == len(CONTENTS) - 1
        assert trends.attrs["exact"] is True and trends.attrs["missing_remembers"] == 0
        assert by_robot["remembers"].sum() == live
        # The gem's restore brings the memory and its remembers back.
        with gem_connection(as_role(url, roles["writer"])) as conn:
            for table in ("nodes", "robot_nodes", "node_tags"):
                column = "id" if table == "nodes" else "node_id"
                conn.execute(sql.SQL("UPDATE {} SET deleted_at = NULL WHERE {} = %s").format(
                    sql.Identifier(table), sql.Identifier(column)), (nodes[FORGOTTEN],))
        with LongTermMemory(as_role(url, roles["reader"])) as reader:
            assert ha.remember_trends(reader, freq="D")["remembers"].sum() == \
                sum(c for _, _, c in REMEMBERS)


def test_local_time_columns_are_read_in_the_writers_zone(
        gem_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    now = dt.datetime.now(dt.UTC)
    reader_url = as_role(gem_url, roles["reader"])
    with LongTermMemory(reader_url, writer_timezone=WRITER_ZONE, cache_size=0) as store:
        assert WRITER_ZONE in store.schema_info.describe()
        newest = store.stats()["newest_memory"]
        assert abs(newest - now) < dt.timedelta(minutes=5)
        frame = store.fetch_frame("SELECT created_at FROM nodes")
        assert all(abs(t - now) < dt.timedelta(minutes=5) for t in frame["created_at"])
        today = store.search(embedding=vector(0), limit=5,
                             timeframe=(now - dt.timedelta(minutes=5), now))
        assert len(today) == 3
        # No index serves converted times: the default recall looks for no neighbours in
        # time there (memories remembered minutes apart would otherwise be).
        fused = store.search_vector_bm25(query="order events", embedding=vector(2))
        alone = store.search_vector_bm25(query="order events", embedding=vector(2),
                                         neighbours=0)
        assert [(r["id"], r["score"]) for r in fused] == [(r["id"], r["score"]) for r in alone]
    # Unsaid, the server's own time zone is assumed, and said.
    with LongTermMemory(reader_url, cache_size=0) as store:
        assert "timestamp without time zone" in store.schema_info.describe()
    status = CliRunner().invoke(cli, ["--db", reader_url, "--writer-timezone", WRITER_ZONE,
                                      "status"])
    assert status.exit_code == 0 and WRITER_ZONE in status.output, status.output
    with pytest.raises(ha.ValidationError) as error:
        LongTermMemory(reader_url, writer_timezone="Mars/Olympus_Mons")
    assert error.value.field == "writer_timezone"


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(zone=st.one_of(st.text(max_size=40), st.integers(), st.sampled_from(
    ["UTC", "Europe/Paris", "'; DROP TABLE nodes; --", "America/Chicago\x00"])))
def test_any_writer_timezone_opens_or_is_refused_by_name(database_url: str,
                                                         zone: object) -> None:
    try:
        store = LongTermMemory(database_url, writer_timezone=zone,  # type: ignore[arg-type]
                               cache_size=0, pool_size=1)
    except ha.ValidationError as error:
        assert error.field == "writer_timezone"
    else:
        with store:
            assert store.schema_info.writer_timezone == zone and store.stats()


@pytest.mark.parametrize("dimension", [1, 8, 255, 256, 383, 384, 768, 1024, 1536, 1999, 2000])
def test_the_derived_dimension_is_the_last_non_zero_component(
        database_url: str, dimension: int) -> None:
    from htm_analytics.store.schema_info import derived_dimension_sql

    rng = np.random.default_rng(dimension)
    values = rng.normal(size=dimension)
    values[: dimension // 2] = np.where(rng.random(dimension // 2) < 0.1, 0.0,
                                        values[: dimension // 2])  # zeros inside are fine
    vectors = [values, -values]
    with psycopg.connect(database_url) as conn:
        found = [r[0] for r in conn.execute(
            f"SELECT {derived_dimension_sql()} FROM (SELECT v::vector AS embedding, "
            "NULL::integer AS embedding_dimension FROM unnest(%s::text[]) AS v) AS nodes",
            ([str([*map(float, v), *[0.0] * (2000 - dimension)]) for v in vectors],))]
    assert found == [dimension, dimension]


def test_the_native_index_advice_covers_the_vectors_the_gem_wrote(
        server_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    # The gem never writes embedding_dimension: the advised index must be the one
    # create_native_index builds, whose predicate derives the dimension from the vector.
    from htm_analytics.advisor import split_statements

    with gem_written(server_url, roles) as url:
        with LongTermMemory(as_role(url, roles["reader"]), cache_size=0) as reader:
            findings = ha.advise(reader)
        padded = findings[findings["check"] == "padded_vectors"]
        assert f"3 vectors of {DIMENSION} dimensions" in padded["evidence"].iloc[0]
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in split_statements(padded["sql"].iloc[0]):
                conn.execute(statement)
            # every stored vector is in it (the build counts what it indexed)
            indexed, stored = conn.execute(
                "SELECT (SELECT reltuples FROM pg_class WHERE relname = %s), "
                "(SELECT count(*) FROM nodes WHERE embedding IS NOT NULL)",
                [f"idx_nodes_embedding_{DIMENSION}"]).fetchone()
            assert stored > 0 and indexed == stored
        with LongTermMemory(as_role(url, roles["reader"]), cache_size=0) as reader:
            assert reader.native_dimensions == {DIMENSION}
            for position in live_positions():
                hits = reader.search(embedding=vector(position), limit=1)
                assert [h["content"] for h in hits] == [CONTENTS[position]]
            assert "padded_vectors" not in set(ha.advise(reader)["check"])


def test_the_vector_checks_read_the_dimension_the_gem_leaves_unwritten(
        server_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    """The reachability check and the sampled near-duplicate search go to the tables
    themselves (the planner must see the index's expression): they must derive the dimension
    there too, through the padded index and through a native one, or every memory is
    unreachable and no duplicate is ever found."""
    with gem_written(server_url, roles) as url:
        with gem_connection(as_role(url, roles["writer"])) as conn:
            twin = conn.execute(
                "INSERT INTO nodes (content, content_hash, embedding) VALUES "
                "('Our database is PostgreSQL, again', 'h-twin', %s::vector) RETURNING id",
                (padded(0),)).fetchone()[0]
        first = CONTENTS[0]
        for native in (False, True):
            if native:
                with LongTermMemory(url, cache_size=0) as owner:
                    owner.create_native_index(DIMENSION)
            with LongTermMemory(as_role(url, roles["reader"]), cache_size=0) as reader:
                original = reader.node_ids_by_content([first])[0]
                unreachable = ha.unreachable_memories(reader)
                summary = unreachable.attrs["summary"]
                assert unreachable.empty, unreachable
                assert summary["checked"].tolist() == [4] * (1 + native)
                assert summary["unreachable"].sum() == 0
                for sample in (None, 4):
                    pairs = ha.near_duplicates(reader, min_similarity=0.99, sample=sample)
                    assert pairs[["node_a", "node_b"]].values.tolist() == [
                        [original, twin]], (native, sample)
