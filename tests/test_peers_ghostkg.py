"""GhostKG: a database built from its own DDL, imported twice, analysed in place (its
hostile rows: test_peers_ghostkg_rows.py)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import sqlite3
import tracemalloc
from pathlib import Path

import pandas as pd
import psycopg
import pytest
from fixtures_db import temporary_database
from peer_helpers import (
    GHOSTKG_AGENTS,
    GHOSTKG_DDL,
    GHOSTKG_START,
    build_ghostkg,
    ghostkg_stamp,
    store_fingerprint,
    writes_so_far,
)

from htm_analytics import DatabaseError, LongTermMemory, ValidationError
from htm_analytics.peers import (
    ghostkg_memory_state,
    ghostkg_retrievability_curves,
    import_ghostkg,
    plot_retrievability_curves,
)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_import_twice_keeps_everything_and_changes_nothing(
        tmp_path: Path, ltm_one_connection: LongTermMemory, db: psycopg.Connection) -> None:
    ltm = ltm_one_connection
    path = tmp_path / "agents.db"
    data = build_ghostkg(path)
    before = _digest(path)
    summary = import_ghostkg(path, ltm, chunk_rows=50)
    counts = summary.to_frame().set_index("table")
    n_edges, n_logs = len(data["edges"]), len(data["logs"])
    assert counts.loc["nodes", "read"] == counts.loc["nodes", "imported"] == len(data["nodes"])
    assert counts.loc["edges", "imported"] == n_edges
    # Bob's copy of Alice's belief, and nothing else, is a duplicate memory.
    contents = [f"{e[1]} {e[3]} {e[2]}" for e in data["edges"]]
    assert counts.loc["edges", "duplicates"] == len(contents) - len(set(contents))
    assert counts.loc["logs", "rejected"] == 1
    assert "no agent_name" in counts.loc["logs", "reasons"]
    assert counts.loc["logs", "imported"] == n_logs - 1
    assert counts.loc["edges", "chunks"] == math.ceil(n_edges / 50)

    fingerprint, writes = store_fingerprint(db), writes_so_far(db, ltm)
    again = import_ghostkg(path, ltm, chunk_rows=50).to_frame().set_index("table")
    assert again.loc["(total)", "already_imported"] == again.loc["(total)", "read"] \
        == counts.loc["(total)", "read"]
    assert again.loc["(total)", ["imported", "duplicates", "rejected"]].tolist() == [0, 0, 0]
    assert store_fingerprint(db) == fingerprint
    assert writes_so_far(db, ltm) == writes
    assert _digest(path) == before  # the source was only read

    # Counts: robots are the agents, memories the distinct edge texts and stored log lines.
    log_texts = {log[2] for log in data["logs"] if log[0] and log[2]}
    assert db.execute("SELECT count(*) FROM robots").fetchone()[0] == 3
    assert db.execute("SELECT count(*) FROM nodes").fetchone()[0] == \
        len(set(contents)) + len(log_texts)
    assert db.execute("SELECT count(*) FROM import_records").fetchone()[0] == \
        len(data["nodes"]) + n_edges + n_logs
    # Every remember is in the event log at the source's own time.
    assert db.execute("SELECT count(*) FROM memory_events WHERE kind = 'remember'"
                      ).fetchone()[0] == n_edges + len(log_texts)

    # A sample, field by field.
    bob = next(e for e in data["edges"] if e[0] == "Bob" and e[1:4] ==
               ("I", "renewable energy", "supports"))
    row = db.execute("""
        SELECT n.content, rn.first_remembered_at, r.metadata,
               array(SELECT t.name FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                     WHERE nt.node_id = n.id ORDER BY t.name),
               ir.record, rn.remember_count
        FROM import_records ir JOIN nodes n ON n.id = ir.node_id
        JOIN robots r ON r.id = ir.robot_id
        JOIN robot_nodes rn ON rn.node_id = n.id AND rn.robot_id = r.id
        WHERE ir.source_system = 'ghostkg' AND ir.source_table = 'edges'
          AND ir.source_key = %s""",
                     (json.dumps(["Bob", "I", "renewable energy", "supports"]),)).fetchone()
    assert row[0] == "I supports renewable energy"
    assert row[1] == dt.datetime.strptime(bob[6], "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
    assert row[2] == {"imported_from": "ghostkg", "source_agent": "Bob"}
    assert {"entity:i", "entity:renewable-energy", "relation:supports"} <= set(row[3])
    assert row[4] == {"owner_id": "Bob", "source": "I", "target": "renewable energy",
                      "relation": "supports", "weight": 1.0, "sentiment": bob[5],
                      "created_at": bob[6], "sim_day": bob[7], "sim_hour": bob[8]}
    assert row[5] == 1
    shared = db.execute("SELECT count(*) FROM robot_nodes rn JOIN nodes n ON n.id = rn.node_id "
                        "WHERE n.content = 'I supports renewable energy'").fetchone()[0]
    assert shared == len({e[0] for e in data["edges"]
                          if e[1:4] == ("I", "renewable energy", "supports")}) >= 2
    # FSRS state is kept with the entity's record.
    alice_state = next(n for n in data["nodes"] if n[:2] == ("Alice", "economy"))
    record = db.execute("SELECT record FROM import_records WHERE source_table = 'nodes' "
                        "AND source_key = %s", (json.dumps(["Alice", "economy"]),)).fetchone()[0]
    assert (record["stability"], record["difficulty"], record["reps"], record["state"]) == \
        alice_state[2:4] + alice_state[5:7]
    # Annotated entities become tags of the log line.
    read_log = data["logs"][0]
    tags = db.execute("""SELECT array_agg(t.name ORDER BY t.name) FROM nodes n
                         JOIN node_tags nt ON nt.node_id = n.id JOIN tags t ON t.id = nt.tag_id
                         WHERE n.content = %s""", (read_log[2],)).fetchone()[0]
    expected = {"ghostkg", "ghostkg:read", "entity"} | {
        "entity:" + e.lower().replace(" ", "-") for e in json.loads(read_log[4])["entities"]}
    assert set(tags) == expected


def test_fsrs_retrievability_matches_the_documented_formula(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    data = build_ghostkg(path)
    as_of = dt.datetime(2025, 1, 20, tzinfo=dt.UTC)
    state = ghostkg_memory_state(path, as_of=as_of)
    assert len(state) == len(data["nodes"])
    assert str(state["last_review"].dtype) == "datetime64[us, UTC]"
    w20 = 0.1542
    factor = 0.9 ** (-1 / w20) - 1
    for owner, entity, stability, _d, reviewed, *_ in data["nodes"]:
        got = state[(state["owner_id"] == owner) & (state["entity"] == entity)].iloc[0]
        if not stability:
            assert pd.isna(got["retrievability"])
            continue
        elapsed = (as_of.replace(tzinfo=None)
                   - dt.datetime.strptime(reviewed, "%Y-%m-%d %H:%M:%S")).total_seconds() / 86400
        assert got["elapsed_days"] == pytest.approx(elapsed)
        assert got["retrievability"] == pytest.approx((1 + factor * elapsed / stability) ** -w20)
    # Weakest first.
    known = state["retrievability"].dropna()
    assert known.is_monotonic_increasing
    # A review dated past pandas' nanosecond range (2262) is read all the same.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE nodes SET last_review = '3000-01-01 00:00:00' "
                     "WHERE owner_id = ? AND id = ?", data["nodes"][0][:2])
    later = ghostkg_memory_state(path, as_of=as_of)
    assert (later["last_review"] == pd.Timestamp("3000-01-01", tz="UTC")).sum() == 1

    curves = ghostkg_retrievability_curves(path, days=40, owners="Alice")
    assert set(curves["owner_id"]) == {"Alice"}
    alice = [n for n in data["nodes"] if n[0] == "Alice" and n[2] > 0]
    assert len(curves) == len(alice) * 41
    one = curves[curves["entity"] == alice[0][1]]
    assert one["retrievability"].iloc[0] == 1.0
    assert one["retrievability"].is_monotonic_decreasing
    at_stability = (1 + factor * 10 / alice[0][2]) ** -w20
    assert one.loc[one["day"] == 10, "retrievability"].iloc[0] == pytest.approx(at_stability)
    ax = plot_retrievability_curves(curves, limit=3)
    assert len(ax.lines) == 4  # three curves and the 0.9 line


def test_bad_input_is_named(tmp_path: Path, ltm: LongTermMemory) -> None:
    with pytest.raises(ValidationError) as missing:
        import_ghostkg(tmp_path / "nope.db", ltm)
    assert missing.value.field == "sqlite_path"
    empty = tmp_path / "other.db"
    sqlite3.connect(empty).close()
    with pytest.raises(ValidationError) as other:
        import_ghostkg(empty, ltm)
    assert other.value.field == "source"
    with pytest.raises(ValidationError) as chunk:
        import_ghostkg(empty, ltm, chunk_rows=0)
    assert chunk.value.field == "chunk_rows"
    with pytest.raises(ValidationError) as days:
        ghostkg_retrievability_curves(empty, days=0)
    assert days.value.field == "days"


def test_a_source_that_is_not_one_leaves_the_target_untouched(
        tmp_path: Path, empty_database_url: str) -> None:
    """The command reads the source before it gives an empty target the schema."""
    from click.testing import CliRunner

    from htm_analytics.cli import cli
    from htm_analytics.peers import check_ghostkg_source

    not_sqlite = tmp_path / "notes.jsonl"
    not_sqlite.write_text('{"not": "a database"}\n' * 50)
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    same_names = tmp_path / "same_names.db"  # GhostKG's table names, not its columns
    with sqlite3.connect(same_names) as conn:
        conn.executescript("create table nodes(x); create table edges(y)")
    conn.close()
    for source in (not_sqlite, other, same_names):
        result = CliRunner().invoke(cli, ["--db", empty_database_url, "import", "ghostkg",
                                          str(source)])
        assert result.exit_code != 0
        assert "setting up the memory schema" not in result.output + result.stderr
    with psycopg.connect(empty_database_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            ).fetchone() == (0,)
    with pytest.raises(DatabaseError):
        check_ghostkg_source(not_sqlite)
    with pytest.raises(ValidationError, match=r"nodes table has no .*owner_id") as columns:
        check_ghostkg_source(same_names)
    assert columns.value.field == "source"
    path = tmp_path / "agents.db"
    build_ghostkg(path)
    assert check_ghostkg_source(path) == []


def _log_source(path: Path, rows: int) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(GHOSTKG_DDL)
    conn.executemany(
        "INSERT INTO logs (agent_name, action_type, content, annotations, timestamp) "
        "VALUES (?, ?, ?, ?, ?)",
        ((GHOSTKG_AGENTS[i % 3], "READ" if i % 2 else "WRITE", f"message {i} about topic {i % 977}",
          '{"triplets_count": 1}', ghostkg_stamp(GHOSTKG_START + dt.timedelta(seconds=37 * i)))
         for i in range(rows)))
    conn.commit()
    conn.close()


def test_memory_is_bounded_by_the_chunk(tmp_path: Path, ltm: LongTermMemory) -> None:
    path = tmp_path / "logs.db"
    _log_source(path, 6_000)
    peaks = {}
    for chunk in (300, 6_000):
        tracemalloc.start()
        try:
            summary = import_ghostkg(path, ltm, chunk_rows=chunk)
            peaks[chunk] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert summary.tables["logs"].chunks == 6_000 // chunk
    # The second run only reads and skips (all is imported by then), yet holding the whole
    # table at once costs more than twice the peak of importing it 300 rows at a time.
    assert peaks[300] < peaks[6_000] / 2, peaks


def test_logs_stream_in_chunks(tmp_path: Path, ltm: LongTermMemory,
                               db: psycopg.Connection) -> None:
    path = tmp_path / "big.db"
    rows, chunk = 20_000, 5_000
    _log_source(path, rows)
    summary = import_ghostkg(path, ltm, chunk_rows=chunk)
    logs = summary.tables["logs"]
    assert (logs.read, logs.imported, logs.chunks) == (rows, rows, rows // chunk)
    assert db.execute("SELECT count(*) FROM nodes").fetchone()[0] == rows
    assert db.execute("SELECT count(*) FROM memory_events").fetchone()[0] == rows
    again = import_ghostkg(path, ltm, chunk_rows=chunk).tables["logs"]
    assert (again.already_imported, again.imported) == (rows, 0)


def test_cli_import(tmp_path: Path, database_url: str, db: psycopg.Connection) -> None:
    from click.testing import CliRunner

    from htm_analytics.cli import cli

    path = tmp_path / "agents.db"
    data = build_ghostkg(path)
    result = CliRunner().invoke(cli, ["--db", database_url, "import", "ghostkg", str(path),
                                      "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["table"]: r for r in json.loads(result.stdout)}
    assert rows["edges"]["imported"] == len(data["edges"])
    assert db.execute("SELECT count(*) FROM import_records").fetchone()[0] == \
        rows["(total)"]["imported"] + rows["(total)"]["rejected"]


def test_an_import_killed_midway_resumes_exactly(tmp_path: Path, server_url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "agents.db"
    build_ghostkg(path)
    totals = ("SELECT (SELECT count(*) FROM nodes), (SELECT sum(remember_count) FROM "
              "robot_nodes), (SELECT count(*) FROM import_records), "
              "(SELECT count(*) FROM memory_events)")
    with temporary_database(server_url, "htm_ghostkg_clean") as url, LongTermMemory(url) as ltm:
        import_ghostkg(path, ltm, chunk_rows=50)
        with psycopg.connect(url) as conn:
            clean = conn.execute(totals).fetchone()
    recording = LongTermMemory.record_imports
    calls = {"n": 0}

    def killed_on_the_third_chunk(self: LongTermMemory, *args: object, **kwargs: object) -> int:
        calls["n"] += 1
        if calls["n"] == 3:  # after that chunk's memories were written, before its records
            raise DatabaseError("the import was killed")
        return recording(self, *args, **kwargs)  # type: ignore[arg-type]

    with temporary_database(server_url, "htm_ghostkg_killed") as url, LongTermMemory(url) as ltm:
        monkeypatch.setattr(LongTermMemory, "record_imports", killed_on_the_third_chunk)
        with pytest.raises(DatabaseError, match="killed"):
            import_ghostkg(path, ltm, chunk_rows=50)
        monkeypatch.setattr(LongTermMemory, "record_imports", recording)
        with psycopg.connect(url) as conn:
            partial = conn.execute(totals).fetchone()
        import_ghostkg(path, ltm, chunk_rows=50)  # run again
        with psycopg.connect(url) as conn:
            resumed = conn.execute(totals).fetchone()
    assert calls["n"] == 3 and partial[2] > 0 and partial != clean
    assert resumed == clean  # nothing lost, nothing remembered twice


def test_a_second_source_is_refused_unless_named(
        tmp_path: Path, ltm_one_connection: LongTermMemory, db: psycopg.Connection) -> None:
    """Two agents' files both number their logs from 1: the second one's logs are not
    'already imported' (they were lost so); it is refused, whole, until it has a name."""
    ltm = ltm_one_connection
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    build_ghostkg(first, seed=3)
    data = build_ghostkg(second, seed=4)
    import_ghostkg(first, ltm)
    fingerprint = store_fingerprint(db)
    with pytest.raises(ValidationError, match="another source") as raised:
        import_ghostkg(second, ltm)
    assert raised.value.field == "source_name"
    assert store_fingerprint(db) == fingerprint  # refused before anything was written
    with pytest.raises(ValidationError, match="':'"):
        import_ghostkg(second, ltm, source_name="a:b")
    summary = import_ghostkg(second, ltm, source_name="second").to_frame().set_index("table")
    assert summary.loc["(total)", "already_imported"] == 0
    stored = {row[0] for row in db.execute("SELECT content FROM nodes")}
    assert {log[2] for log in data["logs"] if log[0] and log[2]} <= stored
    again = import_ghostkg(second, ltm, source_name="second").to_frame().set_index("table")
    assert again.loc["(total)", "already_imported"] == again.loc["(total)", "read"]
    assert store_fingerprint(db) != fingerprint
    # The first source, unnamed as before, is still found: nothing of it is imported again.
    repeat = import_ghostkg(first, ltm).to_frame().set_index("table")
    assert repeat.loc["(total)", "imported"] == 0


def test_a_second_source_is_refused_whatever_its_rows_became(
        tmp_path: Path, ltm_one_connection: LongTermMemory) -> None:
    """Logs are written once and keyed by their id: another file's log 1 is another log,
    whether the first file's log 1 became no memory (no text, no agent) or the same text
    by another agent."""
    ltm = ltm_one_connection
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    for path, logs in ((first, [("alice", "log one"), ("alice", None), ("", "orphan")]),
                       (second, [("zed", "log one"), ("bob", "two"), ("bob", "three")])):
        with sqlite3.connect(path) as conn:
            conn.executescript(GHOSTKG_DDL)
            conn.executemany("INSERT INTO logs (id, agent_name, action_type, content, "
                             "timestamp) VALUES (?, ?, 'WRITE', ?, '2025-01-01 09:00:00')",
                             [(i, agent, text) for i, (agent, text) in enumerate(logs, 1)])
    import_ghostkg(first, ltm)
    with pytest.raises(ValidationError, match="another source") as raised:
        import_ghostkg(second, ltm)
    assert raised.value.field == "source_name"
    import_ghostkg(second, ltm, source_name="second")
    stored = set(ltm.fetch_frame("SELECT content FROM nodes")["content"])
    assert {"two", "three"} <= stored
    assert import_ghostkg(first, ltm).to_frame().set_index("table").loc[
        "(total)", "imported"] == 0  # the first source again: nothing new, nothing refused
