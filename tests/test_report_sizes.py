"""The report at the sizes users have: empty, a single vector, a thousand robots."""

from __future__ import annotations

import psycopg

import htm_analytics as ha
from htm_analytics import LongTermMemory
from htm_analytics.report.build import MIN_SWEEP_VECTORS, TOP_ROBOTS, TOP_TREND_ROBOTS


def test_report_on_an_empty_database(ltm: LongTermMemory) -> None:
    report = ha.build_report(ltm)
    assert "0 memories held by 0 robots" in report.to_html()
    assert [s.key for s in report.sections] == ["advice", "hygiene", "overview", "robots",
                                                "trends", "tags", "indexes"]


def test_report_with_one_vector_says_why_there_is_no_sweep(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("solo")
    ltm.add(content="the only memory", robot_id=robot, embedding=[0.1, 0.2, 0.3],
            tags=["a:b"])
    report = ha.build_report(ltm, sweep_queries=200)
    hnsw = {s.key: s for s in report.sections}["hnsw"]
    assert "1 stored vector of" in hnsw.text and str(MIN_SWEEP_VECTORS) in hnsw.text
    assert "1 memory held by 1 robot " in report.to_html()


def test_report_on_a_thousand_robots_and_five_thousand_tags(
        ltm: LongTermMemory, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO robots (name) SELECT 'robot-' || lpad(g::text, 4, '0') "
                     "FROM generate_series(1, 1000) g")
        conn.execute("INSERT INTO tags (name) SELECT 'topic-' || (g % 40) || ':sub-' || g "
                     "FROM generate_series(1, 5000) g")
        conn.execute("INSERT INTO nodes (content, content_hash) "
                     "SELECT 'memory ' || g, md5(g::text) FROM generate_series(1, 5000) g")
        # robot k remembers node g when g % 1000 = k - 1 (five each), robot 1 also node
        # 1..1000: robot 1 holds the most memories.
        conn.execute("INSERT INTO robot_nodes (robot_id, node_id, remember_count) "
                     "SELECT 1 + (g % 1000), g, 1 + g % 3 FROM generate_series(1, 5000) g")
        conn.execute("INSERT INTO robot_nodes (robot_id, node_id) SELECT 1, g "
                     "FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING")
        conn.execute("INSERT INTO node_tags (node_id, tag_id) "
                     "SELECT g, 1 + (g % 5000) FROM generate_series(1, 5000) g")
        pairs = conn.execute("SELECT count(*) FROM robot_nodes").fetchone()[0]
    report = ha.build_report(ltm, benchmark=False)
    robots = {s.key: s for s in report.sections}["robots"]
    # Bounded by TOP_ROBOTS, not by the thousand robots: and the report says so.
    assert len(robots.data["activity"]) == TOP_ROBOTS
    assert len(robots.data["overlap"]) == TOP_ROBOTS ** 2
    assert robots.data["activity"]["robot"].iloc[0] == "robot-0001"
    assert f"the {TOP_ROBOTS} robots holding the most memories, of 1,000" in robots.text
    trends = {s.key: s for s in report.sections}["trends"]
    assert trends.data["trends_by_robot"]["robot"].nunique() == TOP_TREND_ROBOTS
    assert trends.data["trends"]["remembers"].sum() == conn_sum(database_url)
    assert f"{pairs:,} robot-memory pairs" in report.to_html()


def conn_sum(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT sum(remember_count) FROM robot_nodes").fetchone()[0])
