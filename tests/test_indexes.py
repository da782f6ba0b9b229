"""Index usage and table health, checked against the statistics views read independently."""

from __future__ import annotations

import time

import psycopg
from click.testing import CliRunner

from htm_analytics import (
    LongTermMemory,
    index_usage,
    index_usage_delta,
    plot_index_usage,
    table_health,
)
from htm_analytics.cli import cli


def test_index_usage_sees_a_workload(database_url: str, db: psycopg.Connection) -> None:
    with LongTermMemory(database_url, pool_size=1, cache_size=0) as ltm:
        robot = ltm.register_robot("r")
        for i in range(5):
            ltm.add(content=f"indexed database memory {i}", robot_id=robot)
        before = index_usage(ltm)
        for _ in range(3):
            ltm.search_fulltext(query="database")
            ltm.nodes_by_topic("database")
        after = index_usage(ltm)
        delta = index_usage_delta(before, after)
    assert list(after.columns) == ["table", "index", "method", "is_unique", "is_primary",
                                   "idx_scan", "idx_tup_read", "idx_tup_fetch",
                                   "last_idx_scan", "size_bytes", "definition", "never_used"]
    assert str(after["last_idx_scan"].dtype) == "datetime64[us, UTC]"
    scans = delta.set_index("index")["idx_scan"]
    # One bitmap scan per full-text search, on the stored vectors (not the seed's expression).
    assert scans["idx_node_search_vectors_content_tsv"] == 3
    assert (delta["idx_scan"] >= 0).all()
    # Independent reading of the same view (after the store's connection has flushed).
    db.execute("SELECT pg_stat_clear_snapshot()")
    independent = dict(db.execute(
        "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname = 'nodes'"
    ).fetchall())
    assert after.set_index("index")["idx_scan"].to_dict().items() >= independent.items()
    never = after[after["never_used"]]
    assert not (never["is_unique"] | never["is_primary"]).any()
    assert (never["idx_scan"] == 0).all()
    assert "idx_nodes_embedding" in set(never["index"])  # no vector search ran


def test_table_health_counts_rows(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    robot = ltm.register_robot("r")
    node = ltm.add(content="short lived", robot_id=robot)["node_id"]
    ltm.add(content="kept", robot_id=robot)
    ltm.delete(node)
    time.sleep(0.1)
    health = table_health(ltm).set_index("table")
    assert health.loc["nodes", "n_tup_ins"] == 2 and health.loc["nodes", "n_tup_del"] == 1
    assert health.loc["nodes", "n_live_tup"] == 1
    assert 0 <= health.loc["nodes", "dead_fraction"] <= 1
    assert set(health.index) == {"robots", "nodes", "robot_nodes", "tags", "node_tags",
                                 "memory_events", "node_search_vectors",
                                 "node_embedding_models", "import_records", "node_lexicon",
                                 "memory_query_vectors", "htm_analytics_migrations",
                                 "htm_analytics_cache_generation"}
    # The trigger wrote one search vector per node; the delete cascaded to it.
    assert health.loc["node_search_vectors", "n_tup_ins"] == 2
    assert health.loc["node_search_vectors", "n_live_tup"] == 1


def test_table_health_reports_hot_updates(ltm: LongTermMemory, db: psycopg.Connection) -> None:
    robot = ltm.register_robot("r")
    ids = [ltm.add(content=f"memory {i}", robot_id=robot)["node_id"] for i in range(4)]
    assert table_health(ltm).set_index("table")["hot_update_fraction"].isna()["nodes"]
    ltm.track_access(ids)  # changes indexed columns: a new entry in every index, never HOT
    db.execute("UPDATE nodes SET token_count = 7 WHERE id = %s", (ids[0],))  # unindexed: HOT
    db.execute("SELECT pg_stat_force_next_flush()")  # this connection's counters, now
    nodes = table_health(ltm).set_index("table").loc["nodes"]
    assert (nodes["n_tup_upd"], nodes["n_tup_hot_upd"]) == (5, 1)
    assert nodes["hot_update_fraction"] == 0.2


def test_plot_index_usage_marks_never_used(ltm: LongTermMemory) -> None:
    usage = index_usage(ltm)
    ax = plot_index_usage(usage)
    assert len(ax.patches) == len(usage)
    red = [p for p in ax.patches if p.get_facecolor()[:3] == (196 / 255, 78 / 255, 82 / 255)]
    assert len(red) == int(usage["never_used"].sum())
    assert ax.get_xlabel() == "index scans (log scale)"
    assert ax.get_xscale() == "symlog"  # one busy primary key must not flatten the others
    # Never-used indexes have no bar to see: a marker at 0 and a red name.
    never = usage["never_used"].tolist()
    assert len(ax.lines) == sum(never)
    assert [label.get_color() == "#c44e52" for label in ax.get_yticklabels()] == never


def test_cli_indexes_and_health(database_url: str) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", database_url, "indexes", "--never-used", "--csv"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()  # the database used is named on stderr
    assert lines[0].startswith("table,index,method") and len(lines) > 1
    health = runner.invoke(cli, ["--db", database_url, "health"])
    assert health.exit_code == 0 and "memory_events" in health.output


def test_index_usage_delta_counts_from_zero_after_a_reset(database_url: str,
                                                          db: psycopg.Connection) -> None:
    with LongTermMemory(database_url, pool_size=1, cache_size=0) as ltm:
        robot = ltm.register_robot("reset-bot")
        for i in range(5):
            ltm.add(content=f"reset counted memory {i}", robot_id=robot)
        for _ in range(4):
            ltm.search_fulltext(query="counted")
        before = index_usage(ltm)
        name = "idx_node_search_vectors_content_tsv"
        assert before.set_index("index").loc[name, "idx_scan"] >= 4
        db.execute("SELECT pg_stat_reset_single_table_counters(%s::regclass)", (name,))
        ltm.search_fulltext(query="counted")
        after = index_usage(ltm)
        delta = index_usage_delta(before, after).set_index("index")
    assert delta.loc[name, "counters_reset"]
    assert delta.loc[name, "idx_scan"] == after.set_index("index").loc[name, "idx_scan"] == 1
    assert not delta.drop(index=name)["counters_reset"].any()
    assert (delta[["idx_scan", "idx_tup_read", "idx_tup_fetch"]] >= 0).all().all()
