"""``bulk_add`` and the hand-written loader ``bench_scale.py`` times it against
(``benchmarks/scale_anchors.py``) leave the same memory: the comparison is of equal work,
and two independent writers agree on every table ``bulk_add`` fills."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from fixtures_db import temporary_database

from htm_analytics import LongTermMemory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from scale_anchors import MODEL, htm_tables_anchor

# Each table by what identifies a row across two databases (names and hashes, not ids).
_TABLES = {
    "nodes": """SELECT content_hash, content, token_count, embedding::text,
                       embedding_dimension, created_at, updated_at, last_accessed
                FROM nodes ORDER BY content_hash""",
    "robots": "SELECT name, created_at, last_active FROM robots ORDER BY name",
    "tags": "SELECT name FROM tags ORDER BY name",
    "robot_nodes": """SELECT r.name, n.content_hash, rn.first_remembered_at,
                             rn.last_remembered_at, rn.remember_count, rn.created_at,
                             rn.updated_at
                      FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
                      JOIN nodes n ON n.id = rn.node_id ORDER BY 1, 2""",
    "node_tags": """SELECT t.name, n.content_hash, nt.created_at
                    FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                    JOIN nodes n ON n.id = nt.node_id ORDER BY 1, 2""",
    "memory_events": """SELECT e.occurred_at, e.kind, r.name, n.content_hash
                        FROM memory_events e JOIN robots r ON r.id = e.robot_id
                        JOIN nodes n ON n.id = e.node_id ORDER BY 1, 3, 4""",
    "node_search_vectors": """SELECT n.content_hash, v.content_tsv::text
                              FROM node_search_vectors v JOIN nodes n ON n.id = v.node_id
                              ORDER BY 1""",
    "node_lexicon": "SELECT * FROM node_lexicon ORDER BY 1",
    "node_embedding_models": """SELECT n.content_hash, m.provider, m.model, m.dimension
                                FROM node_embedding_models m JOIN nodes n ON n.id = m.node_id
                                ORDER BY 1""",
    "indexes": """SELECT indexname, regexp_replace(indexdef, '^.* USING ', '')
                  FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1""",
}


def _memory(rows: int = 400, seed: int = 3) -> dict[str, Any]:
    """Remembers out of time order, with equal times, repeated contents (by the same and by
    other robots, with other tags) and hierarchical tags."""
    rng = np.random.default_rng(seed)
    distinct = [f"memory {i}: {' '.join(rng.choice(['disk', 'queue', 'cache', 'lock'], 4))}"
                for i in range(rows // 2)]
    contents = [distinct[i] for i in rng.integers(0, len(distinct), rows)]
    vectors = {text: rng.normal(size=8).astype(np.float32) for text in distinct}
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return {
        "contents": contents,
        "vectors": np.stack([vectors[text] / np.linalg.norm(vectors[text])
                             for text in contents]),
        "robots": [f"robot-{r}" for r in rng.integers(0, 7, rows)],
        "tags": [[f"area:{a}:part-{b}", f"team-{b}"] if a else []
                 for a, b in rng.integers(0, 4, (rows, 2))],
        "remembered_at": [start + dt.timedelta(hours=int(h))
                          for h in rng.integers(0, rows // 4, rows)],
    }


def _state(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {table: conn.execute(query).fetchall() for table, query in _TABLES.items()}


def test_hand_written_loader_leaves_what_bulk_add_leaves(database_url: str,
                                                         server_url: str) -> None:
    memory = _memory()
    with LongTermMemory(database_url) as store:
        store.bulk_add(memory["contents"], robots=memory["robots"],
                       embeddings=memory["vectors"], tags=memory["tags"],
                       remembered_at=memory["remembered_at"], embedding_model=MODEL,
                       defer_indexes=True)
    timed: dict[str, dict[str, float]] = {}

    def measure(name: str, function: Any, results: dict[str, Any], cpu: Any) -> None:
        function()
        results[name] = {}

    with temporary_database(server_url, "htm_test") as anchor_url:
        htm_tables_anchor(anchor_url, memory, timed, measure)
        anchor = _state(anchor_url)
    loaded = _state(database_url)
    assert len(timed) == 6  # every step ran, the commit included
    assert len(loaded["nodes"]) == len(set(memory["contents"]))
    assert sum(r[4] for r in loaded["robot_nodes"]) == len(memory["contents"])
    assert any(":" in r[0] for r in loaded["tags"]) and loaded["node_lexicon"]
    for table in _TABLES:
        assert anchor[table] == loaded[table], table
