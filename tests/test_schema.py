"""The schema of reference document 000, exactly, and its migrations."""

from __future__ import annotations

import importlib.resources
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import psycopg
import pytest

from htm_analytics import SCHEMA_VERSION, LongTermMemory, SchemaError
from htm_analytics.store import apply_migrations

# The migrations shipped in the package (numbers may have gaps while branches add their own).
SHIPPED_VERSIONS = sorted(
    int(path.name[:3]) for path in importlib.resources.files("htm_analytics").joinpath(
        "sql").iterdir() if re.match(r"^\d{3}_[a-z0-9_]+\.sql$", path.name))

SEED_COLUMNS = {
    "robots": [
        ("id", "bigint", "NO", "nextval('robots_id_seq'::regclass)"),
        ("name", "text", "YES", None),
        ("created_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
        ("last_active", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
        ("metadata", "jsonb", "YES", None),
    ],
    "nodes": [
        ("id", "bigint", "NO", "nextval('nodes_id_seq'::regclass)"),
        ("content", "text", "NO", None),
        ("access_count", "integer", "NO", "0"),
        ("created_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
        ("updated_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
        ("last_accessed", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
        ("token_count", "integer", "YES", None),
        ("in_working_memory", "boolean", "YES", "false"),
        ("embedding", "vector(2000)", "YES", None),
        ("embedding_dimension", "integer", "YES", None),
        ("content_hash", "character varying(64)", "YES", None),
    ],
    "robot_nodes": [
        ("id", "bigint", "NO", "nextval('robot_nodes_id_seq'::regclass)"),
        ("robot_id", "bigint", "NO", None),
        ("node_id", "bigint", "NO", None),
        ("first_remembered_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
        ("last_remembered_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
        ("remember_count", "integer", "NO", "1"),
        ("created_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
        ("updated_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
    ],
    "tags": [
        ("id", "bigint", "NO", "nextval('tags_id_seq'::regclass)"),
        ("name", "text", "NO", None),
        ("created_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
    ],
    "node_tags": [
        ("id", "bigint", "NO", "nextval('node_tags_id_seq'::regclass)"),
        ("node_id", "bigint", "NO", None),
        ("tag_id", "bigint", "NO", None),
        ("created_at", "timestamp with time zone", "YES", "CURRENT_TIMESTAMP"),
    ],
}

SEED_INDEXES = {
    "robots_pkey": "CREATE UNIQUE INDEX robots_pkey ON public.robots USING btree (id)",
    "nodes_pkey": "CREATE UNIQUE INDEX nodes_pkey ON public.nodes USING btree (id)",
    "idx_nodes_content_hash_unique":
        "CREATE UNIQUE INDEX idx_nodes_content_hash_unique ON public.nodes USING btree "
        "(content_hash)",
    "idx_nodes_access_count":
        "CREATE INDEX idx_nodes_access_count ON public.nodes USING btree (access_count)",
    "idx_nodes_created_at":
        "CREATE INDEX idx_nodes_created_at ON public.nodes USING btree (created_at)",
    "idx_nodes_updated_at":
        "CREATE INDEX idx_nodes_updated_at ON public.nodes USING btree (updated_at)",
    "idx_nodes_last_accessed":
        "CREATE INDEX idx_nodes_last_accessed ON public.nodes USING btree (last_accessed)",
    "idx_nodes_in_working_memory":
        "CREATE INDEX idx_nodes_in_working_memory ON public.nodes USING btree "
        "(in_working_memory)",
    "idx_nodes_embedding":
        "CREATE INDEX idx_nodes_embedding ON public.nodes USING hnsw (embedding "
        "vector_cosine_ops) WITH (m='16', ef_construction='64')",
    "idx_nodes_content_gin":
        "CREATE INDEX idx_nodes_content_gin ON public.nodes USING gin "
        "(to_tsvector('english'::regconfig, content))",
    "idx_nodes_content_trgm":
        "CREATE INDEX idx_nodes_content_trgm ON public.nodes USING gin (content gin_trgm_ops)",
    "robot_nodes_pkey":
        "CREATE UNIQUE INDEX robot_nodes_pkey ON public.robot_nodes USING btree (id)",
    "idx_robot_nodes_unique":
        "CREATE UNIQUE INDEX idx_robot_nodes_unique ON public.robot_nodes USING btree "
        "(robot_id, node_id)",
    "idx_robot_nodes_robot_id":
        "CREATE INDEX idx_robot_nodes_robot_id ON public.robot_nodes USING btree (robot_id)",
    "idx_robot_nodes_node_id":
        "CREATE INDEX idx_robot_nodes_node_id ON public.robot_nodes USING btree (node_id)",
    "idx_robot_nodes_last_remembered_at":
        "CREATE INDEX idx_robot_nodes_last_remembered_at ON public.robot_nodes USING btree "
        "(last_remembered_at)",
    "tags_pkey": "CREATE UNIQUE INDEX tags_pkey ON public.tags USING btree (id)",
    "idx_tags_name_unique":
        "CREATE UNIQUE INDEX idx_tags_name_unique ON public.tags USING btree (name)",
    "idx_tags_name_pattern":
        "CREATE INDEX idx_tags_name_pattern ON public.tags USING btree (name text_pattern_ops)",
    "node_tags_pkey": "CREATE UNIQUE INDEX node_tags_pkey ON public.node_tags USING btree (id)",
    "idx_node_tags_unique":
        "CREATE UNIQUE INDEX idx_node_tags_unique ON public.node_tags USING btree "
        "(node_id, tag_id)",
    "idx_node_tags_node_id":
        "CREATE INDEX idx_node_tags_node_id ON public.node_tags USING btree (node_id)",
    "idx_node_tags_tag_id":
        "CREATE INDEX idx_node_tags_tag_id ON public.node_tags USING btree (tag_id)",
}

SEED_FOREIGN_KEYS = {
    ("robot_nodes", "fk_rails_9b003078a8"): "FOREIGN KEY (robot_id) REFERENCES robots(id) "
                                            "ON DELETE CASCADE",
    ("robot_nodes", "fk_rails_f2fc98d49e"): "FOREIGN KEY (node_id) REFERENCES nodes(id) "
                                            "ON DELETE CASCADE",
    ("node_tags", "fk_rails_b51cdcc57f"): "FOREIGN KEY (tag_id) REFERENCES tags(id) "
                                          "ON DELETE CASCADE",
    ("node_tags", "fk_rails_ebc9aafd9f"): "FOREIGN KEY (node_id) REFERENCES nodes(id) "
                                          "ON DELETE CASCADE",
}


def catalog_snapshot(conn: psycopg.Connection) -> dict[str, list[tuple]]:
    """Everything about the public schema that a migration could change."""
    return {
        "columns": conn.execute("""
            SELECT table_name, column_name, ordinal_position, data_type, is_nullable,
                   column_default, character_maximum_length
            FROM information_schema.columns WHERE table_schema = 'public'
            ORDER BY 1, 3""").fetchall(),
        "indexes": conn.execute("""
            SELECT tablename, indexname, indexdef FROM pg_indexes
            WHERE schemaname = 'public' ORDER BY 1, 2""").fetchall(),
        "constraints": conn.execute("""
            SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
            FROM pg_constraint WHERE connamespace = 'public'::regnamespace
            ORDER BY 1, 2""").fetchall(),
        "extensions": conn.execute(
            "SELECT extname FROM pg_extension ORDER BY 1").fetchall(),
    }


def test_server_versions(db: psycopg.Connection) -> None:
    version = db.execute("SHOW server_version_num").fetchone()[0]
    extensions = dict(db.execute("SELECT extname, extversion FROM pg_extension").fetchall())
    print(f"PostgreSQL {version}, extensions {extensions}")
    assert int(version) >= 150000
    assert extensions["vector"] >= "0.8"
    assert "pg_trgm" in extensions


def test_seed_columns_match_reference(db: psycopg.Connection) -> None:
    for table, expected in SEED_COLUMNS.items():
        rows = db.execute("""
            SELECT a.attname, format_type(a.atttypid, a.atttypmod),
                   CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END,
                   pg_get_expr(d.adbin, d.adrelid)
            FROM pg_attribute a
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum""", (f"public.{table}",)).fetchall()
        assert rows == expected, table


def test_seed_indexes_match_reference(db: psycopg.Connection) -> None:
    rows = dict(db.execute("""SELECT indexname, indexdef FROM pg_indexes
                              WHERE schemaname = 'public'
                                AND tablename IN ('robots', 'nodes', 'robot_nodes', 'tags',
                                                  'node_tags')""").fetchall())
    assert rows == SEED_INDEXES


def test_seed_constraints_match_reference(db: psycopg.Connection) -> None:
    check = db.execute("""SELECT pg_get_constraintdef(oid) FROM pg_constraint
                          WHERE conname = 'check_embedding_dimension'""").fetchone()
    assert check == ("CHECK (((embedding_dimension IS NULL) OR ((embedding_dimension > 0) AND "
                     "(embedding_dimension <= 2000))))",)
    fks = {(r[0], r[1]): r[2] for r in db.execute("""
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace
          AND conrelid::regclass::text IN ('robots', 'nodes', 'robot_nodes', 'tags',
                                           'node_tags')""")}
    assert fks == SEED_FOREIGN_KEYS


def test_check_constraint_rejects_bad_dimension(db: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("INSERT INTO nodes (content, embedding_dimension) VALUES ('x', 2001)")
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("INSERT INTO nodes (content, embedding_dimension) VALUES ('x', 0)")


def test_applying_migrations_twice_changes_nothing(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert apply_migrations(conn) == SHIPPED_VERSIONS
        before = catalog_snapshot(conn)
        assert apply_migrations(conn) == []
        # The seed script itself is idempotent too, run outside the migration table.
        seed = importlib.resources.files("htm_analytics").joinpath(
            "sql/001_seed_schema.sql").read_text("utf-8")
        conn.execute(seed.encode())
        assert catalog_snapshot(conn) == before
        versions = conn.execute(
            "SELECT version FROM htm_analytics_migrations ORDER BY 1").fetchall()
        assert [v for (v,) in versions] == SHIPPED_VERSIONS


def test_migrations_adopt_an_existing_seed_database(empty_database_url: str) -> None:
    """A database created from the seed schema alone (as HTM itself would) keeps its data."""
    seed = importlib.resources.files("htm_analytics").joinpath(
        "sql/001_seed_schema.sql").read_text("utf-8")
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(seed.encode())
        conn.execute("INSERT INTO robots (name) VALUES ('legacy')")
        conn.execute("INSERT INTO nodes (content, content_hash) VALUES ('old memory', 'h')")
    with LongTermMemory(empty_database_url) as ltm:  # opening installs nothing
        assert ltm.server_info["schema_version"] is None
        assert ltm.schema_info.era == "seed" and ltm.schema_info.additions == ()
    with LongTermMemory(empty_database_url, init_schema=True) as ltm:
        assert ltm.server_info["schema_version"] == SCHEMA_VERSION
        assert ltm.schema_info.event_triggers
        assert ltm.table_counts().set_index("table")["rows"].to_dict() == {
            "robots": 1, "nodes": 1, "robot_nodes": 0, "tags": 0, "node_tags": 0,
            "memory_events": 0}


def test_store_without_schema_and_init_disabled_says_what_to_do(
        empty_database_url: str) -> None:
    with pytest.raises(SchemaError, match="init-db"):
        LongTermMemory(empty_database_url, init_schema=False)


def test_store_reports_schema_version(ltm: LongTermMemory) -> None:
    assert ltm.server_info["schema_version"] == SCHEMA_VERSION
    assert ltm.server_info["pgvector_version"] >= "0.8"


def test_sql_ships_inside_a_built_wheel(tmp_path: Path) -> None:
    """A non-editable install must find its SQL: check the wheel's contents."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(root)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("htm_analytics-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted((root / "htm_analytics" / "sql").rglob("*.sql"))
    assert any(path.parent.name == "analytics" for path in shipped)
    for path in shipped:
        relative = path.relative_to(root).as_posix()
        assert relative in names, relative


def test_embedding_models_table_follows_its_node(db: psycopg.Connection) -> None:
    node = db.execute("INSERT INTO nodes (content) VALUES ('x') RETURNING id").fetchone()[0]
    db.execute("INSERT INTO node_embedding_models (node_id, provider, model, dimension) "
               "VALUES (%s, 'hashing', 'h', 8)", (node,))
    db.execute("DELETE FROM nodes WHERE id = %s", (node,))
    assert db.execute("SELECT count(*) FROM node_embedding_models").fetchone() == (0,)


def test_search_vectors_follow_every_writer(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    """Rows written by other programs (plain SQL here) are searchable too: a trigger keeps
    node_search_vectors current, and the migration filled it for rows that already existed."""
    node = db.execute("INSERT INTO nodes (content) VALUES ('written by another program') "
                      "RETURNING id").fetchone()[0]
    assert [r["id"] for r in ltm.search_fulltext(query="another program")] == [node]
    db.execute("UPDATE nodes SET content = 'rewritten about kittens' WHERE id = %s", (node,))
    ltm.clear_cache()
    assert ltm.search_fulltext(query="another program") == []
    assert [r["id"] for r in ltm.search_fulltext(query="kittens")] == [node]
    # As for a database written before the migration: running it fills the gap, and running
    # it twice changes nothing.
    db.execute("DELETE FROM node_search_vectors")
    migration = (Path(__file__).resolve().parents[1] / "htm_analytics" / "sql"
                 / "004_search_vectors.sql").read_text()
    db.execute(migration.encode())
    db.execute(migration.encode())
    assert db.execute("SELECT node_id FROM node_search_vectors").fetchall() == [(node,)]


def test_init_db_run_twice_at_once_succeeds_both_times(server_url: str) -> None:
    """Two ``init-db`` at the same moment: the second used to fail creating
    pg_stat_statements (a duplicate in pg_extension) after the migrations' lock let it go."""
    import threading

    from fixtures_db import temporary_database

    from htm_analytics.store.schema import set_up_schema

    for round_ in range(4):
        with temporary_database(server_url, f"htm_init_race{round_}", template=None) as url:
            start: threading.Barrier = threading.Barrier(3)
            errors: list[Exception] = []

            def init(url: str, start: threading.Barrier, errors: list[Exception]) -> None:
                try:
                    with psycopg.connect(url, autocommit=True) as conn:
                        start.wait()
                        set_up_schema(conn)
                except Exception as exc:  # kept for the assertion
                    errors.append(exc)

            threads = [threading.Thread(target=init, args=(url, start, errors))
                       for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert errors == []
            with psycopg.connect(url) as conn:
                assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = "
                                    "'pg_stat_statements'").fetchone() == (1,)
