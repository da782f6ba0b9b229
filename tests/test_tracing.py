"""Every statement traceable: the tracer callback and the htm_analytics.sql debug log."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import htm_analytics as ha
from htm_analytics import LongTermMemory, ValidationError
from htm_analytics.frames import load_analytics_query
from htm_analytics.store import CURSOR_PREFIX, STATEMENT_MARKER
from htm_analytics.store.tracing import marked_statement


def test_tracer_sees_every_statement_with_params_and_duration(database_url: str) -> None:
    seen: list[tuple[str, object, float]] = []
    with LongTermMemory(database_url, tracer=lambda *call: seen.append(call)) as store:
        opened = len(seen)
        robot = store.register_robot("tracer-bot")
        store.add(content="traced memory about postgres", robot_id=robot,
                  embedding=[0.1, 0.2, 0.3], tags=["db:postgres"])
        store.search_fulltext(query="postgres")
        store.search(embedding=[0.1, 0.2, 0.3], limit=3)
        ha.tag_hierarchy(store)
        ha.sensitive_memories(store)  # its texts stream through a named cursor
    texts = [text for text, _, _ in seen]
    assert opened >= 2  # the preparation's catalog reads and the pool's session settings
    assert any("INSERT INTO nodes" in t for t in texts)
    assert any("node_search_vectors" in t and "ts_rank" in t for t in texts)
    assert any("hnsw.ef_search" in t for t in texts)  # settings of the vector search
    assert any("<=>" in t for t in texts)
    # what the helper ran, verbatim but for the marker of the toolkit's own statements
    assert marked_statement(load_analytics_query("tag_hierarchy")) in texts
    assert any("AS has_vector" in t for t in texts)  # declared once, its rows fetched later
    inserted = next(params for text, params, _ in seen if "INSERT INTO nodes" in text)
    assert isinstance(inserted, dict) and inserted["content"] == "traced memory about postgres"
    assert all(isinstance(seconds, float) and seconds >= 0 for _, _, seconds in seen)


def test_the_toolkits_own_statements_are_marked_and_the_agents_are_not(
        database_url: str) -> None:
    seen: list[str] = []
    with LongTermMemory(database_url, tracer=lambda text, *_: seen.append(text)) as store:
        # What an agent runs, once the store is open: its statements are the application's.
        seen.clear()
        robot = store.register_robot("marker-bot")
        node = store.add(content="a memory about statement markers", robot_id=robot,
                         embedding=[0.1, 0.2, 0.3], tags=["db:postgres"])["node_id"]
        store.add_tag(node_id=node, tag="notes:markers")
        store.retrieve(node)
        store.search_fulltext(query="markers")
        store.search(embedding=[0.1, 0.2, 0.3], limit=3)
        store.search_by_tags(tags=["db:postgres"])
        store.update_working_memory(robot, held=[node])
        gone = store.add(content="a memory to forget", robot_id=robot)["node_id"]
        store.forget(gone, confirm="confirmed")
        operations, seen[:] = list(seen), []
        # What the toolkit's analyses run: every statement marked.
        ha.tag_hierarchy(store)
        ha.sensitive_memories(store)  # a named cursor
        ha.stale_memories(store)
        analyses = list(seen)
    marked = [text for text in operations if STATEMENT_MARKER in text]
    assert operations and not marked, marked
    assert analyses and not [text for text in analyses if STATEMENT_MARKER not in text]


@pytest.mark.parametrize(("statement", "expected"), [
    ("SELECT 1", "SELECT /* htm_analytics */ 1"),
    ("-- why\n  /* how */ WITH x AS (SELECT 1) SELECT * FROM x",
     "-- why\n  /* how */ WITH /* htm_analytics */ x AS (SELECT 1) SELECT * FROM x"),
    ("(SELECT 1)", "(SELECT 1)"),  # no first word: left as it is
    ("", ""),
])
def test_the_marker_follows_the_first_word(statement: str, expected: str) -> None:
    # pg_stat_statements keeps a statement's text from its first token: a leading comment
    # would be cut off.
    assert marked_statement(statement) == expected
    assert CURSOR_PREFIX == "htm_analytics_"


def test_sql_log_masks_parameters(database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    secret = "a memory nobody may read in a log"
    with LongTermMemory(database_url) as store, \
            caplog.at_level(logging.DEBUG, logger="htm_analytics.sql"):
        robot = store.register_robot("logger-bot")
        store.add(content=secret, robot_id=robot, embedding=np.ones(4, dtype=np.float32))
    records = [r for r in caplog.records if r.name == "htm_analytics.sql"]
    insert = next(r.getMessage() for r in records if "INSERT INTO nodes" in r.getMessage())
    assert " ms: " in insert and "'content': '<str 33>'" in insert
    assert "'embedding': '<ndarray 2000>'" in insert  # padded to the schema's 2000
    assert all(secret not in r.getMessage() for r in records)


def test_no_log_records_when_debug_is_off(database_url: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="htm_analytics.sql"), \
            LongTermMemory(database_url) as store:
        store.stats()
    assert not [r for r in caplog.records if r.name == "htm_analytics.sql"]


def test_tracer_must_be_callable(database_url: str) -> None:
    with pytest.raises(ValidationError) as error:
        LongTermMemory(database_url, tracer="print")  # type: ignore[arg-type]
    assert error.value.field == "tracer"
