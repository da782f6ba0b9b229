"""SEAF: a database built from its documented schema, imported twice, analysed in place, and
the recall benchmark on its IVFFlat index (and an HNSW one)."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
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

from htm_analytics import LongTermMemory, ValidationError, benchmark_recall
from htm_analytics.peers import (
    import_seaf,
    plot_tool_stats,
    seaf_composite_candidates,
    seaf_tool_ngrams,
    seaf_tool_stats,
)
from htm_analytics.store.table_recall import benchmark_table_recall

DDL = (Path(__file__).parent / "peer_schemas" / "seaf.sql").read_text()
T0 = dt.datetime(2025, 11, 4, 10, 0, tzinfo=dt.UTC)
WORKFLOW = ["load_csv_data", "calculate_profit_margins", "generate_report"]
OTHER_TOOLS = ["fetch_url", "parse_html", "summarize_text", "send_email", "plot_chart"]
TABLES = ["agent_sessions", "agent_tools", "tool_executions", "session_messages",
          "composite_tools", "workflow_patterns", "tool_relationships"]


def build_seaf(url: str, *, tools: int = 400) -> dict:
    rng = np.random.default_rng(5)
    truth: dict = {"executions": [], "messages": [], "sessions": []}
    names = WORKFLOW + OTHER_TOOLS + [f"synth_tool_{i:03d}" for i in range(tools - 8)]
    # Tool vectors in 20 clusters, as similar tools are.
    centres = unit_vectors(rng, 20, 1536)
    vectors = centres[rng.integers(0, 20, len(names))] + 0.3 * unit_vectors(rng, len(names),
                                                                            1536)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(DDL)
        register_vector(conn)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO agent_tools (id, name, embedding, file_path, test_path, docstring, "
                "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(str(uuid.UUID(int=i + 1)), name, vectors[i], f"tools/{name}.py",
                  f"tools/test_{name}.py", None if i % 50 == 7 else f"Tool {name} does step {i}",
                  T0 - dt.timedelta(days=30 - i % 30)) for i, name in enumerate(names)])
        conn.execute("REINDEX INDEX agent_tools_embedding_idx")  # lists from the data
        conn.execute("INSERT INTO composite_tools (tool_name, component_tools, embedding, "
                     "docstring, created_at) VALUES ('analyze_ecommerce_data', %s, %s, "
                     "'Complete ecommerce analysis', %s)", (WORKFLOW, vectors[0], T0))
        conn.execute("INSERT INTO workflow_patterns (pattern_name, tool_sequence, frequency, "
                     "avg_success_rate, confidence_score) VALUES ('web_digest', %s, 4, 0.9, "
                     "0.8)", (["fetch_url", "parse_html", "summarize_text"],))
        conn.execute("INSERT INTO tool_relationships (tool_a, tool_b, confidence_score, "
                     "frequency) VALUES ('calculate_profit_margins', 'generate_report', "
                     "0.85, 12)")
        for s in range(30):
            session = str(uuid.UUID(int=10_000 + s))
            start = T0 + dt.timedelta(hours=s)
            conn.execute("INSERT INTO agent_sessions VALUES (%s, %s, %s)",
                         (session, start, start + dt.timedelta(minutes=10)))
            truth["sessions"].append(session)
            if s % 3 != 2:
                sequence = list(WORKFLOW)
            else:
                sequence = list(rng.choice(OTHER_TOOLS, size=3, replace=False))
            if s == 29:
                sequence.append("ghost_tool")  # executed, but never registered
            for order, tool in enumerate(sequence, start=1):
                ok = not (s % 7 == 0 and order == 2)
                ms = int(rng.integers(20, 400))
                row = conn.execute(
                    "INSERT INTO tool_executions (session_id, tool_name, execution_order, "
                    "inputs, outputs, success, execution_time_ms, timestamp) VALUES "
                    "(%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    (session, tool, order, Jsonb({"step": order}), Jsonb({"ok": ok}), ok, ms,
                     start + dt.timedelta(minutes=order))).fetchone()
                truth["executions"].append((row[0], session, tool, order, ok, ms,
                                            start + dt.timedelta(minutes=order)))
            for index, (role, text) in enumerate(
                    [("user", f"Please run analysis number {s}"),
                     ("assistant", "Done." if s % 10 == 0 else f"Finished analysis {s}.")]):
                conn.execute("INSERT INTO session_messages (session_id, message_index, role, "
                             "content, created_at) VALUES (%s, %s, %s, %s, %s)",
                             (session, index, role, text, start + dt.timedelta(seconds=index)))
                truth["messages"].append((session, role, text))
    truth["tools"], truth["vectors"] = names, vectors
    return truth


@pytest.fixture(scope="module")
def seaf(server_url: str) -> Iterator[tuple[str, dict]]:
    with temporary_database(server_url, "seaf", template=None) as url:
        yield url, build_seaf(url)


def test_import_twice(seaf: tuple[str, dict], ltm_one_connection: LongTermMemory,
                      db: psycopg.Connection) -> None:
    ltm = ltm_one_connection
    url, truth = seaf
    with psycopg.connect(url) as source:
        before = source_fingerprint(source, TABLES)
    for wrong in ("nonsense", ("openai",), ("openai", "")):  # refused before anything is read
        with pytest.raises(ValidationError) as raised:
            import_seaf(url, ltm, embedding_model=wrong)
        assert raised.value.field == "embedding_model"
    summary = import_seaf(url, ltm, chunk_rows=64)
    counts = summary.to_frame().set_index("table")
    n_exec = len(truth["executions"])
    assert counts.loc["tool_executions", "imported"] == n_exec - 1
    assert counts.loc["tool_executions", "rejected"] == 1
    assert "no imported agent_tools or composite_tools row: 1" in \
        counts.loc["tool_executions", "reasons"]
    texts = [m[2] for m in truth["messages"]]
    assert counts.loc["session_messages", "duplicates"] == len(texts) - len(set(texts))
    fingerprint, writes = store_fingerprint(db), writes_so_far(db, ltm)
    again = import_seaf(url, ltm, chunk_rows=64).to_frame().set_index("table")
    assert again.loc["(total)", "already_imported"] == counts.loc["(total)", "read"]
    assert again.loc["(total)", ["imported", "rejected"]].tolist() == [0, 0]
    assert store_fingerprint(db) == fingerprint and writes_so_far(db, ltm) == writes
    with psycopg.connect(url) as source:
        assert source_fingerprint(source, TABLES) == before

    # Robots: the 30 sessions and the tool registry; nodes: tools, the composite, messages.
    assert db.execute("SELECT count(*) FROM robots").fetchone()[0] == 31
    assert db.execute("SELECT count(*) FROM nodes").fetchone()[0] == \
        len(truth["tools"]) + 1 + len(set(texts))
    assert db.execute("SELECT count(*), min(dimension), max(dimension), min(model) "
                      "FROM node_embedding_models").fetchone() == \
        (len(truth["tools"]) + 1, 1536, 1536, "text-embedding-3-small")
    # An execution, field by field: a recall event of its session on the tool's memory.
    execution = next(e for e in truth["executions"] if not e[4])
    row = db.execute("""
        SELECT e.kind, e.occurred_at, r.name, n.content, ir.record
        FROM import_records ir JOIN memory_events e ON e.id = ir.event_id
        JOIN robots r ON r.id = e.robot_id JOIN nodes n ON n.id = e.node_id
        WHERE ir.source_table = 'tool_executions' AND ir.source_key = %s""",
                     (str(execution[0]),)).fetchone()
    assert row[:3] == ("recall", execution[6], execution[1])
    assert row[3].startswith(execution[2] + ":")
    assert (row[4]["success"], row[4]["execution_time_ms"], row[4]["outputs"]) == \
        (False, execution[5], {"ok": False})
    # A tool keeps its own vector.
    stored = db.execute("SELECT subvector(n.embedding, 1, 1536)::text FROM nodes n "
                        "WHERE n.content LIKE 'parse_html:%'").fetchone()[0]
    np.testing.assert_allclose(np.array(stored.strip("[]").split(","), dtype=np.float32),
                               truth["vectors"][truth["tools"].index("parse_html")], rtol=1e-6)


def test_tool_analytics(seaf: tuple[str, dict]) -> None:
    url, truth = seaf
    executions = truth["executions"]
    stats = seaf_tool_stats(url).set_index("tool_name")
    for tool in {e[2] for e in executions}:
        mine = [e for e in executions if e[2] == tool]
        assert stats.loc[tool, "executions"] == len(mine)
        assert stats.loc[tool, "success_rate"] == pytest.approx(np.mean([e[4] for e in mine]))
        assert stats.loc[tool, "latency_p50_ms"] == pytest.approx(np.median([e[5] for e in mine]))
    assert plot_tool_stats(stats.reset_index(), top=5).patches

    by_session: dict[str, list] = {}
    for e in sorted(executions, key=lambda e: (e[1], e[3])):
        by_session.setdefault(e[1], []).append(e)
    pairs: Counter = Counter()
    good: Counter = Counter()
    for steps in by_session.values():
        for a, b in itertools.pairwise(steps):
            pairs[(a[2], b[2])] += 1
            good[(a[2], b[2])] += a[4] and b[4]
    ngrams = seaf_tool_ngrams(url, n=2, top=None)
    assert dict(zip(ngrams["tools"], ngrams["occurrences"])) == dict(pairs)
    first = ngrams.iloc[0]
    assert first["occurrences"] == max(pairs.values())
    assert first["success_rate"] == pytest.approx(good[first["tools"]] / pairs[first["tools"]])

    candidates = seaf_composite_candidates(url).set_index("ngram")
    whole = " → ".join(WORKFLOW)
    assert candidates.loc[whole, "already_composite"]
    assert candidates.loc[whole, "composite_tool"] == "analyze_ecommerce_data"
    # Every candidate meets the rule, computed here from the raw rows.
    for tools in candidates["tools"]:
        n = len(tools)
        windows = [steps[i:i + n] for steps in by_session.values()
                   for i in range(len(steps) - n + 1)
                   if tuple(s[2] for s in steps[i:i + n]) == tools]
        assert len(windows) >= 3 and n >= 2
        assert np.mean([all(s[4] for s in w) for w in windows]) >= 0.8


def test_recall_on_ivfflat_and_hnsw(seaf: tuple[str, dict], ltm: LongTermMemory,
                                    database_url: str) -> None:
    url, _ = seaf
    ivf = benchmark_table_recall(url, table="agent_tools", queries=40, probes=[1, 100])
    assert ivf["method"].tolist() == ["ivfflat"] * 2
    assert ivf["parameter"].iloc[0] == "ivfflat.probes" and ivf["used_index"].all()
    # Probing every list is an exact search: recall 1; one list of 100 misses neighbours.
    assert ivf["recall_mean"].tolist()[1] == 1.0
    assert ivf["recall_mean"].iloc[0] < 1.0
    # The same through benchmark_recall, on a table in the store's own database, and HNSW.
    build_seaf(database_url, tools=200)
    probes = benchmark_recall(ltm, table="agent_tools", probes=[100], queries=30)
    assert probes["recall_mean"].tolist() == [1.0] and probes["used_index"].all()
    # A user who moved the column to HNSW (with both, the planner picks one of them).
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP INDEX agent_tools_embedding_idx")
        conn.execute("CREATE INDEX tools_hnsw ON agent_tools "
                     "USING hnsw (embedding vector_cosine_ops)")
    hnsw = benchmark_recall(ltm, table="agent_tools", ef_search=[5, 200], queries=30, k=5)
    assert hnsw["parameter"].tolist() == ["hnsw.ef_search"] * 2
    assert hnsw["index"].tolist() == ["tools_hnsw"] * 2 and hnsw["used_index"].all()
    assert hnsw["recall_mean"].iloc[1] >= 0.95
    assert hnsw["recall_mean"].iloc[1] >= hnsw["recall_mean"].iloc[0]
    with pytest.raises(ValidationError) as missing:
        benchmark_table_recall(url, table="agent_tools", index="nope")
    assert missing.value.field == "index"
    with pytest.raises(ValidationError) as column:
        benchmark_table_recall(url, table="agent_tools", column="name")
    assert column.value.field == "column"


def test_a_database_that_is_not_seafs_is_said_so(empty_database_url: str) -> None:
    """Not the store's own hints (init-db, HTM_DBURL): the source is another system's."""
    from htm_analytics import SchemaError

    with pytest.raises(SchemaError, match="is it seaf's database") as raised:
        seaf_tool_stats(empty_database_url)
    assert "init-db" not in str(raised.value)


def test_hostile_tools_and_executions_never_stop_an_import(
        server_url: str, ltm: LongTermMemory, db: psycopg.Connection) -> None:
    """Tools with and without a vector are imported together; a tool without a name is
    rejected (naming ``name``) and recorded; an execution at a time past the store's years
    is a recall at the import's time, its record keeping the time."""
    rng = np.random.default_rng(2)
    with temporary_database(server_url, "seaf_hostile", template=None) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(DDL)
            register_vector(conn)
            for i, (name, vector) in enumerate([("with_vector", unit_vectors(rng, 1, 1536)[0]),
                                                ("without_vector", None), ("", None),
                                                ("   ", unit_vectors(rng, 1, 1536)[0])]):
                conn.execute("INSERT INTO agent_tools (id, name, embedding, file_path, "
                             "test_path, created_at) VALUES (%s, %s, %s, 'f', 't', %s)",
                             (str(i), name, vector, T0))
            for tool, when in (("with_vector", T0), ("without_vector", "9999-01-01"),
                               ("", T0)):
                conn.execute("INSERT INTO tool_executions (session_id, tool_name, "
                             "execution_order, success, timestamp) VALUES ('s', %s, 1, true, "
                             "%s)", (tool, when))
        summary = import_seaf(url, ltm, chunk_rows=3)
        fingerprint = store_fingerprint(db)
        again = import_seaf(url, ltm, chunk_rows=3).to_frame().set_index("table")
        assert again.loc["(total)", "imported"] == 0 and store_fingerprint(db) == fingerprint
    tools, executions = summary.tables["agent_tools"], summary.tables["tool_executions"]
    assert (tools.imported, tools.rejected) == (2, 2)
    assert set(tools.reasons) == {"name: must not be empty or whitespace"}
    assert (executions.imported, executions.rejected) == (2, 1)
    records = {r[0]: r[1] for r in db.execute(
        "SELECT source_key, record FROM import_records WHERE source_table = 'agent_tools'")}
    assert records["∅"]["name"] == "" and "_rejected" in records["∅"]
    assert len(records["   "]["embedding"]) == 1536  # a vector no node took is kept
    late = db.execute("SELECT e.occurred_at, ir.record->>'timestamp' FROM import_records ir "
                      "JOIN memory_events e ON e.id = ir.event_id "
                      "WHERE ir.record->>'tool_name' = 'without_vector'").fetchone()
    assert late[0] > dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    assert late[1].startswith("9999-01-01")


def test_a_database_with_seafs_table_names_but_not_its_columns_is_refused(
        server_url: str) -> None:
    from htm_analytics.peers import check_seaf_source

    with temporary_database(server_url, "seaf_other", template=None) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE agent_tools (x int); CREATE TABLE tool_executions "
                         "(id int, session_id text, tool_name text, timestamp timestamptz)")
        with pytest.raises(ValidationError, match="agent_tools table has no") as raised:
            check_seaf_source(url)
    assert raised.value.field == "source"
