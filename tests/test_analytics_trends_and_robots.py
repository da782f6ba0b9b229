"""Trend and robot helpers, each checked against pandas over the raw rows, on a slice of the
real corpus with a simulated history (the tag helpers and snapshots: test_analytics.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg
import pytest
from analytics_helpers import raw_tables
from fixtures_db import END, temporary_database
from hypothesis import given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

import htm_analytics as ha
from htm_analytics import LongTermMemory, ValidationError
from htm_analytics.agent.datasets import read_corpus, remember_history
from htm_analytics.analysis.trends import _COUNTS, _every_period_and_group


@pytest.fixture(scope="module")
def store(memory_url: str) -> Iterator[LongTermMemory]:
    with LongTermMemory(memory_url, cache_size=0) as live:
        yield live


@pytest.fixture(scope="module")
def raw(memory_url: str) -> dict[str, pd.DataFrame]:
    """The memory tables read with plain psycopg: the independent side of every check."""
    return raw_tables(memory_url)


# -- remembering over time -----------------------------------------------------------------------

def _expected_events(raw: dict) -> pd.DataFrame:
    events = raw["events"].merge(raw["robots"], on="robot_id", how="left")
    events = events.sort_values(["occurred_at", "id"])
    events["node_rank"] = events.groupby("node_id").cumcount()
    events["robot_rank"] = events.groupby(["node_id", "robot_id"]).cumcount()
    return events


def test_remember_trends_match_the_event_log(store: LongTermMemory, raw: dict) -> None:
    result = ha.remember_trends(store, freq="W")
    events = _expected_events(raw)
    week = events["occurred_at"].dt.tz_convert(None).dt.to_period("W-SUN").dt.start_time
    grouped = events.assign(period=week.dt.tz_localize("UTC")).groupby("period")
    expected = pd.DataFrame({
        "remembers": grouped.size(),
        "new_memories": grouped["node_rank"].apply(lambda r: (r == 0).sum()),
        "repeated_remembers": grouped["robot_rank"].apply(lambda r: (r > 0).sum()),
        "active_robots": grouped["robot_id"].nunique(),
    })
    got = result.set_index("period")
    active = got[got["remembers"] > 0]
    assert len(active) == len(expected)
    for column in expected:
        assert active[column].tolist() == expected[column].tolist(), column
    assert (got["remembers"] == got["new_memories"] + got["shared_remembers"]
            + got["repeated_remembers"]).all()
    assert result.attrs["exact"] is True
    assert got["cumulative_memories"].iloc[-1] == len(raw["nodes"])
    assert got["cumulative_remembers"].iloc[-1] == raw["robot_nodes"]["remember_count"].sum()
    # Gaps are filled: consecutive weeks.
    assert (result["period"].diff().dropna() == pd.Timedelta(days=7)).all()


def test_remember_trends_by_robot_and_tag(store: LongTermMemory, raw: dict) -> None:
    by_robot = ha.remember_trends(store, freq="M", by="robot")
    totals = by_robot.groupby("robot")["remembers"].sum()
    robot_nodes = raw["robot_nodes"].merge(raw["robots"], on="robot_id")
    assert totals.to_dict() == robot_nodes.groupby("robot")["remember_count"].sum().to_dict()
    last = by_robot.groupby("robot").last()
    assert (last["cumulative_remembers"] == totals).all()

    by_tag = ha.remember_trends(store, freq="M", by="tag", level=1, robots=["coder"])
    events = _expected_events(raw)
    events = events[events["robot"] == "coder"]
    top = raw["node_tags"].assign(tag=raw["node_tags"]["tag"].str.split(":").str[0])
    expected = events.merge(top.drop_duplicates(), on="node_id").groupby("tag").size()
    assert by_tag.groupby("tag")["remembers"].sum().to_dict() == expected.to_dict()
    for option in ({"level": 1}, {"prefix": "database"}):  # they choose tags: no tags, refused
        for by in (None, "robot"):
            with pytest.raises(ha.ValidationError, match="only with by='tag'") as raised:
                ha.remember_trends(store, by=by, **option)
            assert raised.value.field in option


@pytest.mark.parametrize("by", [None, "robot", "tag"])
def test_remember_trends_of_nothing_have_every_column(store: LongTermMemory, by) -> None:
    nothing = ha.remember_trends(store, by=by, robots=["no such robot"])
    assert len(nothing) == 0
    assert {"cumulative_memories", "cumulative_remembers", "partial"} <= set(nothing.columns)


def test_remember_trends_timeframe_keeps_history(store: LongTermMemory, raw: dict) -> None:
    start = END - dt.timedelta(days=14)
    end = END + dt.timedelta(days=1)  # leaves out the live adds, made today
    result = ha.remember_trends(store, freq="D", timeframe=(start, end))
    events = _expected_events(raw)
    inside = events[events["occurred_at"].between(start, end)]
    assert result["remembers"].sum() == len(inside)
    # New means new to the memory, not new to the window.
    assert result["new_memories"].sum() == (inside["node_rank"] == 0).sum()


def test_remember_trends_fallback_without_event_log(server_url: str) -> None:
    frame, _ = read_corpus(rows=200, embeddings=False)
    with temporary_database(server_url, "htm_fallback") as url, LongTermMemory(url) as live:
        remember_history(live, frame, days=30, end=END, seed=1)
        exact = ha.remember_trends(live, freq="W")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM memory_events")  # a database older than the log
        approximate = ha.remember_trends(live, freq="W")
    assert exact.attrs["exact"] is True and approximate.attrs["exact"] is False
    for column in ("remembers", "new_memories", "shared_remembers", "repeated_remembers"):
        assert approximate[column].sum() == exact[column].sum(), column


@settings(max_examples=60, deadline=None)
@given(cells=st.dictionaries(
    st.tuples(st.integers(0, 9), st.sampled_from(["coder", "ops", "Ωmega", "a b", "#7"])),
    st.lists(st.integers(0, 50), min_size=len(_COUNTS), max_size=len(_COUNTS)),
    min_size=1))
def test_every_period_and_group_is_the_reindexed_frame(cells: dict) -> None:
    # The grid built as arrays equals the MultiIndex reindex with running sums per group.
    start = pd.Timestamp("2026-01-05", tz="UTC")
    frame = pd.DataFrame([{"period": start + pd.Timedelta(weeks=p), "robot": robot,
                           **dict(zip(_COUNTS, counts))}
                          for (p, robot), counts in cells.items()])
    periods = pd.date_range(frame["period"].min(), frame["period"].max(), freq="W-MON",
                            unit="us", name="period")
    frame["period"] = frame["period"].astype("datetime64[us, UTC]")
    full = pd.MultiIndex.from_product([periods, sorted(frame["robot"].unique())],
                                      names=["period", "robot"])
    expected = frame.set_index(["period", "robot"]).reindex(full, fill_value=0).reset_index()
    by_robot = expected.groupby("robot")
    expected["cumulative_memories"] = by_robot["new_memories"].cumsum()
    expected["cumulative_remembers"] = by_robot["remembers"].cumsum()
    got = _every_period_and_group(frame, "robot", periods)
    assert_frame_equal(got.astype({"robot": object}), expected, check_dtype=False)
    assert str(got["robot"].dtype) == "string"


def _trends_by_the_documented_rule(url: str) -> tuple[pd.DataFrame, int]:
    """Weekly trends computed in pandas from the tables, as remember_trends documents them:
    a pair's logged remembers where the log holds its remember_count of them, else its first
    at first_remembered_at and the rest at last_remembered_at."""
    with psycopg.connect(url) as conn:
        pairs = pd.DataFrame(conn.execute(
            "SELECT robot_id, node_id, remember_count, first_remembered_at, "
            "last_remembered_at FROM robot_nodes").fetchall(),
            columns=["robot_id", "node_id", "remember_count", "first", "last"])
        events = pd.DataFrame(conn.execute(
            "SELECT id, robot_id, node_id, occurred_at FROM memory_events "
            "WHERE kind = 'remember'").fetchall(),
            columns=["seq", "robot_id", "node_id", "occurred_at"])
    logged = events.groupby(["robot_id", "node_id"]).size().rename("logged")
    pairs = pairs.join(logged, on=["robot_id", "node_id"]).fillna({"logged": 0})
    agree = pairs["logged"] == pairs["remember_count"]
    others = pairs[~agree]
    rows = pd.concat([
        events.merge(pairs.loc[agree, ["robot_id", "node_id"]]).assign(weight=1),
        others.assign(occurred_at=others["first"], seq=0, weight=1),
        others[others["remember_count"] > 1].assign(
            occurred_at=lambda f: f["last"], seq=1, weight=lambda f: f["remember_count"] - 1),
    ])[["occurred_at", "seq", "robot_id", "node_id", "weight"]]
    rows = rows.sort_values(["occurred_at", "seq", "robot_id"])
    rows["node_rank"] = rows.groupby("node_id").cumcount()
    rows["robot_rank"] = rows.groupby(["node_id", "robot_id"]).cumcount()
    week = rows["occurred_at"].dt.tz_convert("UTC").dt.tz_convert(None).dt.to_period("W-SUN")
    grouped = rows.assign(period=week.dt.start_time.dt.tz_localize("UTC")).groupby("period")
    expected = pd.DataFrame({
        "remembers": grouped["weight"].sum(),
        "new_memories": grouped["node_rank"].apply(lambda r: (r == 0).sum()),
        "shared_remembers": grouped.apply(
            lambda g: ((g["robot_rank"] == 0) & (g["node_rank"] > 0)).sum(),
            include_groups=False),
        "repeated_remembers": grouped.apply(
            lambda g: g.loc[g["robot_rank"] > 0, "weight"].sum(), include_groups=False),
        "active_robots": grouped["robot_id"].nunique(),
    })
    return expected, int((pairs["remember_count"] - pairs["logged"]).sum())


def test_remember_trends_mix_logged_and_approximated_pairs(server_url: str) -> None:
    frame, _ = read_corpus(rows=200, embeddings=False)
    with temporary_database(server_url, "htm_mixed") as url, LongTermMemory(url) as live:
        remember_history(live, frame, days=30, end=END, seed=2)
        with psycopg.connect(url, autocommit=True) as conn:
            reinforced = [row[0] for row in conn.execute(
                "SELECT min(id) FROM memory_events WHERE kind = 'remember' "
                "GROUP BY robot_id, node_id HAVING count(*) >= 3 ORDER BY 1 LIMIT 4")]
            assert len(reinforced) == 4
            # Pairs whose log lost one remember (the log holds some, not all), one whose
            # log lost all of them, and one whose first remember is stored after its last.
            assert conn.execute(
                "UPDATE robot_nodes rn SET first_remembered_at = "
                "rn.last_remembered_at + interval '3 days' FROM memory_events e "
                "WHERE rn.robot_id = e.robot_id AND rn.node_id = e.node_id "
                "AND e.id = %s", (reinforced[0],)).rowcount == 1
            conn.execute("DELETE FROM memory_events WHERE id = ANY(%s)", (reinforced[:3],))
            assert conn.execute(
                "DELETE FROM memory_events e USING memory_events f WHERE f.id = %s "
                "AND e.robot_id = f.robot_id AND e.node_id = f.node_id",
                (reinforced[3],)).rowcount >= 3
        result = ha.remember_trends(live, freq="W")
        expected, missing = _trends_by_the_documented_rule(url)
    assert result.attrs["exact"] is False
    assert result.attrs["missing_remembers"] == missing > 3
    got = result.set_index("period")
    got = got[got["remembers"] > 0]
    for column in expected:
        assert got[column].tolist() == expected[column].tolist(), column


def test_remember_count_distribution_matches_pandas(store: LongTermMemory, raw: dict) -> None:
    robot_nodes = raw["robot_nodes"].merge(raw["robots"], on="robot_id")
    per_node = robot_nodes.groupby("node_id")["remember_count"].sum().value_counts().sort_index()
    result = ha.remember_count_distribution(store)
    assert dict(zip(result["remember_count"], result["memories"])) == per_node.to_dict()
    assert result["cumulative_share"].iloc[-1] == pytest.approx(1.0)

    by_robot = ha.remember_count_distribution(store, by="robot")
    expected = robot_nodes.groupby(["robot", "remember_count"]).size()
    got = by_robot.set_index(["robot", "remember_count"])["memories"]
    assert got.to_dict() == expected.to_dict()
    assert by_robot.groupby("robot")["share"].sum().round(9).eq(1.0).all()


def test_most_reinforced(store: LongTermMemory, raw: dict) -> None:
    totals = raw["robot_nodes"].groupby("node_id")["remember_count"].agg(["sum", "size"])
    expected = totals.reset_index().sort_values(["sum", "node_id"], ascending=[False, True])
    result = ha.most_reinforced(store, limit=10)
    assert result["node_id"].tolist() == expected["node_id"].head(10).tolist()
    assert result["remembers"].tolist() == expected["sum"].head(10).tolist()
    assert result["robots"].tolist() == expected["size"].head(10).tolist()


def test_most_reinforced_for_some_robots(store: LongTermMemory, raw: dict) -> None:
    # The robots filter counts only their remembers.
    chosen = raw["robots"].loc[raw["robots"]["robot"].isin(["coder", "ops"]), "robot_id"]
    rows = raw["robot_nodes"][raw["robot_nodes"]["robot_id"].isin(chosen)]
    totals = rows.groupby("node_id")["remember_count"].agg(["sum", "size"]).reset_index()
    expected = totals.sort_values(["sum", "node_id"], ascending=[False, True]).head(8)
    result = ha.most_reinforced(store, robots=["coder", "ops"], limit=8)
    assert result["node_id"].tolist() == expected["node_id"].tolist()
    assert result["remembers"].tolist() == expected["sum"].tolist()
    assert result["robots"].tolist() == expected["size"].tolist()


# -- robots -----------------------------------------------------------------------------------

def test_robot_overlap_matches_pandas(store: LongTermMemory, raw: dict) -> None:
    membership = raw["robot_nodes"].merge(raw["robots"], on="robot_id")[["robot", "node_id"]]
    result = ha.robot_overlap(store)
    robots = sorted(membership["robot"].unique())
    assert len(result) == len(robots) ** 2
    sets = membership.groupby("robot")["node_id"].apply(set)
    for row in result.itertuples():
        a, b = sets[row.robot1], sets[row.robot2]
        assert row.shared_nodes == len(a & b)
        assert row.jaccard == pytest.approx(len(a & b) / len(a | b))
    assert (result.loc[result["robot1"] == result["robot2"], "jaccard"] == 1.0).all()
    matrix = result.pivot(index="robot1", columns="robot2", values="shared_nodes")
    assert (matrix.to_numpy() == matrix.to_numpy().T).all()


def test_robot_overlap_bounded_in_the_database(store: LongTermMemory) -> None:
    full = ha.robot_overlap(store)
    distinct = full[(full["robot1"] < full["robot2"]) & (full["shared_nodes"] > 0)]
    expected = distinct.sort_values(["shared_nodes", "robot1", "robot2"],
                                    ascending=[False, True, True]).reset_index(drop=True)
    shared = ha.robot_overlap(store, min_shared=1)
    pd.testing.assert_frame_equal(shared, expected)
    top = ha.robot_overlap(store, top=3, min_shared=int(expected["shared_nodes"].iloc[-1]))
    pd.testing.assert_frame_equal(top, expected.head(3))
    floor = int(expected["shared_nodes"].iloc[1])
    assert (ha.robot_overlap(store, min_shared=floor)["shared_nodes"] >= floor).all()
    with pytest.raises(ValidationError, match="top"):
        ha.robot_overlap(store, top=0)


def test_robot_activity_matches_pandas(store: LongTermMemory, raw: dict) -> None:
    robot_nodes = raw["robot_nodes"].merge(raw["robots"], on="robot_id")
    holders = robot_nodes.groupby("node_id")["robot_id"].transform("size")
    robot_nodes = robot_nodes.assign(shared=holders > 1)
    expected = robot_nodes.groupby("robot").agg(nodes=("node_id", "size"),
                                                remembers=("remember_count", "sum"),
                                                shared_nodes=("shared", "sum"))
    result = ha.robot_activity(store).set_index("robot")
    for column in expected:
        assert result[column].to_dict() == expected[column].to_dict(), column
    np.testing.assert_allclose(result["shared_fraction"],
                               result["shared_nodes"] / result["nodes"])
    assert result["nodes"].is_monotonic_decreasing



def _scoped_robot_nodes(raw: dict, scope: dict) -> pd.DataFrame:
    """robot_nodes rows of the nodes in ``scope`` (created within the timeframe, remembered by
    one of the robots), with robot names: what every robot helper counts."""
    robot_nodes = raw["robot_nodes"].merge(raw["robots"], on="robot_id")
    nodes = raw["nodes"]
    if "timeframe" in scope:
        start, end = scope["timeframe"]
        nodes = nodes[(nodes["created_at"] >= start) & (nodes["created_at"] <= end)]
    if "robots" in scope:
        held = robot_nodes.loc[robot_nodes["robot"].isin(scope["robots"]), "node_id"]
        nodes = nodes[nodes["node_id"].isin(held)]
    return robot_nodes[robot_nodes["node_id"].isin(nodes["node_id"])]


ROBOT_SCOPES = [{"timeframe": (END - dt.timedelta(days=45), END - dt.timedelta(days=5))},
                {"robots": ["coder", "ops"]},
                {"timeframe": (END - dt.timedelta(days=90), END), "robots": ["scout", "coder"]}]


@pytest.mark.parametrize("scope", ROBOT_SCOPES, ids=["timeframe", "robots", "both"])
def test_robot_helpers_count_only_the_scope(store: LongTermMemory, raw: dict,
                                            scope: dict) -> None:
    # Without a scope the node test folds away at planning; with one it must still apply.
    rows = _scoped_robot_nodes(raw, scope)
    assert 0 < rows["node_id"].nunique() < raw["nodes"]["node_id"].nunique()
    chosen = rows[rows["robot"].isin(scope.get("robots", rows["robot"]))]

    per_node = chosen.groupby("node_id")["remember_count"].sum()
    result = ha.remember_count_distribution(store, **scope)
    assert dict(zip(result["remember_count"], result["memories"])) == \
        per_node.value_counts().to_dict()

    totals = chosen.groupby("node_id")["remember_count"].agg(["sum", "size"]).reset_index()
    expected = totals.sort_values(["sum", "node_id"], ascending=[False, True]).head(7)
    reinforced = ha.most_reinforced(store, limit=7, **scope)
    assert reinforced["node_id"].tolist() == expected["node_id"].tolist()
    assert reinforced["remembers"].tolist() == expected["sum"].tolist()

    holders = rows.groupby("node_id")["robot_id"].transform("size")
    activity = rows.assign(shared=holders > 1).groupby("robot").agg(
        nodes=("node_id", "size"), shared_nodes=("shared", "sum"))
    got = ha.robot_activity(store, **scope).set_index("robot")
    got = got[got["nodes"] > 0]
    expected_activity = activity.loc[activity.index.isin(scope.get("robots", activity.index))]
    for column in ("nodes", "shared_nodes"):
        assert got[column].to_dict() == expected_activity[column].to_dict(), column

    sets = chosen.groupby("robot")["node_id"].apply(set)
    overlap = ha.robot_overlap(store, **scope)
    assert len(overlap) == len(sets) ** 2
    for row in overlap.itertuples():
        assert row.shared_nodes == len(sets[row.robot1] & sets[row.robot2])


def test_scoped_queries_write_the_scope_test_once() -> None:
    """Every analytics query is complete once its fragments are in (no marker left), and no
    query spells the scope test by hand: the `{in_scope:...}` marker writes it, so a new
    scope parameter reaches all of them."""
    from htm_analytics.frames import load_analytics_query

    folder = Path(ha.__file__).parent / "sql" / "analytics"
    queries = sorted(p.stem for p in folder.glob("*.sql") if not p.stem.startswith("_"))
    marked = [name for name in queries if "{in_scope:" in (folder / f"{name}.sql").read_text()]
    assert len(marked) >= 7
    for name in queries:
        text = (folder / f"{name}.sql").read_text()
        assert "IN (SELECT id FROM scoped_nodes)" not in text, name
        assert "{" not in load_analytics_query(name), name


def test_a_fill_of_centuries_is_refused_before_it_is_built(server_url: str) -> None:
    """One remember dated year 2 (a writer's placeholder) beside this year's: every hour in
    between for two robots is 35 million rows, refused naming fill_gaps; coarser periods,
    or no filling, still answer. (Year 1's January is where -infinity reads: not used.)"""
    with temporary_database(server_url, "htm_centuries") as url, LongTermMemory(url) as store:
        store.bulk_add(["an old one", "a new one", "another"], robots=["a", "b", "a"],
                       remembered_at=[dt.datetime(2026, 1, 5, tzinfo=dt.UTC)] * 3)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE memory_events SET occurred_at = '0002-06-01 00:00+00' "
                         "WHERE node_id = (SELECT id FROM nodes WHERE content = 'an old one')")
            conn.execute("UPDATE robot_nodes SET first_remembered_at = '0002-06-01 00:00+00',"
                         " last_remembered_at = '0002-06-01 00:00+00' WHERE node_id = "
                         "(SELECT id FROM nodes WHERE content = 'an old one')")
        with pytest.raises(ValidationError) as caught:
            ha.remember_trends(store, freq="h", by="robot")
        assert caught.value.field == "fill_gaps" and "fill_gaps=False" in str(caught.value)
        sparse = ha.remember_trends(store, freq="h", by="robot", fill_gaps=False)
        assert sparse["remembers"].sum() == 3 and len(sparse) == 3
        yearly = ha.remember_trends(store, freq="Y", by="robot")
        assert len(yearly) == 2025 * 2 and yearly["remembers"].sum() == 3
