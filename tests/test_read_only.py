"""A SELECT-only role on a database that has the schema and nothing else."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from fixtures_db import select_only_role

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
    with select_only_role(database_url, db) as url:
        yield url


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
