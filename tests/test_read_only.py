"""A SELECT-only role on a database that has the schema and nothing else."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from htm_analytics import (
    LongTermMemory,
    build_report,
    most_reinforced,
    remember_trends,
    robot_activity,
    robot_overlap,
    tag_cooccurrence,
)


@pytest.fixture
def reader_url(database_url: str, db: psycopg.Connection) -> Iterator[str]:
    role = f"htm_reader_{uuid.uuid4().hex[:8]}"
    db.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    db.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(role)))
    db.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
        sql.Identifier(role)))
    yield f"{database_url} user={role}"
    db.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
    db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_analyses_of_an_empty_database_through_a_read_only_role(reader_url: str) -> None:
    with LongTermMemory(reader_url, init_schema=False) as store:
        overlap = robot_overlap(store)
        assert overlap.empty and list(overlap.columns) == [
            "robot1", "robot2", "shared_nodes", "nodes1", "nodes2", "jaccard"]
        assert overlap.dtypes.astype(str).tolist() == [
            "string", "string", "int64", "int64", "int64", "float64"]
        for frame in (robot_activity(store), most_reinforced(store), remember_trends(store),
                      tag_cooccurrence(store)):
            assert frame.empty
        html = build_report(store).to_html()
        assert "<html" in html.lower()
        assert store.search_fulltext(query="anything") == []
