"""Shared checks of the peer-import tests: a fingerprint of everything the store holds,
and GhostKG sources built from its own DDL."""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
from pathlib import Path

import psycopg
from hypothesis import strategies as st

from htm_analytics import LongTermMemory

STORE_TABLES = ("robots", "nodes", "robot_nodes", "tags", "node_tags", "memory_events",
                "node_embedding_models", "import_records")


def store_fingerprint(conn: psycopg.Connection) -> dict[str, tuple[int, str]]:
    """Rows and an md5 of every row's text, per store table: equal means nothing changed."""
    result = {}
    for table in STORE_TABLES:
        row = conn.execute(
            f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
            f"FROM {table} t").fetchone()
        result[table] = (row[0], row[1])
    return result


def writes_so_far(conn: psycopg.Connection, store: LongTermMemory) -> int:
    """Rows inserted, updated or deleted in the store's tables, from pg_stat_user_tables.

    ``store`` must run on one connection (``pool_size=1``): its counters are flushed first,
    since a backend otherwise reports them up to ten seconds late.
    """
    store.index_statistics()  # flushes the store's backend (pg_stat_force_next_flush)
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute("""SELECT sum(n_tup_ins + n_tup_upd + n_tup_del)::bigint
                          FROM pg_stat_user_tables WHERE relname = ANY(%s)""",
                       (list(STORE_TABLES),)).fetchone()
    return int(row[0] or 0)


def source_fingerprint(conn: psycopg.Connection, tables: list[str]) -> dict[str, str]:
    """md5 of every row of each source table: equal before and after means never written."""
    return {table: conn.execute(
        f"SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
        f" FROM {table} t").fetchone()[0] for table in tables}


def unit_vectors(rng, n: int, dimension: int):
    """``n`` random unit vectors (float32)."""
    import numpy as np

    vectors = rng.standard_normal((n, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


GHOSTKG_DDL = (Path(__file__).parent / "peer_schemas" / "ghostkg.sql").read_text()
GHOSTKG_START = dt.datetime(2025, 1, 1, 9, 0)
GHOSTKG_AGENTS = ["Alice", "Bob", "Carol"]
_ENTITIES = ["I", "climate change", "renewable energy", "carbon tax", "economy", "jobs", "UBI",
            "nuclear power", "Bob", "Alice", "public transport", "housing"]
_RELATIONS = ["supports", "opposes", "care_about", "affects", "discusses", "prioritize"]


def ghostkg_stamp(when: dt.datetime) -> str:
    """A time as GhostKG writes it (SQLite's CURRENT_TIMESTAMP layout)."""
    return when.strftime("%Y-%m-%d %H:%M:%S")


def build_ghostkg(path: Path, *, seed: int = 3) -> dict:
    """A small GhostKG memory: three agents debating, with FSRS state and logs."""
    rng = random.Random(seed)
    conn = sqlite3.connect(path)
    conn.executescript(GHOSTKG_DDL)
    nodes, edges, logs = [], [], []
    for agent in GHOSTKG_AGENTS:
        for entity in _ENTITIES:
            reviewed = GHOSTKG_START + dt.timedelta(hours=rng.randint(0, 240))
            new = rng.random() < 0.15
            nodes.append((agent, entity, 0.0 if new else round(rng.uniform(0.3, 30), 3),
                          0.0 if new else round(rng.uniform(1, 10), 3),
                          None if new else ghostkg_stamp(reviewed), rng.randint(0, 6),
                          0 if new else rng.choice([1, 2]), ghostkg_stamp(GHOSTKG_START),
                          rng.randint(1, 10), rng.randint(0, 23)))
        for _ in range(40):
            source, target = rng.sample(_ENTITIES, 2)
            edges.append((agent, source, target, rng.choice(_RELATIONS), 1.0,
                          round(rng.uniform(-1, 1), 3),
                          ghostkg_stamp(GHOSTKG_START
                                        + dt.timedelta(minutes=rng.randint(0, 20_000))),
                          rng.randint(1, 10), rng.randint(0, 23)))
    # The same belief held by two agents: one memory, remembered by both.
    edges.append(("Alice", "I", "renewable energy", "supports", 1.0, 0.8,
                  ghostkg_stamp(GHOSTKG_START), 1, 9))
    edges.append(("Bob", "I", "renewable energy", "supports", 1.0, 0.5,
                  ghostkg_stamp(GHOSTKG_START + dt.timedelta(days=1)), 2, 9))
    unique_edges = {}
    for edge in edges:
        unique_edges[edge[:4]] = edge
    edges = list(unique_edges.values())
    for i in range(60):
        agent = GHOSTKG_AGENTS[i % 3]
        action = "READ" if i % 2 == 0 else "WRITE"
        entities = rng.sample(_ENTITIES[1:8], 2)
        annotations = ({"author": GHOSTKG_AGENTS[(i + 1) % 3], "triplets_count": 2, "mode": "FAST",
                        "entities": entities} if action == "READ"
                       else {"triplets_count": 1, "external": True,
                             "context_used": "MY CURRENT STANCE: ..."})
        content = f"{agent} {action.lower()}s about {entities[0]} and {entities[1]} (turn {i})"
        logs.append((agent, action, content, None, json.dumps(annotations),
                     ghostkg_stamp(GHOSTKG_START + dt.timedelta(minutes=5 * i)), 1 + i // 24,
                     i % 24))
    # Content not stored (only its UUID), and a log without an agent: kept, not remembered.
    logs.append(("Alice", "READ", None, "8c1f0d52-5b7e-4f0e-9d2a-1a2b3c4d5e6f", None,
                 ghostkg_stamp(GHOSTKG_START), 1, 0))
    logs.append((None, "WRITE", "orphan line", None, None, ghostkg_stamp(GHOSTKG_START), 1, 0))
    conn.executemany("INSERT INTO nodes VALUES (?,?,?,?,?,?,?,?,?,?)", nodes)
    conn.executemany("INSERT INTO edges VALUES (?,?,?,?,?,?,?,?,?)", edges)
    conn.executemany("INSERT INTO logs (agent_name, action_type, content, content_uuid, "
                     "annotations, timestamp, sim_day, sim_hour) VALUES (?,?,?,?,?,?,?,?)",
                     logs)
    conn.commit()
    conn.close()
    return {"nodes": nodes, "edges": edges, "logs": logs}


def ghostkg_logs(path: Path, logs: list[tuple]) -> None:
    """A GhostKG file (its own DDL) holding only ``logs``: (agent_name, content, timestamp)."""
    with sqlite3.connect(path) as conn:
        conn.executescript(GHOSTKG_DDL)
        conn.executemany("INSERT INTO logs (agent_name, action_type, content, timestamp) "
                         "VALUES (?, 'WRITE', ?, ?)", logs)
    conn.close()


# What a writer may put in a GhostKG log (SQLite keeps any type in any column): agents that
# are no names, times that are no times or outside what the store holds.
_AGENTS = st.one_of(st.none(), st.text(max_size=300), st.integers(-2**63, 2**63 - 1),
                    st.floats())
_TIMES = st.one_of(st.none(), st.text(max_size=30),
                   st.datetimes(min_value=dt.datetime(1, 1, 2)).map(
                       lambda when: when.isoformat(sep=" ")),
                   st.datetimes(timezones=st.timezones()).map(dt.datetime.isoformat))
HOSTILE_LOGS = st.lists(st.tuples(_AGENTS, st.text(max_size=50), _TIMES), min_size=1,
                        max_size=8)
