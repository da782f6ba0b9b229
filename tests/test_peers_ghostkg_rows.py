"""GhostKG, row by row: what SQLite lets a writer store, hostile agents and times, and any
logs at all, are imported or rejected naming their column, never stopping an import."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from peer_helpers import (
    GHOSTKG_AGENTS,
    GHOSTKG_START,
    HOSTILE_LOGS,
    build_ghostkg,
    ghostkg_logs,
    ghostkg_stamp,
    store_fingerprint,
)

from htm_analytics import LongTermMemory, ValidationError
from htm_analytics.peers import (
    ghostkg_memory_state,
    ghostkg_retrievability_curves,
    import_ghostkg,
)


def test_what_sqlite_lets_a_writer_store_is_read_or_named(
        tmp_path: Path, ltm_one_connection: LongTermMemory) -> None:
    """SQLite keeps any value in any column: text for a number, a BLOB for a name, bytes
    that are not UTF-8 for text. The analyses and the import read them; bad arguments are
    named."""
    path = tmp_path / "odd.db"
    build_ghostkg(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE nodes SET stability = 'very stable' WHERE rowid = 1")
        conn.execute("UPDATE nodes SET owner_id = CAST('Alice' AS BLOB) WHERE rowid = 2")
        conn.execute("UPDATE logs SET content = CAST(X'66FF6F' AS TEXT) WHERE rowid = "
                     "(SELECT min(rowid) FROM logs WHERE agent_name IS NOT NULL)")
    state = ghostkg_memory_state(path)
    assert state["owner_id"].isin(GHOSTKG_AGENTS).all()
    assert state["stability"].notna().all()
    summary = import_ghostkg(path, ltm_one_connection).to_frame().set_index("table")
    assert summary.loc["logs", "imported"] > 0
    stored = ltm_one_connection.fetch_frame("SELECT content FROM nodes")["content"].tolist()
    assert "f\\xffo" in stored  # the bytes that are not UTF-8, escaped
    for call, field in ((lambda: ghostkg_memory_state(path, decay=0), "decay"),
                        (lambda: ghostkg_retrievability_curves(path, owners=5), "owners"),
                        (lambda: ghostkg_retrievability_curves(path, days=10**10), "days"),
                        (lambda: ghostkg_memory_state("g\x00.db"), "sqlite_path"),
                        (lambda: ghostkg_memory_state("g_\ud800.db"), "sqlite_path")):
        with pytest.raises(ValidationError) as raised:
            call()
        assert raised.value.field == field


def test_one_hostile_row_never_stops_an_import(tmp_path: Path, ltm: LongTermMemory,
                                               db: psycopg.Connection) -> None:
    """A time past the years the store holds is remembered at the import's time (the
    record keeps it); an agent name that is no name is rejected, naming agent_name; every
    other row of the chunk is imported, and a second run writes nothing."""
    path = tmp_path / "hostile.db"
    good = [("Alice", f"good line {i}", ghostkg_stamp(GHOSTKG_START)) for i in range(5)]
    hostile = [("Alice", "from year one", "0001-01-01 00:00:00"),
               ("Alice", "from the end", "9999-12-31 23:59:59"),
               ("Alice", "an offset past 9999", "9999-12-31T23:00:00-05:00"),
               ("   ", "a blank agent", ghostkg_stamp(GHOSTKG_START)),
               ("Al\x00ice", "a NUL in the agent", ghostkg_stamp(GHOSTKG_START)),
               ("x" * 300, "a long agent", ghostkg_stamp(GHOSTKG_START)),
               (7, "an agent by number", ghostkg_stamp(GHOSTKG_START))]
    ghostkg_logs(path, good[:2] + hostile + good[2:])
    summary = import_ghostkg(path, ltm, chunk_rows=2).tables["logs"]
    assert (summary.read, summary.imported, summary.rejected) == (12, 9, 3)
    assert set(summary.reasons) == {"agent_name: must not be empty or whitespace",
                                    "agent_name: must not contain NUL bytes (PostgreSQL text "
                                    "cannot hold them)",
                                    "agent_name: must be at most 255 characters, got 300"}
    fingerprint = store_fingerprint(db)
    assert import_ghostkg(path, ltm, chunk_rows=2).tables["logs"].already_imported == 12
    assert store_fingerprint(db) == fingerprint
    assert db.execute("SELECT array_agg(name ORDER BY name) FROM robots").fetchone()[0] == \
        ["7", "Alice"]
    records = {r[0]["content"]: r[0] for r in db.execute("SELECT record FROM import_records")}
    assert records["from year one"]["timestamp"] == "0001-01-01 00:00:00"
    assert records["a long agent"]["_rejected"].startswith("agent_name:")
    late = db.execute("SELECT min(rn.first_remembered_at) FROM robot_nodes rn JOIN nodes n "
                      "ON n.id = rn.node_id WHERE n.content LIKE 'from %' "
                      "OR n.content LIKE 'an offset%'").fetchone()[0]
    assert late > dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)


def test_the_cli_imports_around_a_hostile_row(tmp_path: Path, database_url: str) -> None:
    from click.testing import CliRunner

    from htm_analytics.cli import cli

    path = tmp_path / "g2.db"
    ghostkg_logs(path, [("x" * 300, "a long agent", ghostkg_stamp(GHOSTKG_START)),
                        ("Bob", "hello", "9999-01-01")])
    result = CliRunner().invoke(cli, ["--db", database_url, "import", "ghostkg", str(path),
                                      "--json"])
    assert result.exit_code == 0, result.output
    assert {r["table"]: r["rejected"] for r in json.loads(result.stdout)}["logs"] == 1


_SOURCES = iter(range(10**6))


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(logs=HOSTILE_LOGS)
def test_any_logs_are_imported_or_rejected_each_recorded_once(
        tmp_path: Path, ltm: LongTermMemory, logs: list[tuple]) -> None:
    """Whatever a writer put in a log's agent, text and time: the import finishes, records
    every row once (rejected or not) and the second run imports nothing."""
    name = f"s{next(_SOURCES)}"
    path = tmp_path / f"{name}.db"
    ghostkg_logs(path, logs)
    summary = import_ghostkg(path, ltm, chunk_rows=3, source_name=name).tables["logs"]
    assert summary.read == len(logs) and summary.imported + summary.rejected == len(logs)
    keys = ltm.imported_keys("ghostkg", "logs", [f"{name}:{i}" for i in
                                                 range(1, len(logs) + 1)])
    assert len(keys) == len(logs)
    again = import_ghostkg(path, ltm, chunk_rows=3, source_name=name).tables["logs"]
    assert (again.already_imported, again.imported, again.rejected) == (len(logs), 0, 0)
