"""What the analytics tests share: the memory's tables read without the toolkit."""

from __future__ import annotations

import pandas as pd
import psycopg


def raw_tables(url: str) -> dict[str, pd.DataFrame]:
    """The memory tables read with plain psycopg: the independent side of every check."""
    queries = {
        "robots": "SELECT id AS robot_id, name AS robot FROM robots",
        "nodes": "SELECT id AS node_id, created_at FROM nodes",
        "robot_nodes": "SELECT robot_id, node_id, remember_count, first_remembered_at, "
                       "last_remembered_at FROM robot_nodes",
        "node_tags": "SELECT nt.node_id, t.name AS tag FROM node_tags nt "
                     "JOIN tags t ON t.id = nt.tag_id",
        "tags": "SELECT name AS tag FROM tags",
        "events": "SELECT id, occurred_at, robot_id, node_id FROM memory_events "
                  "WHERE kind = 'remember'",
    }
    with psycopg.connect(url) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return {name: pd.DataFrame(conn.execute(q).fetchall(),
                                   columns=[c.name for c in conn.execute(q).description or []])
                for name, q in queries.items()}
