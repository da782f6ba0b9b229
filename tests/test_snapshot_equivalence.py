"""Every analysis helper that accepts a snapshot answers from it as from the live store: the
same frame (values, dtypes, row order, documented attrs), on memories that stress where
PostgreSQL and DuckDB differ: Unicode and case in names (collations), deep tags, infinite
and extreme timestamps, DST changes and other time zones, ties, empty and one-row memories,
robots without memories, the current gem's soft deletes and local times, filters."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg
import pytest
from fixtures_db import temporary_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal
from psycopg import sql

import htm_analytics as ha
from htm_analytics import LongTermMemory, Snapshot, export_snapshot
from htm_analytics.store import with_database
from tests.test_existing_databases import as_role, roles  # noqa: F401 (a fixture)

UTC = dt.UTC
# Names PostgreSQL's collations and DuckDB's binary order sort differently.
NAMES = ["a", "A", "b", "B", "é", "É", "e\u0301", "z", "Z", "ß", "ss", "İ", "i", "ı",
         "日本", "a b", "a-b", "_x", "Ω", "ω"]
SEGMENTS = ["a", "A", "b", "é", "É", "z", "ß", "日", "a-b", "a b", "x1"]
# Times in PostgreSQL's text form: infinities, the calendar's ends that Python holds, DST
# changes (Chicago, Paris), other offsets, ties.
TIMES = ["infinity", "-infinity", "0001-01-01 00:00:00+00", "0001-01-01 12:00:00+00",
         "0001-01-02 00:00:00+00", "9999-12-31 23:59:58.999999+00", "9999-12-31 12:00:00+00",
         "9999-12-25 00:00:00+00", "2024-03-10 01:59:59-06", "2024-03-10 03:00:00-05",
         "2024-03-31 01:59:59+01", "2024-03-31 03:00:00+02", "2024-11-03 01:30:00-05",
         "2024-11-03 01:30:00-06", "2024-12-31 23:30:00-05", "2025-01-01 00:00:00+14",
         "2024-06-30 12:00:00+00", "2024-06-30 12:00:00+00", "2024-07-01 00:00:00+00"]
TRUNCATE = ("TRUNCATE robots, nodes, tags, node_tags, robot_nodes, memory_events "
            "RESTART IDENTITY CASCADE")


@dataclass
class Memory:
    """What a memory holds, written with plain SQL (as any writer might)."""

    robots: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)  # created_at of each
    links: list[tuple[int, int, int, str, str]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    node_tags: list[tuple[int, int]] = field(default_factory=list)
    logged: bool = True  # the event log sees the remembers


def write(url: str, memory: Memory) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(TRUNCATE)
        if not memory.logged:
            conn.execute("SET htm_analytics.events_written = 'on'")
        robots = [conn.execute("INSERT INTO robots (name, created_at, last_active) "
                               "VALUES (%s, '2024-01-01', %s) RETURNING id",
                               (name, TIMES[i % len(TIMES)])).fetchone()[0]
                  for i, name in enumerate(memory.robots)]
        nodes = []
        for i, created in enumerate(memory.nodes):
            vector = [0.0] * 2000
            vector[:2] = [1.0, float(i)]
            nodes.append(conn.execute(
                "INSERT INTO nodes (content, content_hash, created_at, embedding, "
                "embedding_dimension) VALUES (%s, %s, %s, %s::vector, 2) RETURNING id",
                (f"memory {i}", f"h{i}", created, str(vector))).fetchone()[0])
        for robot, node, count, first, last in memory.links:
            conn.execute("INSERT INTO robot_nodes (robot_id, node_id, remember_count, "
                         "first_remembered_at, last_remembered_at) VALUES (%s, %s, %s, %s, %s)"
                         " ON CONFLICT DO NOTHING",
                         (robots[robot], nodes[node], count, first, last))
        tags = [conn.execute("INSERT INTO tags (name) VALUES (%s) RETURNING id",
                             (name,)).fetchone()[0] for name in memory.tags]
        for node, tag in memory.node_tags:
            conn.execute("INSERT INTO node_tags (node_id, tag_id) VALUES (%s, %s) "
                         "ON CONFLICT DO NOTHING", (nodes[node], tags[tag]))


@st.composite
def memories(draw: Any) -> Memory:
    robots = draw(st.lists(st.sampled_from(NAMES), max_size=4))
    nodes = draw(st.lists(st.sampled_from(TIMES), max_size=5))
    links = []
    if robots and nodes:
        links = draw(st.lists(st.tuples(
            st.integers(0, len(robots) - 1), st.integers(0, len(nodes) - 1),
            st.integers(1, 3), st.sampled_from(TIMES), st.sampled_from(TIMES)), max_size=8))
    tag_names = draw(st.lists(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=5)
                              .map(":".join), unique=True, max_size=6))
    node_tags = []
    if tag_names and nodes:
        node_tags = draw(st.lists(st.tuples(st.integers(0, len(nodes) - 1),
                                            st.integers(0, len(tag_names) - 1)), max_size=10))
    return Memory(robots, nodes, links, tag_names, node_tags, draw(st.booleans()))


def _cases(robots: list[str]) -> list[tuple[Callable[..., Any], dict[str, Any]]]:
    some = sorted(set(robots))[:2] or ["a"]
    frame = (dt.datetime(2024, 3, 10, tzinfo=UTC), dt.datetime(2025, 1, 1, tzinfo=UTC))
    paris = dt.timezone(dt.timedelta(hours=2))
    zoned = (dt.datetime(2024, 3, 31, 3, tzinfo=paris), dt.datetime(9999, 12, 31, tzinfo=UTC))
    return [
        (ha.tag_cooccurrence, {"min_shared": 1}),
        (ha.tag_cooccurrence, {"min_shared": 1, "level": 1, "robots": some}),
        (ha.tag_cooccurrence, {"min_shared": 1, "prefix": "a", "timeframe": frame}),
        (ha.tag_hierarchy, {}),
        (ha.tag_hierarchy, {"prefix": "a", "robots": some}),
        (ha.tag_hierarchy, {"timeframe": zoned}),
        (ha.popular_tags, {"limit": None}),
        (ha.popular_tags, {"limit": 2, "level": 2, "timeframe": frame}),
        (ha.popular_tags, {"limit": None, "freq": "D"}),
        (ha.popular_tags, {"limit": None, "freq": "W", "prefix": "a", "robots": some}),
        # Gaps filled only by year: the calendar's ends are 10,000 years apart.
        (ha.remember_trends, {"freq": "Y"}),
        (ha.remember_trends, {"freq": "D", "fill_gaps": False}),
        (ha.remember_trends, {"freq": "h", "fill_gaps": False}),
        (ha.remember_trends, {"freq": "W", "by": "robot", "fill_gaps": False}),
        (ha.remember_trends, {"freq": "M", "by": "tag", "level": 1, "fill_gaps": False}),
        (ha.remember_trends, {"freq": "Y", "by": "robot", "timeframe": zoned}),
        (ha.remember_count_distribution, {}),
        (ha.remember_count_distribution, {"by": "robot", "robots": some}),
        (ha.most_reinforced, {"limit": 3}),
        (ha.most_reinforced, {"timeframe": frame}),
        (ha.robot_overlap, {}),
        (ha.robot_overlap, {"top": 2}),
        (ha.robot_overlap, {"min_shared": 1, "timeframe": zoned}),
        (ha.robot_activity, {}),
        (ha.robot_activity, {"robots": some, "timeframe": frame}),
    ]


def assert_same(live: Any, offline: Any, label: str) -> None:
    assert_frame_equal(offline, live, check_exact=True, obj=label)
    assert offline.attrs == live.attrs, label


def assert_helpers_agree(store: LongTermMemory, snapshot: Snapshot,
                         robots: list[str]) -> None:
    for helper, options in _cases(robots):
        label = f"{helper.__name__}({options})"
        assert_same(helper(store, **options), helper(snapshot, **options), label)
    graphs = [ha.tag_graph(source, min_shared=1) for source in (store, snapshot)]
    assert sorted(graphs[0].nodes(data=True)) == sorted(graphs[1].nodes(data=True))
    assert sorted(graphs[0].edges(data=True)) == sorted(graphs[1].edges(data=True))


@pytest.fixture(scope="module")
def memory_url(server_url: str) -> Iterator[str]:
    with temporary_database(server_url, "htm_snapshot_twins") as url:
        yield url


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(memory=memories())
def test_the_snapshot_answers_as_the_live_store(memory_url: str, tmp_path: Path,
                                                memory: Memory) -> None:
    write(memory_url, memory)
    with LongTermMemory(memory_url, cache_size=0, pool_size=1) as store:
        path = export_snapshot(store, tmp_path / "twin.duckdb", overwrite=True)
        with Snapshot(path) as snapshot:
            assert_helpers_agree(store, snapshot, memory.robots)


def _twin(store: LongTermMemory, tmp_path: Path, name: str = "twin.duckdb") -> Snapshot:
    return Snapshot(export_snapshot(store, tmp_path / name, overwrite=True))


@pytest.fixture(scope="module")
def icu_url(server_url: str) -> Iterator[str]:
    """A memory database whose text sorts as English does ('a' < 'B' < 'é'), not by code
    point as DuckDB's and the test template's."""
    from htm_analytics.store import apply_migrations, drop_database

    name = f"htm_snapshot_icu_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        try:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 LOCALE_PROVIDER icu "
                                 "ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'").format(
                sql.Identifier(name)))
        except psycopg.Error as exc:
            pytest.skip(f"the test server has no ICU collation: {exc}")
    url = with_database(server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        apply_migrations(conn)
    yield url
    drop_database(server_url, name)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(NAMES), min_size=2, max_size=5, unique=True))
def test_robot_pairs_are_ordered_by_code_point_under_any_collation(
        icu_url: str, tmp_path: Path, names: list[str]) -> None:
    # Every robot remembers one shared node and one of its own: ties everywhere.
    memory = Memory(robots=names, nodes=["2024-06-30 12:00:00+00"] * (len(names) + 1),
                    links=[(r, n, 1, TIMES[0], TIMES[0]) for r in range(len(names))
                           for n in (0, r + 1)])
    write(icu_url, memory)
    with LongTermMemory(icu_url, cache_size=0, pool_size=1) as store, \
            _twin(store, tmp_path) as snapshot:
        for options in ({"top": 2}, {"min_shared": 1}, {}):
            live = ha.robot_overlap(store, **options)
            assert_same(live, ha.robot_overlap(snapshot, **options), str(options))
            if options:
                assert (live["robot1"].map(str.encode) < live["robot2"].map(str.encode)).all()
        assert_helpers_agree(store, snapshot, names)


def test_robots_sharing_a_name_are_one_robot_of_the_overlap(memory_url: str,
                                                            tmp_path: Path) -> None:
    # Names are not unique in robots: the overlap, keyed by name, raised pandas' ValueError.
    write(memory_url, Memory(robots=["a", "a", "b"], nodes=[TIMES[16]] * 2,
                             links=[(0, 0, 1, TIMES[16], TIMES[16]),
                                    (1, 0, 2, TIMES[16], TIMES[16]),
                                    (1, 1, 1, TIMES[16], TIMES[16]),
                                    (2, 0, 1, TIMES[16], TIMES[16])]))
    with LongTermMemory(memory_url, cache_size=0, pool_size=1) as store, \
            _twin(store, tmp_path) as snapshot:
        for source in (store, snapshot):
            full = ha.robot_overlap(source).set_index(["robot1", "robot2"])
            assert full["shared_nodes"].to_dict() == {("a", "a"): 2, ("a", "b"): 1,
                                                      ("b", "a"): 1, ("b", "b"): 1}
        assert_helpers_agree(store, snapshot, ["a", "b"])
        activity = ha.robot_activity(store)
        assert activity["robot_id"].tolist() == [2, 1, 3]  # most nodes, then name, then id


def test_a_remember_at_the_last_microsecond_is_not_infinity(memory_url: str,
                                                            tmp_path: Path) -> None:
    # The links travel packed, telling infinity from 9999-12-31 23:59:59.999999; the
    # snapshot's writer then made that finite time infinite too.
    last = "9999-12-31 23:59:59.999999+00"
    write(memory_url, Memory(robots=["a"], nodes=[TIMES[16]],
                             links=[(0, 0, 2, last, "infinity")], logged=False))
    with LongTermMemory(memory_url, cache_size=0, pool_size=1) as store, \
            _twin(store, tmp_path) as snapshot:
        live = ha.remember_trends(store, freq="Y")
        assert live["period"].tolist() == [pd.Timestamp("9999-01-01", tz="UTC")]
        assert live.attrs["untimed_remembers"] == 1
        assert_helpers_agree(store, snapshot, ["a"])


def test_a_snapshot_keeps_the_memory_as_it_was_when_written(memory_url: str,
                                                            tmp_path: Path) -> None:
    memory = Memory(robots=["a", "B"], nodes=[TIMES[16], TIMES[8]],
                    links=[(0, 0, 1, TIMES[8], TIMES[9]), (1, 0, 2, TIMES[9], TIMES[10])],
                    tags=["a:b", "a:B:c"], node_tags=[(0, 0), (0, 1), (1, 1)])
    write(memory_url, memory)
    with LongTermMemory(memory_url, cache_size=0, pool_size=1) as store:
        with _twin(store, tmp_path, "before.duckdb") as before:
            answers = {(h.__name__, str(o)): h(store, **o) for h, o in _cases(memory.robots)}
        robot = store.register_robot("later")
        store.add(content="written after the snapshot", robot_id=robot, tags=["a:b"])
        with psycopg.connect(memory_url, autocommit=True) as conn:
            conn.execute("UPDATE robot_nodes SET remember_count = remember_count + 5")
            conn.execute("DELETE FROM nodes WHERE content = 'memory 1'")
        with Snapshot(tmp_path / "before.duckdb") as before:
            for helper, options in _cases(memory.robots):
                then = answers[(helper.__name__, str(options))].drop(
                    columns=["partial"], errors="ignore")
                now = helper(before, **options).drop(columns=["partial"], errors="ignore")
                assert_same(then, now, f"{helper.__name__}({options})")


def test_a_gem_written_memory_and_its_snapshot_agree(
        server_url: str, roles: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    """The current gem's database: soft-deleted memories and links left out of both, and
    its local times (America/Chicago) read as the same instants by both."""
    from tests.test_gem_as_written import WRITER_ZONE, gem_written

    with gem_written(server_url, roles) as url:
        with psycopg.connect(url, autocommit=True) as conn:  # remembers across a DST change
            conn.execute("UPDATE robot_nodes SET first_remembered_at = "
                         "'2024-03-09 23:30:00'::timestamp + id * interval '1 day', "
                         "last_remembered_at = '2024-03-10 23:30:00'::timestamp")
        with LongTermMemory(as_role(url, roles["reader"]), writer_timezone=WRITER_ZONE,
                            cache_size=0, pool_size=1) as store, \
                _twin(store, tmp_path, "gem") as snapshot:
            assert_helpers_agree(store, snapshot, ["gem-a", "gem-b"])
            trends = ha.remember_trends(store, freq="D", fill_gaps=False)
            assert (trends["period"] == trends["period"].dt.normalize()).all()  # UTC days
