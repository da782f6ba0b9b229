"""The tag statements number topics in tree order and count without grouping per node: on
names chosen to trip that (``a-b`` sorts between ``a`` and ``a:b`` by code point, ``ab``
after both; ancestors attached to some memories and not to others), every count equals the
straightforward computation in pandas, live and from a DuckDB snapshot."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg
import pytest

import htm_analytics as ha
import htm_analytics.frames
from htm_analytics import LongTermMemory, Snapshot, export_snapshot

NAMES = ["a", "a:b", "a:b:c", "a:b:c:d", "a:bc", "a-b", "a-b:c", "ab", "ab:a", "b", "b:a",
         "b:a:b", "z-0", "z-0:a"]


def planted(store: LongTermMemory) -> None:
    """120 memories, each with a seeded handful of those tags, ancestors attached to half."""
    rng = np.random.default_rng(17)
    robot = store.register_robot("r")
    for i in range(120):
        node = store.add(content=f"memory {i}", robot_id=robot)["node_id"]
        attach = bool(i % 2)
        for tag in rng.choice(NAMES, size=int(rng.integers(1, 6)), replace=False):
            store.add_tag(node_id=node, tag=str(tag), ancestors=attach)


def node_tags(url: str) -> pd.DataFrame:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT nt.node_id, t.name FROM node_tags nt "
                            "JOIN tags t ON t.id = nt.tag_id").fetchall()
    return pd.DataFrame(rows, columns=["node_id", "tag"])


def rolled(frame: pd.DataFrame, level: int | None) -> pd.DataFrame:
    if level is None:
        return frame.drop_duplicates()
    topics = frame["tag"].str.split(":").str[:level].str.join(":")
    return frame.assign(tag=topics).drop_duplicates()


def expected_pairs(frame: pd.DataFrame, min_shared: int) -> dict[tuple[str, str], int]:
    pairs = frame.merge(frame, on="node_id")
    pairs = pairs[pairs["tag_x"] < pairs["tag_y"]]
    related = [b.startswith(a + ":") or a.startswith(b + ":")
               for a, b in zip(pairs["tag_x"], pairs["tag_y"])]
    counts = pairs[~np.array(related, dtype=bool)].groupby(["tag_x", "tag_y"]).size()
    return {k: int(v) for k, v in counts.items() if v >= min_shared}


def expected_hierarchy(frame: pd.DataFrame) -> pd.DataFrame:
    closure = {(n, ":".join(t.split(":")[:d])) for n, t in zip(frame["node_id"], frame["tag"])
               for d in range(1, t.count(":") + 2)}
    own = set(zip(frame["node_id"], frame["tag"]))
    below = {(n, ":".join(t.split(":")[:d])) for n, t in own for d in range(1, t.count(":") + 1)}
    topics = sorted({t for _, t in closure})
    return pd.DataFrame({
        "tag": topics,
        "tagged_nodes": [sum(1 for n, t in own if t == topic) for topic in topics],
        "direct_nodes": [sum(1 for n, t in own if t == topic and (n, t) not in below)
                         for topic in topics],
        "cumulative_nodes": [sum(1 for n, t in closure if t == topic) for topic in topics],
    }).set_index("tag")


@pytest.mark.parametrize(("engine", "page_nodes"),
                         [("live", None), ("duckdb", None), ("live", 7), ("duckdb", 7)])
def test_tree_ordered_tag_statements_equal_pandas(ltm: LongTermMemory, database_url: str,
                                                  tmp_path: Path, engine: str,
                                                  page_nodes: int | None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # page_nodes 7: the co-occurrence reads the 120 memories' tag links in 18 pages
    if page_nodes is not None:
        monkeypatch.setattr(htm_analytics.frames, "NODE_PAGE", page_nodes)
    planted(ltm)
    raw = node_tags(database_url)
    assert raw["tag"].nunique() > len(NAMES) - 2  # most names in use, some ancestors implied
    if engine == "duckdb":
        source: object = Snapshot(export_snapshot(ltm, tmp_path / "memory.duckdb"))
    else:
        source = ltm
    try:
        for level in (None, 1, 2, 3):
            frame = rolled(raw, level)
            found = ha.tag_cooccurrence(source, level=level, min_shared=1)
            assert {(a, b): int(n) for a, b, n in zip(
                found["topic1"], found["topic2"], found["shared_nodes"])} == \
                expected_pairs(frame, 1), level
            sizes = frame.groupby("tag").size()
            assert (found["nodes1"].to_numpy() == sizes[found["topic1"]].to_numpy()).all()
            assert (found["total_nodes"] == frame["node_id"].nunique()).all()
            popular = ha.popular_tags(source, limit=None, level=level).set_index("tag")
            assert popular["nodes"].to_dict() == sizes.to_dict()
            graph = ha.tag_graph(source, level=level, min_shared=1)
            assert {n: d["nodes"] for n, d in graph.nodes(data=True)} == sizes.to_dict()
        hierarchy = ha.tag_hierarchy(source).set_index("tag")
        expected = expected_hierarchy(raw)
        columns = ["tagged_nodes", "direct_nodes", "cumulative_nodes"]
        pd.testing.assert_frame_equal(hierarchy.loc[expected.index, columns], expected[columns],
                                      check_dtype=False, check_names=False,
                                      check_index_type=False)
        assert set(hierarchy.index) == set(expected.index)
        sub = ha.tag_hierarchy(source, prefix="a:b").set_index("tag")
        assert set(sub.index) == {t for t in expected.index if t == "a:b"
                                  or t.startswith("a:b:")}
        pd.testing.assert_frame_equal(sub[columns], expected.loc[sub.index, columns],
                                      check_dtype=False, check_names=False,
                                      check_index_type=False)
    finally:
        if isinstance(source, Snapshot):
            source.close()


@pytest.mark.parametrize("engine", ["live", "duckdb"])
def test_scoped_cooccurrence_equals_pandas_across_pages(ltm: LongTermMemory, database_url: str,
                                                        tmp_path: Path, engine: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Pages of 7 node ids; the scope (a robot, a timeframe) is applied within each page.
    monkeypatch.setattr(htm_analytics.frames, "NODE_PAGE", 7)
    planted(ltm)
    other = ltm.register_robot("s")
    with psycopg.connect(database_url) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM nodes ORDER BY id").fetchall()]
        conn.execute("UPDATE nodes SET created_at = timestamptz '2026-01-01 00:00+00' "
                     "+ (id - %s) * interval '1 day'", (ids[0],))
        conn.execute("INSERT INTO robot_nodes (robot_id, node_id) SELECT %s, id FROM nodes "
                     "WHERE id %% 3 = 0", (other,))
    raw = node_tags(database_url)
    start = dt.datetime(2026, 1, 20, tzinfo=dt.UTC)
    end = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    in_time = {i for n, i in enumerate(ids) if start <= dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
               + dt.timedelta(days=n) <= end}
    source: object = Snapshot(export_snapshot(ltm, tmp_path / "memory.duckdb")) \
        if engine == "duckdb" else ltm
    try:
        for scope, kept in [({"robots": "s"}, {i for i in ids if i % 3 == 0}),
                            ({"timeframe": (start, end)}, in_time),
                            ({"robots": ["s"], "timeframe": (start, end), "prefix": "a"},
                             {i for i in in_time if i % 3 == 0})]:
            frame = raw[raw["node_id"].isin(kept)]
            if "prefix" in scope:
                frame = frame[(frame["tag"] == "a") | frame["tag"].str.startswith("a:")]
            found = ha.tag_cooccurrence(source, min_shared=1, **scope)
            assert {(a, b): int(n) for a, b, n in zip(
                found["topic1"], found["topic2"], found["shared_nodes"])} == \
                expected_pairs(frame, 1), scope
            assert (found["total_nodes"] == frame["node_id"].nunique()).all()
            assert len(found) >= 3
    finally:
        if isinstance(source, Snapshot):
            source.close()
