"""Arandu: a database built from its documented tables, imported twice, analysed in place."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import psycopg
import pytest
from fixtures_db import temporary_database
from peer_helpers import (
    source_fingerprint,
    store_fingerprint,
    unit_vectors,
    writes_so_far,
)
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

from htm_analytics import LongTermMemory
from htm_analytics.frames import TIME_INFINITY, TIME_MINUS_INFINITY
from htm_analytics.peers import (
    arandu_entity_growth,
    arandu_fact_versions,
    arandu_stale_facts,
    import_arandu,
    plot_fact_timeline,
)

DDL = (Path(__file__).parent / "peer_schemas" / "arandu.sql").read_text()
T0 = dt.datetime(2025, 3, 3, 10, 0)
AS_OF = dt.datetime(2025, 9, 1, tzinfo=dt.UTC)
ENTITIES = [("person", "carlos", "Carlos"), ("person", "ana", "Ana"),
            ("organization", "acme", "Acme"), ("place", "lisbon", "Lisbon"),
            ("person", "bia", "Bia")]


def _uid(rng: np.random.Generator) -> uuid.UUID:
    return uuid.UUID(bytes=rng.bytes(16), version=4)


def build_arandu(url: str) -> dict:
    """Two agents; per entity a chain of fact versions; events with 1536-d embeddings."""
    rng = np.random.default_rng(11)
    truth: dict = {"events": [], "facts": [], "chains": {}, "relationships": []}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(DDL)
        register_vector(conn)
        for agent in ("agent-a", "agent-b"):
            for i in range(12):
                event = (_uid(rng), agent, f"{agent} said message {i} about work and travel",
                         unit_vectors(rng, 1, 1536)[0], ["joy", "sadness", None][i % 3],
                         float(rng.uniform()), "medium", T0 + dt.timedelta(days=7 * i))
                conn.execute("INSERT INTO memory_events VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                             event)
                truth["events"].append(event)
            for e, (kind, name, display) in enumerate(ENTITIES):
                key = f"{kind}:{name}"
                previous = None
                chain = []
                versions = 1 + (e + (agent == "agent-b")) % 4
                for v in range(versions):
                    start = T0 + dt.timedelta(days=20 * v + e)
                    fid = _uid(rng)
                    text = f"{display} lives in city number {v}" if name != "acme" \
                        else "Acme is a software company"  # the same text for both agents
                    if previous is not None:
                        conn.execute("UPDATE memory_facts SET valid_to = %s WHERE id = %s",
                                     (start, previous))
                    stale = (e == 4 and v == versions - 1)
                    conn.execute("""INSERT INTO memory_facts (id, agent_id, entity_type,
                        entity_key, entity_name, attribute_key, fact_text, embedding,
                        confidence, importance, source_event_id, supersedes_fact_id,
                        valid_from, is_stale, last_confirmed_at, times_retrieved, created_at)
                        VALUES (%s,%s,%s,%s,%s,'residence',%s,%s,0.9,0.5,%s,%s,%s,%s,%s,%s,%s)""",
                                 (fid, agent, kind, key, display, text,
                                  unit_vectors(rng, 1, 1536)[0], truth["events"][-1][0],
                                  previous, start, stale,
                                  start + dt.timedelta(days=3) if e == 0 else None, v, start))
                    chain.append(fid)
                    previous = fid
                truth["chains"][(agent, key)] = chain
            rel = (_uid(rng), agent, "person:carlos", "organization:acme", "works_at", 0.8,
                   truth["chains"][(agent, "person:carlos")][0], T0, None, None)
            conn.execute("INSERT INTO memory_entity_relationships VALUES "
                         "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", rel)
            truth["relationships"].append(rel)
            for kind, name, display in ENTITIES:
                conn.execute("INSERT INTO memory_entities (id, agent_id, canonical_key, "
                             "display_name, entity_type, fact_count, is_active) "
                             "VALUES (%s,%s,%s,%s,%s,%s,true)",
                             (_uid(rng), agent, f"{kind}:{name}", display, kind, 1))
                conn.execute("INSERT INTO memory_entity_aliases VALUES (%s,%s,%s,%s,%s)",
                             (_uid(rng), agent, display.lower(), f"{kind}:{name}", kind))
        # Invalidate one active fact, and call two facts contradictory.
        invalidated = truth["chains"][("agent-a", "place:lisbon")][-1]
        conn.execute("UPDATE memory_facts SET invalidated_at = %s WHERE id = %s",
                     (T0 + dt.timedelta(days=100), invalidated))
        contradicted = [truth["chains"][("agent-a", "person:ana")][-1],
                        truth["chains"][("agent-b", "person:ana")][-1]]
        conn.execute("INSERT INTO memory_meta_observations VALUES (%s,'agent-a',"
                     "'contradiction','Ana lives in two cities',%s,true,%s)",
                     (_uid(rng), Jsonb([str(c) for c in contradicted]), T0))
        truth["facts"] = conn.execute(
            "SELECT id, agent_id, entity_key, fact_text, valid_from, valid_to, is_stale, "
            "invalidated_at, last_confirmed_at, embedding FROM memory_facts").fetchall()
    truth["invalidated"], truth["contradicted"] = invalidated, contradicted
    return truth


@pytest.fixture
def arandu(server_url: str) -> Iterator[tuple[str, dict]]:
    with temporary_database(server_url, "arandu", template=None) as url:
        yield url, build_arandu(url)


TABLES = ["memory_events", "memory_facts", "memory_entities", "memory_entity_aliases",
          "memory_entity_relationships", "memory_meta_observations"]


def test_import_twice(arandu: tuple[str, dict], ltm_one_connection: LongTermMemory,
                      db: psycopg.Connection) -> None:
    ltm = ltm_one_connection
    url, truth = arandu
    with psycopg.connect(url) as source:
        before = source_fingerprint(source, TABLES)
    summary = import_arandu(url, ltm, chunk_rows=16,
                            embedding_model=("openai", "text-embedding-3-small"))
    counts = summary.to_frame().set_index("table")
    assert counts.loc["memory_facts", "imported"] == len(truth["facts"])
    assert counts.loc["memory_events", "imported"] == len(truth["events"])
    texts = [f[3] for f in truth["facts"]]
    assert counts.loc["memory_facts", "duplicates"] == len(texts) - len(set(texts))
    assert counts.loc["(total)", "rejected"] == 0
    assert "memory_intentions" in counts.index  # empty, read all the same
    fingerprint, writes = store_fingerprint(db), writes_so_far(db, ltm)
    again = import_arandu(url, ltm, chunk_rows=16).to_frame().set_index("table")
    assert again.loc["(total)", "already_imported"] == counts.loc["(total)", "read"]
    assert again.loc["(total)", "imported"] == 0
    assert store_fingerprint(db) == fingerprint and writes_so_far(db, ltm) == writes
    with psycopg.connect(url) as source:
        assert source_fingerprint(source, TABLES) == before

    relationship_texts = {f"{r[2]} {r[4]} {r[3]}" for r in truth["relationships"]}
    assert db.execute("SELECT count(*) FROM nodes").fetchone()[0] == \
        len(set(texts)) + len({e[2] for e in truth["events"]}) + len(relationship_texts)
    assert db.execute("SELECT array_agg(name ORDER BY name) FROM robots").fetchone()[0] == \
        ["agent-a", "agent-b"]
    # A fact, field by field: content, time, tag, its own 1536-d vector and model, validity.
    fact = next(f for f in truth["facts"] if f[5] is not None and texts.count(f[3]) == 1)
    row = db.execute("""
        SELECT n.content, rn.first_remembered_at, n.embedding_dimension,
               subvector(n.embedding, 1, 1536)::text, m.provider, m.model,
               array(SELECT t.name FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                     WHERE nt.node_id = n.id ORDER BY t.name), ir.record
        FROM import_records ir JOIN nodes n ON n.id = ir.node_id
        JOIN robot_nodes rn ON rn.node_id = n.id AND rn.robot_id = ir.robot_id
        LEFT JOIN node_embedding_models m ON m.node_id = n.id
        WHERE ir.source_table = 'memory_facts' AND ir.source_key = %s""",
                     (str(fact[0]),)).fetchone()
    assert row[0] == fact[3]
    assert row[1] == fact[4].replace(tzinfo=dt.UTC)
    assert row[2] == 1536 and (row[4], row[5]) == ("openai", "text-embedding-3-small")
    stored = np.array([float(x) for x in row[3].strip("[]").split(",")], dtype=np.float32)
    np.testing.assert_allclose(stored, fact[9].to_numpy(), rtol=1e-6)
    kind = fact[2].split(":")[0]
    assert {"arandu", "arandu:fact", kind, fact[2]} <= set(row[6])
    assert row[7]["valid_to"] == fact[5].isoformat()
    assert row[7]["valid_from"] == fact[4].isoformat()
    assert "embedding" not in row[7]
    # Records only: aliases keep every column.
    assert db.execute("SELECT count(*) FROM import_records "
                      "WHERE source_table = 'memory_entity_aliases'").fetchone()[0] == 10


def test_fact_versions_and_stale_facts(arandu: tuple[str, dict]) -> None:
    url, truth = arandu
    versions = arandu_fact_versions(url)
    assert len(versions) == len(truth["facts"])
    for (agent, key), chain in truth["chains"].items():
        got = versions[(versions["agent_id"] == agent) & (versions["entity_key"] == key)]
        assert got["fact_id"].tolist() == [str(f) for f in chain]
        assert got["version"].tolist() == list(range(1, len(chain) + 1))
        assert set(got["chain_length"]) == {len(chain)}
        assert got["is_active"].tolist() == [False] * (len(chain) - 1) + [
            chain[-1] != truth["invalidated"]]
    assert str(versions["valid_from"].dtype) == "datetime64[us, UTC]"

    stale = arandu_stale_facts(url, as_of=AS_OF, unconfirmed_days=150)
    by_reason = {r: set(g["fact_id"]) for r, g in stale.groupby("reason")}
    superseded = {str(c[i]) for c in truth["chains"].values() for i in range(len(c) - 1)}
    assert by_reason["superseded"] == superseded
    assert by_reason["invalidated"] == {str(truth["invalidated"])}
    assert by_reason["contradicted"] == {str(c) for c in truth["contradicted"]}
    assert by_reason["stale"] == {str(f[0]) for f in truth["facts"]
                                  if f[6] and f[5] is None and f[7] is None}
    expected_unconfirmed = {
        str(f[0]) for f in truth["facts"] if f[5] is None and f[7] is None
        and (AS_OF - (f[8] or f[4]).replace(tzinfo=dt.UTC)).total_seconds() / 86400 > 150}
    assert by_reason["unconfirmed"] == expected_unconfirmed and expected_unconfirmed

    growth = arandu_entity_growth(url, freq="M")
    for agent in ("agent-a", "agent-b"):
        mine = growth[growth["agent_id"] == agent]
        assert mine["entities"].iloc[-1] == len(ENTITIES)
        assert mine["total_facts"].iloc[-1] == sum(1 for f in truth["facts"] if f[1] == agent)
        assert mine["period"].is_monotonic_increasing
    ax = plot_fact_timeline(versions[versions["agent_id"] == "agent-a"])
    assert len(ax.get_yticks()) == len(ENTITIES)
    assert len(ax.patches) == sum(len(c) for (a, _), c in truth["chains"].items()
                                  if a == "agent-a")


def test_infinite_times(arandu: tuple[str, dict], ltm: LongTermMemory,
                        db: psycopg.Connection) -> None:
    """A writer's infinities (an open validity as valid_to = infinity, a fact valid since
    -infinity, an event at -infinity) are read, analysed, drawn and imported."""
    url, truth = arandu
    open_fact = truth["chains"][("agent-a", "person:carlos")][-1]
    since_always = truth["chains"][("agent-b", "person:bia")][0]
    event = truth["events"][0][0]
    with psycopg.connect(url, autocommit=True) as conn:
        created_at = conn.execute("SELECT created_at FROM memory_facts WHERE id = %s",
                                  (since_always,)).fetchone()[0]
        conn.execute("UPDATE memory_facts SET valid_to = 'infinity' WHERE id = %s",
                     (open_fact,))
        conn.execute("UPDATE memory_facts SET valid_from = '-infinity', "
                     "last_confirmed_at = 'infinity' WHERE id = %s", (since_always,))
        conn.execute("UPDATE memory_events SET created_at = '-infinity' WHERE id = %s",
                     (event,))

    versions = arandu_fact_versions(url).set_index("fact_id")
    assert versions.loc[str(open_fact), "valid_to"] == TIME_INFINITY
    assert versions.loc[str(open_fact), "is_active"]
    assert versions.loc[str(since_always), "valid_from"] == TIME_MINUS_INFINITY
    assert versions.loc[str(since_always), "last_confirmed_at"] == TIME_INFINITY
    growth = arandu_entity_growth(url, freq="M")
    assert growth.attrs["untimed_facts"] == 1
    assert growth["period"].min() == pd.Timestamp(T0.date().replace(day=1), tz="UTC")
    assert growth["total_facts"].groupby(growth["agent_id"]).last().sum() == \
        len(truth["facts"]) - 1
    stale = arandu_stale_facts(url, as_of=AS_OF, unconfirmed_days=150)
    assert str(open_fact) not in set(stale.loc[stale["reason"] == "superseded", "fact_id"])
    ax = plot_fact_timeline(versions.reset_index())
    left, right = (mdates.num2date(x) for x in ax.get_xlim())
    assert left.year >= T0.year - 1 and right.year <= AS_OF.year + 1

    import_arandu(url, ltm)
    remembered = dict(db.execute("""
        SELECT ir.source_key, rn.first_remembered_at FROM import_records ir
        JOIN robot_nodes rn ON rn.node_id = ir.node_id AND rn.robot_id = ir.robot_id
        WHERE ir.source_key = ANY(%s)""", ([str(since_always), str(event)],)).fetchall())
    # No moment at -infinity: the fact falls back to its created_at, the event to now.
    assert remembered[str(since_always)] == created_at.replace(tzinfo=dt.UTC)
    assert remembered[str(event)] > dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    records = dict(db.execute("SELECT source_key, record FROM import_records "
                              "WHERE source_key = ANY(%s)",
                              ([str(open_fact), str(since_always)],)).fetchall())
    assert records[str(open_fact)]["valid_to"] == "infinity"
    assert records[str(since_always)]["valid_from"] == "-infinity"


def test_a_bad_url_is_named(ltm: LongTermMemory) -> None:
    from htm_analytics import ValidationError

    with pytest.raises(ValidationError) as bad:
        import_arandu("", ltm)
    assert bad.value.field == "url"


def _events_source(url: str, events: list[tuple], *, alter: str | None = None) -> None:
    """An Arandu database holding only ``events`` (id, agent_id, content, embedding,
    created_at), its columns altered first by ``alter``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(DDL)
        if alter:
            conn.execute(alter)
        for i, (agent, content, embedding, created_at) in enumerate(events, 1):
            conn.execute("INSERT INTO memory_events (id, agent_id, content, embedding, "
                         "created_at) VALUES (%s, %s, %s, %s, %s)",
                         (uuid.UUID(int=i), agent, content, embedding, created_at))


def _records(db: psycopg.Connection) -> dict[str, dict]:
    return {str(uuid.UUID(key)): record for key, record in db.execute(
        "SELECT source_key, record FROM import_records WHERE source_table = 'memory_events'")}


@pytest.mark.parametrize("alter, vectors", [
    (None, ["[" + ",".join(["0.5"] * 1536) + "]", None]),
    ("ALTER TABLE memory_events ALTER COLUMN embedding TYPE vector",
     ["[1,2,3]", "[1,2,3,4]", None]),
], ids=["1536-d and none", "untyped: 3-d, 4-d and none"])
def test_a_chunk_of_several_embedding_dimensions_is_imported_whole(
        server_url: str, ltm: LongTermMemory, db: psycopg.Connection, alter: str | None,
        vectors: list[str | None]) -> None:
    """Each dimension (and no vector) is one bulk load of the chunk's transaction."""
    with temporary_database(server_url, "arandu_dims", template=None) as url:
        _events_source(url, [("agent", f"event {i}", v, T0) for i, v in enumerate(vectors)],
                       alter=alter)
        summary = import_arandu(url, ltm).tables["memory_events"]
        assert (summary.imported, summary.rejected) == (len(vectors), 0)
        assert import_arandu(url, ltm).tables["memory_events"].already_imported == \
            len(vectors)
    dimensions = [row[0] for row in db.execute(
        "SELECT embedding_dimension FROM nodes ORDER BY content")]
    assert dimensions == [None if v is None else v.count(",") + 1 for v in vectors]
    assert db.execute("SELECT array_agg(name) FROM robots").fetchone()[0] == ["agent"]


def test_hostile_events_are_rejected_or_remembered_never_fatal(
        server_url: str, ltm: LongTermMemory, db: psycopg.Connection) -> None:
    """Times past what the store holds are remembered at the import's time (the record
    keeps them, a real year 1 too, apart from -infinity); a vector that is no vector and an
    agent that is no name are rejected, naming their column, and recorded whole."""
    events = [("agent", "from year one", None, "0001-01-01"),
              ("agent", "from the end of time", None, "9999-12-31"),
              ("agent", "from minus infinity", None, "-infinity"),
              ("agent", "no vector", "garbage", T0),
              ("   ", "a blank agent", None, T0),
              ("x" * 300, "a long agent", None, T0),
              ("agent", "fine", "[1,2]", T0)]
    with temporary_database(server_url, "arandu_hostile", template=None) as url:
        _events_source(url, events, alter="ALTER TABLE memory_events ALTER COLUMN embedding "
                                           "TYPE text")
        summary = import_arandu(url, ltm, chunk_rows=2).tables["memory_events"]
        assert (summary.read, summary.imported, summary.rejected) == (7, 4, 3)
        assert set(summary.reasons) == {
            "embedding: is not a vector (could not convert string to float: 'garbage')",
            "agent_id: must not be empty or whitespace",
            "agent_id: must be at most 255 characters, got 300"}
        fingerprint = store_fingerprint(db)
        assert import_arandu(url, ltm).tables["memory_events"].already_imported == 7
        assert store_fingerprint(db) == fingerprint
    records = _records(db)
    assert [records[str(uuid.UUID(int=i))]["created_at"] for i in (1, 2, 3)] == \
        ["0001-01-01T00:00:00", "9999-12-31T00:00:00", "-infinity"]
    assert records[str(uuid.UUID(int=4))]["embedding"] == "garbage"
    assert records[str(uuid.UUID(int=5))]["agent_id"] == "   "
    remembered = db.execute("SELECT min(first_remembered_at) FROM robot_nodes rn "
                            "JOIN nodes n ON n.id = rn.node_id WHERE n.content LIKE 'from %'"
                            ).fetchone()[0]
    assert remembered > dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    assert db.execute("SELECT array_agg(name) FROM robots").fetchone()[0] == ["agent"]


def test_integer_agent_ids_name_robots_as_text(server_url: str, ltm: LongTermMemory,
                                               db: psycopg.Connection) -> None:
    """As GhostKG's and SEAF's ids: an agent id of another type is a robot named by its
    text."""
    with temporary_database(server_url, "arandu_int", template=None) as url:
        _events_source(url, [(7, "seven says hi", None, T0), (0, "zero says hi", None, T0)],
                       alter="ALTER TABLE memory_events ALTER COLUMN agent_id TYPE int "
                             "USING agent_id::int")
        assert import_arandu(url, ltm).tables["memory_events"].imported == 2
    assert db.execute("SELECT array_agg(name ORDER BY name) FROM robots").fetchone()[0] == \
        ["0", "7"]


def test_a_database_with_arandus_table_names_but_not_its_columns_is_refused(
        server_url: str, empty_database_url: str) -> None:
    """The command checks the columns the import reads, before the target gets the
    schema."""
    from click.testing import CliRunner

    from htm_analytics import ValidationError
    from htm_analytics.cli import cli
    from htm_analytics.peers import check_arandu_source

    with temporary_database(server_url, "arandu_other", template=None) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE memory_events (x int); CREATE TABLE memory_facts (y int)")
        with pytest.raises(ValidationError, match="memory_events table has no agent_id, "
                                                  "content, created_at, id columns"):
            check_arandu_source(url)
        result = CliRunner().invoke(cli, ["--db", empty_database_url, "import", "arandu", url])
    assert result.exit_code != 0
    assert "setting up the memory schema" not in result.output + result.stderr
    assert "Traceback" not in result.output + result.stderr
    with psycopg.connect(empty_database_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            ).fetchone() == (0,)


def test_a_real_year_one_is_kept_apart_from_minus_infinity(
        server_url: str, ltm: LongTermMemory, db: psycopg.Connection) -> None:
    with temporary_database(server_url, "arandu_year_one", template=None) as url:
        _events_source(url, [("agent", "year one", None, "0001-01-01"),
                             ("agent", "minus infinity", None, "-infinity"),
                             ("agent", "plus infinity", None, "infinity"),
                             ("agent", "before Christ", None, "0044-03-15 BC"),
                             ("agent", "year 10000", None, "10000-01-01")])
        assert import_arandu(url, ltm).tables["memory_events"].imported == 5
    assert sorted(r["created_at"] for r in _records(db).values()) == \
        ["-infinity", "0001-01-01T00:00:00", "0044-03-15 00:00:00 BC", "10000-01-01 00:00:00",
         "infinity"]


def test_a_vector_column_of_text_is_read_row_by_row(
        server_url: str, database_url: str, db: psycopg.Connection) -> None:
    """Text that is no vector rejects its row, named, with the text kept in the record;
    the command prints its summary, no traceback."""
    from click.testing import CliRunner

    from htm_analytics.cli import cli

    with temporary_database(server_url, "arandu_text_vectors", template=None) as url:
        _events_source(url, [("agent", "garbage", "garbage", T0),
                             ("agent", "huge", "[1e39, 1]", T0),
                             ("agent", "fine", " [0.5, 1] ", T0)],
                       alter="ALTER TABLE memory_events ALTER COLUMN embedding TYPE text")
        result = CliRunner().invoke(cli, ["--db", database_url, "import", "arandu", url,
                                          "--json"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output + result.stderr
    events = {r["table"]: r for r in json.loads(result.stdout)}["memory_events"]
    assert (events["imported"], events["rejected"]) == (1, 2)
    assert "embedding: is not a vector" in events["reasons"]
    assert db.execute("SELECT embedding_dimension FROM nodes").fetchall() == [(2,)]
    assert sorted(str(r.get("embedding")) for r in _records(db).values()) == \
        ["None", "[1e39, 1]", "garbage"]
