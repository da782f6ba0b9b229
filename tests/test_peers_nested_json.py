"""Peer imports of ``jsonb`` nested deeper than ``import_records`` keeps: the row is
rejected, naming its column (kept as its JSON text), and every other row is imported."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fixtures_db import temporary_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from peer_helpers import store_fingerprint

from htm_analytics import LongTermMemory
from htm_analytics.peers import import_arandu, import_seaf
from htm_analytics.validation import MAX_JSON_DEPTH

SCHEMAS = Path(__file__).parent / "peer_schemas"
T0 = dt.datetime(2025, 3, 1, 12, 0)
TOO_DEEP = f"is nested deeper than {MAX_JSON_DEPTH} levels (or refers to itself)"


def _nested(levels: int, kind: str, leaf: str = "1") -> str:
    """JSON text of ``levels`` lists or objects around ``leaf``, written as text (deeper
    than a JSON writer of the test's own would go)."""
    if kind == "list":
        return "[" * levels + leaf + "]" * levels
    return '{"a": ' * levels + leaf + "}" * levels


def _arandu_source(url: str, metadata: list[str]) -> None:
    """An Arandu database whose events carry a ``metadata jsonb`` column (a later version's
    column: ``SELECT *`` reads it), one event per text of ``metadata``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute((SCHEMAS / "arandu.sql").read_text())
        conn.execute("ALTER TABLE memory_events ADD COLUMN metadata jsonb")
        _arandu_events(conn, metadata)


def _arandu_events(conn: psycopg.Connection, metadata: list[str]) -> None:
    for i, text in enumerate(metadata, 1):
        conn.execute("INSERT INTO memory_events (id, agent_id, content, created_at, metadata) "
                     "VALUES (%s, 'agent', %s, %s, %s::jsonb)",
                     (uuid.UUID(int=i), f"event {i}", T0, text))


def _records(db: psycopg.Connection, table: str) -> dict[str, dict]:
    return dict(db.execute("SELECT source_key, record FROM import_records "
                           "WHERE source_table = %s", (table,)).fetchall())


def test_arandu_rows_nested_too_deep_are_rejected_not_the_import(
        server_url: str, ltm_one_connection: LongTermMemory, db: psycopg.Connection) -> None:
    """As deep as the store keeps is imported; one level deeper, 100 or 700 levels (past
    Python's recursion limit, walked twice), and an integer ``jsonb`` holds but the store
    does not, each reject their row naming the column, whose JSON text the record keeps."""
    ltm = ltm_one_connection
    # The record is one level, its column the next: 63 more fit.
    fits = _nested(MAX_JSON_DEPTH - 1, "list")
    metadata = ['{"ok": true}', fits, _nested(MAX_JSON_DEPTH, "list"),
                _nested(100, "object"), _nested(700, "list"), '{"n": 1' + "0" * 400 + "}",
                '["fine"]']
    with temporary_database(server_url, "arandu_deep", template=None) as url:
        _arandu_source(url, metadata)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO memory_meta_observations VALUES (%s, 'agent', 'x', "
                         "'deep', %s::jsonb, true, %s), (%s, 'agent', 'x', 'flat', "
                         "'[\"f1\"]', true, %s)",
                         (uuid.UUID(int=1), _nested(100, "list"), T0, uuid.UUID(int=2), T0))
        summary = import_arandu(url, ltm, chunk_rows=2)
        events = summary.tables["memory_events"]
        assert (events.read, events.imported, events.rejected) == (7, 3, 4)
        assert dict(events.reasons) == {
            f"metadata: {TOO_DEEP}": 3,
            "metadata: value['metadata']['n']: integer too large": 1}
        observations = summary.tables["memory_meta_observations"]
        assert (observations.read, observations.rejected) == (2, 1)
        assert dict(observations.reasons) == {f"supporting_fact_ids: {TOO_DEEP}": 1}

        fingerprint = store_fingerprint(db)
        again = import_arandu(url, ltm, chunk_rows=2).to_frame().set_index("table")
        assert again.loc["(total)", "already_imported"] == again.loc["(total)", "read"]
        assert again.loc["(total)", ["imported", "duplicates", "rejected"]].tolist() == \
            [0, 0, 0]
        assert store_fingerprint(db) == fingerprint

    contents = {row[0] for row in db.execute("SELECT content FROM nodes")}
    assert contents == {"event 1", "event 2", "event 7"}
    records = _records(db, "memory_events")
    for i, text in enumerate(metadata, 1):
        record = records[str(uuid.UUID(int=i))]
        if i in (1, 2, 7):
            assert record["metadata"] == json.loads(text) and "_rejected" not in record
        else:  # kept whole, as its text
            assert isinstance(record["metadata"], str)
            assert json.loads(record["metadata"]) == json.loads(text)
            assert record["_rejected"].startswith("metadata: ")
    observation = _records(db, "memory_meta_observations")[str(uuid.UUID(int=1))]
    assert json.loads(observation["supporting_fact_ids"]) == json.loads(_nested(100, "list"))
    assert observation["content"] == "deep"


def test_seaf_executions_with_deep_inputs_are_rejected_and_imported_again_unchanged(
        server_url: str, ltm_one_connection: LongTermMemory, db: psycopg.Connection) -> None:
    """An execution whose ``inputs`` nest 100 deep is rejected naming ``inputs``; the
    others become recalls; importing again (which compares every execution's record with
    the one kept) is no other source, and writes nothing."""
    ltm = ltm_one_connection
    inputs = ['{"path": "a.csv"}', _nested(100, "object"), None]
    with temporary_database(server_url, "seaf_deep", template=None) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute((SCHEMAS / "seaf.sql").read_text())
            conn.execute("INSERT INTO agent_tools (id, name, file_path, test_path, docstring, "
                         "created_at) VALUES ('1', 'load_csv', 'f', 't', 'Loads', %s)", (T0,))
            for order, text in enumerate(inputs, 1):
                conn.execute("INSERT INTO tool_executions (session_id, tool_name, "
                             "execution_order, inputs, outputs, success, timestamp) VALUES "
                             "('s1', 'load_csv', %s, %s::jsonb, %s::jsonb, true, %s)",
                             (order, text, _nested(3, "list"), T0))
        executions = import_seaf(url, ltm, chunk_rows=2).tables["tool_executions"]
        assert (executions.read, executions.imported, executions.rejected) == (3, 2, 1)
        assert dict(executions.reasons) == {f"inputs: {TOO_DEEP}": 1}
        fingerprint = store_fingerprint(db)
        again = import_seaf(url, ltm, chunk_rows=2).to_frame().set_index("table")
        assert again.loc["(total)", "already_imported"] == again.loc["(total)", "read"]
        assert store_fingerprint(db) == fingerprint
    assert db.execute("SELECT count(*) FROM memory_events WHERE kind = 'recall'"
                      ).fetchone()[0] == 2
    record = next(r for r in _records(db, "tool_executions").values()
                  if r["execution_order"] == 2)
    assert json.loads(record["inputs"]) == json.loads(inputs[1])
    assert record["outputs"] == [[[1]]]


@st.composite
def _deep_json(draw: st.DrawFn) -> tuple[str, int]:
    """JSON text of some shape, nested around the store's depth or far past it, and its
    height: levels of lists and objects below the value itself (0 for a scalar or an empty
    one)."""
    target = draw(st.one_of(st.integers(MAX_JSON_DEPTH - 4, MAX_JSON_DEPTH + 4),
                            st.integers(0, 700), st.integers(500, 700)))
    shapes = draw(st.lists(st.sampled_from(["list", "object", "pair"]), min_size=1,
                           max_size=3))
    text, height = draw(st.sampled_from([("1", 0), ('"x"', 0), ("null", 0), ("[]", 0),
                                         ("{}", 0), ("[2]", 1), ('{"k": 2.5}', 1)]))
    for shape in itertools.cycle(shapes):
        if height >= target:
            return text, height
        if shape == "list":
            text, height = f"[{text}]", height + 1
        elif shape == "object":
            text, height = f'{{"a": {text}}}', height + 1
        else:
            text, height = f'[0, {{"b": {text}}}]', height + 2
    raise AssertionError("unreachable")


@pytest.fixture
def arandu_with_metadata(server_url: str) -> Iterator[str]:
    with temporary_database(server_url, "arandu_depths", template=None) as url:
        _arandu_source(url, [])
        yield url


_NAMES = iter(range(10**6))


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(_deep_json(), min_size=1, max_size=3))
def test_any_nesting_is_kept_or_rejected_naming_its_column(
        arandu_with_metadata: str, ltm: LongTermMemory, values: list[tuple[str, int]]) -> None:
    """Whatever the depth and shape of a ``jsonb`` column: a value the store keeps (the
    record, its column and at most ``MAX_JSON_DEPTH - 1`` levels more) is imported as it
    is, a deeper one rejects its row naming the column and is kept as its JSON text; the
    second import imports nothing."""
    url, name = arandu_with_metadata, f"s{next(_NAMES)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE memory_events CASCADE")
        _arandu_events(conn, [text for text, _ in values])
    fits = [height < MAX_JSON_DEPTH for _, height in values]
    events = import_arandu(url, ltm, source_name=name).tables["memory_events"]
    assert (events.read, events.imported, events.rejected) == \
        (len(values), sum(fits), len(values) - sum(fits))
    assert set(events.reasons) <= {f"metadata: {TOO_DEEP}"}
    recorded = ltm.imported_records("arandu", "memory_events",
                                    [f"{name}:{uuid.UUID(int=i)}"
                                     for i in range(1, len(values) + 1)])
    for i, ((text, _), fit) in enumerate(zip(values, fits), 1):
        record = recorded[f"{name}:{uuid.UUID(int=i)}"]
        kept = record["metadata"] if fit else json.loads(record["metadata"])
        assert kept == json.loads(text)
        assert ("_rejected" in record) is not fit
    again = import_arandu(url, ltm, source_name=name).tables["memory_events"]
    assert (again.already_imported, again.imported, again.rejected) == (len(values), 0, 0)


def test_json_python_cannot_read_rejects_its_row_not_the_import(
        server_url: str, ltm_one_connection: LongTermMemory, db: psycopg.Connection) -> None:
    """A ``jsonb`` value nested past Python's recursion limit or holding an integer of more
    digits than Python reads from text is read as its text: its row is rejected naming the
    column, the record keeps that text, the other rows are imported, and a second import
    writes nothing."""
    ltm = ltm_one_connection
    metadata = [_nested(3000, "list"), '{"n": 1' + "0" * 5000 + "}", '["fine"]']
    with temporary_database(server_url, "arandu_unread", template=None) as url:
        _arandu_source(url, metadata)
        summary = import_arandu(url, ltm, chunk_rows=2)
        events = summary.tables["memory_events"]
        assert (events.read, events.imported, events.rejected) == (3, 1, 2)
        unread = ("metadata: is JSON nested too deep or with too long a number for Python "
                  "to read (kept as its text)")
        assert dict(events.reasons) == {unread: 2}
        fingerprint = store_fingerprint(db)
        again = import_arandu(url, ltm, chunk_rows=2).tables["memory_events"]
        assert (again.already_imported, again.imported, again.rejected) == (3, 0, 0)
        assert store_fingerprint(db) == fingerprint
    records = _records(db, "memory_events")
    for i, text in enumerate(metadata[:2], 1):
        record = records[str(uuid.UUID(int=i))]
        assert record["_rejected"] == unread
        assert record["metadata"].replace(" ", "") == text.replace(" ", "")
    assert {row[0] for row in db.execute("SELECT content FROM nodes")} == {"event 3"}
