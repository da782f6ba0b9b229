"""HTM databases the toolkit did not create: the seed-era gem's and the current gem's (0.0.32).

Each is built from its own DDL (seed 000 = ``sql/001_seed_schema.sql``; the gem's from the
reference notes, ``tests/sql/gem_0032_schema.sql``) and written with plain SQL as the gem
writes, under a role of its own: content hashed unstripped, tags without their ancestors, soft
deletes. The toolkit then reads them through a SELECT-only role, and must write nothing.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from psycopg.conninfo import make_conninfo

import htm_analytics as ha
from htm_analytics import LongTermMemory
from htm_analytics.cli import cli
from tests.fixtures_db import temporary_database

GEM_SCHEMA = Path(__file__).parent / "sql" / "gem_0032_schema.sql"
DIMENSION = 8
CONTENTS = [  # as the application gave them: the seed-era gem stored and hashed them so
    "  PostgreSQL is our primary database  ",
    "Redis caches the sessions of the web tier\n",
    "Kafka carries the order events between services",
    "MySQL was our database before 2020",
]
# robot, content position, remember_count
REMEMBERS = [("gem-a", 0, 3), ("gem-a", 1, 1), ("gem-a", 2, 2), ("gem-b", 1, 2),
             ("gem-b", 3, 1)]
TAGS = [(0, "database:postgresql"), (1, "cache:redis"), (3, "database:mysql")]


def _seed_ddl() -> str:
    return importlib.resources.files("htm_analytics").joinpath(
        "sql/001_seed_schema.sql").read_text("utf-8")


def _vector(position: int) -> list[float]:
    rng = np.random.default_rng(position)
    return [float(v) for v in rng.normal(size=DIMENSION)] + [0.0] * (2000 - DIMENSION)


def as_role(url: str, role: str) -> str:
    return make_conninfo(url, user=role)


@pytest.fixture(scope="module")
def roles(server_url: str) -> Iterator[dict[str, str]]:
    """A writer role (the application's) and a SELECT-only reader, created for this module."""
    suffix = uuid.uuid4().hex[:8]
    names = {"writer": f"htm_gem_writer_{suffix}", "reader": f"htm_reader_{suffix}"}
    with psycopg.connect(server_url, autocommit=True) as conn:
        try:
            for name in names.values():
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the test server's user may not create roles")
    yield names
    with psycopg.connect(server_url, autocommit=True) as conn:
        for name in names.values():
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@contextmanager
def gem_database(server_url: str, era: str, roles: dict[str, str], *,
                 populate: bool = True) -> Iterator[str]:
    """A database of ``era`` ("seed" or "gem") written by the writer role as the gem does."""
    with temporary_database(server_url, f"htm_{era}", template=None) as url:
        create_schema(url, (_seed_ddl() if era == "seed" else GEM_SCHEMA.read_text()), roles)
        if populate:
            with psycopg.connect(as_role(url, roles["writer"]), autocommit=True) as conn:
                write_as_the_gem(conn, era)
        yield url


def create_schema(url: str, ddl: str, roles: dict[str, str]) -> None:
    """Run ``ddl``; the writer role may then write every table, the reader read them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ddl.encode())
        for statement in (
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {w}",
            "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {w}",
            "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {r}",
        ):
            conn.execute(sql.SQL(statement).format(w=sql.Identifier(roles["writer"]),
                                                   r=sql.Identifier(roles["reader"])))


def write_as_the_gem(conn: psycopg.Connection[Any], era: str) -> None:
    robots = {name: conn.execute("INSERT INTO robots (name) VALUES (%s) RETURNING id",
                                 (name,)).fetchone()[0] for name in ("gem-a", "gem-b")}
    nodes = []
    for position, content in enumerate(CONTENTS):
        digest = hashlib.sha256(content.encode()).hexdigest()  # unstripped, as the gem did
        nodes.append(conn.execute(
            "INSERT INTO nodes (content, content_hash, token_count, embedding, "
            "embedding_dimension) VALUES (%s, %s, 9, %s::vector, %s) RETURNING id",
            (content, digest, str(_vector(position)), DIMENSION)).fetchone()[0])
    for robot, position, count in REMEMBERS:
        conn.execute("INSERT INTO robot_nodes (robot_id, node_id, remember_count) "
                     "VALUES (%s, %s, %s)", (robots[robot], nodes[position], count))
    for position, name in TAGS:  # no ancestors: the gem does not add them
        tag = conn.execute("INSERT INTO tags (name) VALUES (%s) ON CONFLICT (name) DO UPDATE "
                           "SET name = EXCLUDED.name RETURNING id", (name,)).fetchone()[0]
        conn.execute("INSERT INTO node_tags (node_id, tag_id) VALUES (%s, %s)",
                     (nodes[position], tag))
    if era == "gem":
        conn.execute("UPDATE nodes SET metadata = '{\"source\": \"chat\"}' WHERE id = %s",
                     (nodes[1],))
        conn.execute("UPDATE robot_nodes SET working_memory = true WHERE node_id = %s",
                     (nodes[2],))
        conn.execute("UPDATE nodes SET deleted_at = now() WHERE id = %s", (nodes[3],))


def footprint(url: str) -> dict[str, Any]:
    """What a write would change: public objects, triggers, functions, and row counters."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        objects = conn.execute(
            """SELECT c.relkind::text || ':' || c.relname FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
               UNION ALL SELECT 'trigger:' || tgname FROM pg_trigger WHERE NOT tgisinternal
               UNION ALL SELECT 'function:' || p.proname FROM pg_proc p
               JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
                 AND p.proname LIKE 'htm%%'
               ORDER BY 1""").fetchall()
        writes = conn.execute(
            """SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables
               WHERE schemaname = 'public' ORDER BY relname""").fetchall()
    return {"objects": [o for (o,) in objects], "writes": writes}


@pytest.fixture(scope="module")
def databases(server_url: str, roles: dict[str, str]) -> Iterator[dict[str, str]]:
    with gem_database(server_url, "seed", roles) as seed, \
            gem_database(server_url, "gem", roles) as gem:
        yield {"seed": seed, "gem": gem}


@pytest.mark.parametrize("era", ["seed", "gem"])
def test_every_analysis_through_a_select_only_role_writes_nothing(
        era: str, databases: dict[str, str], roles: dict[str, str], tmp_path: Path) -> None:
    url = databases[era]
    before = footprint(url)
    live_positions = [0, 1, 2] if era == "gem" else [0, 1, 2, 3]
    live_pairs = [r for r in REMEMBERS if r[1] in live_positions]
    with LongTermMemory(as_role(url, roles["reader"]), pool_size=1, cache_size=0) as store:
        info = store.schema_info
        assert info.era == ("current gem" if era == "gem" else "seed")
        assert not info.can_write and info.additions == () and info.additions_version is None
        stats = store.stats()
        assert stats["total_nodes"] == len(live_positions)
        assert stats.get("soft_deleted_nodes", 0) == (1 if era == "gem" else 0)
        counts = store.table_counts().set_index("table")["rows"]
        assert counts["robot_nodes"] == len(live_pairs) and counts["memory_events"] == 0
        if era == "gem":
            assert counts["nodes (soft-deleted)"] == 1

        trends = ha.remember_trends(store, freq="W")
        assert trends.attrs["exact"] is False and "approximated" in trends.attrs["reason"]
        assert trends["remembers"].sum() == sum(c for _, _, c in live_pairs)
        assert trends.attrs["missing_remembers"] == sum(c for _, _, c in live_pairs)
        activity = ha.robot_activity(store).set_index("robot")
        assert activity.loc["gem-b", "nodes"] == (1 if era == "gem" else 2)
        assert len(ha.robot_overlap(store)) == 4
        assert ha.remember_count_distribution(store)["memories"].sum() == len(live_positions)
        assert len(ha.most_reinforced(store, limit=5)) == len(live_positions)
        popular = ha.popular_tags(store, limit=10)
        assert ("database:mysql" in set(popular.iloc[:, 0])) is (era == "seed")
        # The gem attaches no ancestors: the tree implies them from the names.
        tree = ha.tag_hierarchy(store).set_index("tag")
        assert not tree.loc["database", "stored"]
        assert tree.loc["database", "cumulative_nodes"] == (1 if era == "gem" else 2)
        assert len(store.nodes_by_topic("database")) == (1 if era == "gem" else 2)
        ha.tag_cooccurrence(store, min_shared=1)
        assert len(ha.index_usage(store)) and len(ha.table_health(store))

        hits = store.search(embedding=_vector(3)[:DIMENSION], limit=4)
        assert (hits[0]["content"] == CONTENTS[3]) is (era == "seed")
        assert len(hits) == len(live_positions)
        found = store.search_fulltext(query="database")
        assert {h["content"] for h in found} == {CONTENTS[p] for p in (0, 3)
                                                 if p in live_positions}
        assert store.search_fuzzy(query="Kafka carries")[0]["content"] == CONTENTS[2]
        hybrid = store.search_hybrid(query="primary database",
                                     embedding=_vector(0)[:DIMENSION])
        assert hybrid[0]["content"] == CONTENTS[0]
        assert len(store.search_by_tags(tags=["database:mysql"])) == (era == "seed")
        store.check_embedding_model("any", "model", DIMENSION)  # unnamed: dimension only
        assert store.node_ids_by_content(["PostgreSQL is our primary database"])[0]
        report = ha.build_report(store, sweep_queries=20)
        assert info.describe() in report.to_html()
        snapshot = ha.export_snapshot(store, tmp_path / "gem.duckdb")
    with ha.Snapshot(snapshot) as offline:
        assert offline.table_counts().set_index("table")["rows"]["nodes"] == \
            len(live_positions)
        assert ha.remember_trends(offline, freq="W")["remembers"].sum() == \
            trends["remembers"].sum()
    status = CliRunner().invoke(cli, ["--db", as_role(url, roles["reader"]), "status"])
    assert status.exit_code == 0 and info.describe() in status.output, status.output
    assert footprint(url) == before


def test_additions_serve_another_writer_and_log_what_it_does(
        server_url: str, roles: dict[str, str]) -> None:
    with gem_database(server_url, "gem", roles) as url:
        earlier = sum(c for _, p, c in REMEMBERS if p != 3)  # before the log existed
        with LongTermMemory(url, init_schema=True) as owner:
            assert owner.schema_info.event_triggers
        writer_url = as_role(url, roles["writer"])
        with psycopg.connect(writer_url, autocommit=True) as conn:  # the gem, as before
            robot = conn.execute("SELECT id FROM robots WHERE name = 'gem-a'").fetchone()[0]
            node = conn.execute(
                "INSERT INTO nodes (content, content_hash) VALUES ('Nginx fronts the API', "
                "'h-nginx') RETURNING id").fetchone()[0]
            conn.execute("INSERT INTO robot_nodes (robot_id, node_id) VALUES (%s, %s)",
                         (robot, node))
            conn.execute("UPDATE robot_nodes SET remember_count = remember_count + 1 "
                         "WHERE robot_id = %s AND node_id = %s", (robot, node))
            tag = conn.execute("INSERT INTO tags (name) VALUES ('web') RETURNING id").fetchone()
            conn.execute("INSERT INTO node_tags (node_id, tag_id) VALUES (%s, %s)",
                         (node, tag[0]))
            conn.execute("UPDATE nodes SET deleted_at = now() WHERE content LIKE 'Kafka%%'")
            conn.execute("DELETE FROM nodes WHERE content LIKE 'Redis%%'")
        with LongTermMemory(writer_url, cache_size=0) as app:  # the application's role
            assert app.schema_info.can_write and app.schema_info.event_triggers
            robot_b = app.register_robot("toolkit-writer")
            added = app.add(content="Caddy serves the docs", robot_id=robot_b)
            app.add(content="Caddy serves the docs", robot_id=robot_b)
            assert app.retrieve(added["node_id"]) is not None
            assert [h["id"] for h in app.search_fulltext(query="Nginx")] == [node]
            trends = ha.remember_trends(app, freq="D")
        with psycopg.connect(url, autocommit=True) as conn:
            events = dict(conn.execute("SELECT kind, count(*) FROM memory_events GROUP BY 1"))
            caddy = conn.execute("SELECT count(*) FROM memory_events WHERE node_id = %s AND "
                                 "kind = 'remember'", (added["node_id"],)).fetchone()[0]
            live_counts = conn.execute(
                "SELECT sum(rn.remember_count) FROM robot_nodes rn JOIN nodes n "
                "ON n.id = rn.node_id WHERE n.deleted_at IS NULL").fetchone()[0]
        assert caddy == 2  # once per remember: the trigger logs, the store does not too
        assert events == {"remember": 2 + 2, "delete": 2, "retrieve": 1}
        # Remembers written before the log are approximated and counted as missing.
        assert trends.attrs["exact"] is False
        logged_live = 2 + 2
        assert trends.attrs["missing_remembers"] == live_counts - logged_live
        assert trends["remembers"].sum() == live_counts
        # Of the remembers written before the log, Redis's went with its node and Kafka's
        # with its soft delete: PostgreSQL's 3 are left.
        assert live_counts - logged_live == earlier - (1 + 2) - 2 == 3


def test_trends_are_exact_when_every_writer_came_after_the_additions(
        server_url: str, roles: dict[str, str]) -> None:
    with gem_database(server_url, "seed", roles, populate=False) as url:
        LongTermMemory(url, init_schema=True).close()
        with psycopg.connect(as_role(url, roles["writer"]), autocommit=True) as conn:
            write_as_the_gem(conn, "seed")
        with LongTermMemory(as_role(url, roles["reader"])) as reader:
            trends = ha.remember_trends(reader, freq="D")
        assert trends.attrs["exact"] is True and trends.attrs["missing_remembers"] == 0
        assert trends["remembers"].sum() == sum(c for _, _, c in REMEMBERS)
        assert trends["new_memories"].sum() == len(CONTENTS)


def test_the_toolkit_writes_the_gem_schema_as_the_gem_does(
        server_url: str, roles: dict[str, str]) -> None:
    with gem_database(server_url, "gem", roles) as url:
        store = LongTermMemory(as_role(url, roles["writer"]), cache_size=0)
        robot = store.register_robot("gem-a")
        # Stored unstripped by the gem: found, not stored twice.
        again = store.add(content="PostgreSQL is our primary database", robot_id=robot)
        assert again["is_new"] is False and again["robot_node"]["remember_count"] == 4
        long_text = ("The deploy pipeline builds the containers, runs the integration tests "
                     "against a disposable PostgreSQL, and promotes the images to staging.")
        with psycopg.connect(as_role(url, roles["writer"]), autocommit=True) as conn:
            padded = "\n" + long_text + "\n\n"
            stored = conn.execute(
                "INSERT INTO nodes (content, content_hash) VALUES (%s, %s) RETURNING id",
                (padded, hashlib.sha256(padded.encode()).hexdigest())).fetchone()[0]
        assert store.add(content=long_text, robot_id=robot)["node_id"] == stored
        assert store.node_ids_by_content([long_text, "never stored"]) == [stored, None]
        # Soft-deleted: remembering it again restores it, as the gem's add does.
        restored = store.add(content="MySQL was our database before 2020", robot_id=robot)
        assert restored["is_new"] is False and store.exists(restored["node_id"])
        assert store.mark_in_working_memory([again["node_id"]], robot_id=robot) == 1
        assert store.retrieve(again["node_id"])["in_working_memory"] is True
        # A robot's step writes the gem's flags; its vectors are of the gem's dimension.
        with ha.HTM("gem-a", store=store,
                    embedder=ha.get_embedder("hashing", dimensions=8)) as htm:
            noted = htm.remember("Nginx fronts the API")
            recalled = htm.recall("Kafka order events", strategy="fulltext", raw=True)
            assert [r["content"] for r in recalled] == [CONTENTS[2]]
        with psycopg.connect(url) as conn:
            held = {n for (n,) in conn.execute(
                "SELECT node_id FROM robot_nodes WHERE robot_id = %s AND working_memory",
                (robot,))}
        assert {noted, recalled[0]["id"], again["node_id"]} <= held
        chunks = list(store.iter_table_chunks("nodes"))
        metadata = chunks[0].set_index("content")["metadata"]
        assert json.loads(metadata[CONTENTS[1]]) == {"source": "chat"}
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            nodes = conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
            flags = conn.execute("SELECT count(*) FROM robot_nodes WHERE working_memory"
                                 ).fetchone()[0]
    assert nodes == len(CONTENTS) + 2  # the long text and Nginx: none stored twice
    # gem-a holds PostgreSQL (marked), Nginx (remembered) and Kafka (flagged by the gem, and
    # recalled again: the same row); no other robot's row was touched.
    assert flags == 3


def test_the_documented_uninstall_leaves_the_gem_schema_as_it_was(
        server_url: str, roles: dict[str, str]) -> None:
    docs = (Path(__file__).parents[1] / "docs" / "production.md").read_text()
    removal = docs.split("## Removing the additions")[1].split("```sql")[1].split("```")[0]
    with gem_database(server_url, "gem", roles, populate=False) as url:
        before = footprint(url)["objects"]
        LongTermMemory(url, init_schema=True).close()
        installed = footprint(url)["objects"]
        assert "r:memory_events" in installed and "trigger:htm_analytics_log_remember" \
            in installed
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(removal.encode())
        assert footprint(url)["objects"] == before


def test_a_store_opened_before_the_triggers_does_not_count_twice(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:  # as if 007 came later
        conn.execute("DELETE FROM htm_analytics_migrations WHERE version >= 7")
    with LongTermMemory(database_url) as store:
        assert not store.schema_info.event_triggers  # it logs itself, triggers present
        robot = store.register_robot("early")
        node = store.add(content="opened before init-db", robot_id=robot)["node_id"]
        store.add(content="opened before init-db", robot_id=robot)
        store.delete(node)
    with psycopg.connect(database_url) as conn:
        events = dict(conn.execute("SELECT kind, count(*) FROM memory_events GROUP BY 1"))
    assert events == {"remember": 2, "delete": 1}
