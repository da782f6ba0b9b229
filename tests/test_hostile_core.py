"""Hostile input at the core of the store (tags, forgetting, bulk loads, options of
number and flag) and at the plots of the tag, trend and robot analyses.

The rule checked: a call either does what its docstring says or raises ``ValidationError``
naming the argument, before any write; no builtin exception and no warning escapes (the
suite runs with ``filterwarnings = error``). The databases are real.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import matplotlib.axes
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import psycopg
import pytest
from fixtures_db import temporary_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htm_analytics import LongTermMemory, ValidationError
from htm_analytics.analysis import (
    index_usage_delta,
    plot_index_usage,
    plot_popular_tags,
    plot_remember_count_distribution,
    plot_remember_trends,
    plot_robot_activity,
    plot_robot_overlap,
    plot_tag_cooccurrence,
    plot_tag_graph,
    plot_tag_hierarchy,
    popular_tags,
    remember_count_distribution,
    remember_trends,
    robot_activity,
    robot_overlap,
    tag_cooccurrence,
    tag_graph,
    tag_graph_view,
    tag_hierarchy,
)
from htm_analytics.validation import validate_number

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
TABLES = ("nodes", "robots", "robot_nodes", "tags", "node_tags")
START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)

# Values a user may pass for a yes-or-no option that are not one: truthy and falsy alike.
not_a_flag = st.one_of(
    st.sampled_from(["no", "yes", "False", "", 0, 1, 0.0, None, np.int64(0), [], [False]]),
    st.integers(), st.text(max_size=5), st.floats(allow_nan=True))


def row_counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
                for t in TABLES}


@pytest.fixture(scope="module")
def core_url(server_url: str) -> Iterator[str]:
    """Four robots sharing tagged memories over a few weeks."""
    with temporary_database(server_url, "htm_hostile_core") as url:
        with LongTermMemory(url) as store:
            contents = [f"memory {i} about {'postgres' if i % 2 else 'python'}"
                        for i in range(24)]
            names = ["alpha", "beta", "gamma", "délta"]
            store.bulk_add(  # the last eight: content another robot remembered first
                contents + contents[:8],
                robots=[names[i % 4] for i in range(24)] + [names[(i + 1) % 4]
                                                            for i in range(8)],
                tags=[[["db:postgresql", "perf"], ["lang:python"], ["db:vacuum"]][i % 3]
                      for i in range(32)],
                remembered_at=[START + dt.timedelta(days=i % 20) for i in range(32)])
        yield url


@pytest.fixture(scope="module")
def core(core_url: str) -> Iterator[LongTermMemory]:
    with LongTermMemory(core_url) as store:
        yield store


# -- numbers ----------------------------------------------------------------------------------

@FAST
@given(value=st.one_of(st.integers(), st.integers(min_value=2**1024, max_value=10**400),
                       st.integers(min_value=-(10**400), max_value=-(2**1024))))
def test_a_float_option_takes_any_int_or_refuses_it_by_name(value: int) -> None:
    try:
        number = validate_number(value, field="ratio")
    except ValidationError as exc:
        assert exc.field == "ratio"
        with pytest.raises(OverflowError):  # only ints past float's range
            float(value)
    else:
        assert number == float(value)


@pytest.mark.parametrize("call", [
    lambda url, _: LongTermMemory(url, cache_ttl=10**400),
    lambda _, store: store.search_fuzzy(query="postgres", threshold=10**400),
    lambda _, store: tag_graph(store, resolution=-(10**400)),
], ids=["cache_ttl", "threshold", "resolution"])
def test_integers_past_float_range_are_refused(core_url: str, core: LongTermMemory,
                                               call: Callable[[str, LongTermMemory], Any]
                                               ) -> None:
    with pytest.raises(ValidationError) as raised:
        call(core_url, core)
    assert raised.value.field in ("cache_ttl", "threshold", "resolution")


# -- flags ------------------------------------------------------------------------------------

@FAST
@given(value=not_a_flag)
def test_add_tag_refuses_a_non_boolean_ancestors_before_writing(core_url: str,
                                                                core: LongTermMemory,
                                                                value: Any) -> None:
    node = core.node_ids_by_content(["memory 0 about python"])[0]
    assert node is not None
    before = row_counts(core_url)
    with pytest.raises(ValidationError) as raised:
        core.add_tag(node_id=node, tag="hostile:flag:tag", ancestors=value)
    assert raised.value.field == "ancestors"
    assert row_counts(core_url) == before


@pytest.mark.parametrize("option", ["tag_ancestors_too", "defer_indexes"])
def test_bulk_add_refuses_non_boolean_flags_before_writing(core_url: str,
                                                           core: LongTermMemory,
                                                           option: str) -> None:
    before = row_counts(core_url)
    # defer_indexes="no" used to drop the search indexes (an exclusive lock) for a load.
    with pytest.raises(ValidationError) as raised:
        core.bulk_add(["a flagged load"], robots="alpha", tags=[["x:y"]], **{option: "no"})
    assert raised.value.field == option
    assert row_counts(core_url) == before


@pytest.mark.parametrize("call, field", [
    (lambda s: s.search_by_tags(tags=["db", "perf"], match_all="no"), "match_all"),
    (lambda s: s.nodes_by_topic("db", exact="no"), "exact"),
    (lambda s: s.search_fuzzy(query="postgres", exhaustive="no"), "exhaustive"),
    (lambda s: remember_trends(s, fill_gaps="no"), "fill_gaps"),
    (lambda s: s.forget(1, permanent="no"), "permanent"),
], ids=["match_all", "exact", "exhaustive", "fill_gaps", "permanent"])
def test_reads_refuse_non_boolean_flags(core: LongTermMemory,
                                        call: Callable[[LongTermMemory], Any],
                                        field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        call(core)
    assert raised.value.field == field


def test_numpy_booleans_are_flags_everywhere(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("numpy")
    node = ltm.add(content="forget me with numpy", robot_id=robot)["node_id"]
    assert ltm.add_tag(node_id=node, tag="a:b", ancestors=np.bool_(False)) == ["a:b"]
    assert ltm.search_fuzzy(query="forget me", exhaustive=np.bool_(True))
    assert ltm.exists(node, forgotten=np.bool_(False))
    assert ltm.forget(node, permanent=np.bool_(True), confirm="confirmed")
    assert not ltm.exists(node)


# -- times --------------------------------------------------------------------------------------

@FAST
@given(nanoseconds=st.integers(min_value=1, max_value=999),
       start=st.datetimes(min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2200, 1, 1)))
def test_timestamps_with_nanoseconds_are_taken_to_the_microsecond(
        core: LongTermMemory, nanoseconds: int, start: dt.datetime) -> None:
    # pandas warned "Discarding nonzero nanoseconds" on every such bound: an error here.
    begin = pd.Timestamp(start, tz="UTC") + pd.Timedelta(nanoseconds, unit="ns")
    end = begin + pd.Timedelta(days=30)
    found = core.search_fulltext(query="memory postgres", timeframe=(begin, end))
    assert all(begin.floor("us") <= row["created_at"] <= end for row in found)
    assert popular_tags(core, timeframe=(begin, end)).attrs["tagged_nodes"] >= 0


def test_bulk_add_keeps_a_nanosecond_time_to_the_microsecond(ltm: LongTermMemory) -> None:
    when = pd.Timestamp("2026-03-04 05:06:07.123456789", tz="UTC")
    node = int(ltm.bulk_add(["remembered at a nanosecond"], robots="clock",
                            remembered_at=[when])["node_id"].iloc[0])
    assert ltm.retrieve(node)["created_at"] == when.floor("us").to_pydatetime()  # type: ignore[index]


# -- the confirmation of a permanent forget -----------------------------------------------------

@pytest.mark.parametrize("confirm", [
    np.array(["confirmed", "confirmed"]), pd.Series(["confirmed", "confirmed"]),
    np.array(["confirmed"]), b"confirmed", ["confirmed"]])
def test_a_confirmation_that_is_not_the_word_is_refused(database_url: str,
                                                        ltm: LongTermMemory,
                                                        confirm: Any) -> None:
    node = ltm.add(content="keep me", robot_id=ltm.register_robot("keeper"))["node_id"]
    before = row_counts(database_url)
    with pytest.raises(ValidationError) as raised:
        ltm.forget(node, permanent=True, confirm=confirm)
    assert raised.value.field == "confirm"
    assert row_counts(database_url) == before


# -- plots ------------------------------------------------------------------------------------

def _empty_results(store: LongTermMemory) -> list[tuple[Callable[..., Any], pd.DataFrame]]:
    return [
        (plot_popular_tags, popular_tags(store, freq="W")),
        (plot_popular_tags, popular_tags(store)),
        (plot_remember_trends, remember_trends(store)),
        (plot_remember_trends, remember_trends(store, by="robot")),
        (plot_remember_trends, remember_trends(store, by="tag")),
        (plot_remember_count_distribution, remember_count_distribution(store)),
        (plot_remember_count_distribution, remember_count_distribution(store, by="robot")),
        (plot_robot_overlap, robot_overlap(store)),
        (plot_robot_overlap, robot_overlap(store, top=3)),
        (plot_robot_activity, robot_activity(store)),
        (plot_tag_cooccurrence, tag_cooccurrence(store)),
        (plot_tag_hierarchy, tag_hierarchy(store)),
    ]


def test_plots_of_an_empty_memory_draw_without_warnings(ltm: LongTermMemory) -> None:
    for plot, frame in _empty_results(ltm):
        assert frame.empty
        assert isinstance(plot(frame), matplotlib.axes.Axes), plot.__name__
        plt.close("all")


def test_plots_of_a_scope_with_nothing_draw_without_warnings(core: LongTermMemory) -> None:
    empty = {"robots": "nobody"}
    for frame, plot in [(robot_overlap(core, **empty), plot_robot_overlap),
                        (remember_trends(core, by="robot", **empty), plot_remember_trends),
                        (popular_tags(core, freq="D", **empty), plot_popular_tags),
                        (remember_count_distribution(core, by="robot", **empty),
                         plot_remember_count_distribution)]:
        assert isinstance(plot(frame), matplotlib.axes.Axes)
        plt.close("all")


def _frames(store: LongTermMemory) -> dict[str, Any]:
    return {"cooccurrence": tag_cooccurrence(store, min_shared=1),
            "hierarchy": tag_hierarchy(store), "graph": tag_graph(store, min_shared=1),
            "trends": remember_trends(store), "by_robot": remember_trends(store, by="robot"),
            "overlap": robot_overlap(store), "popular": popular_tags(store)}


PLOT_OPTIONS = [
    ("cooccurrence", plot_tag_cooccurrence, "measure", ["topic1", "bogus", None, 5]),
    ("cooccurrence", plot_tag_cooccurrence, "top", [0, -1, True, "5", 2.5]),
    ("hierarchy", plot_tag_hierarchy, "children", [-1, True, "2", 1.5]),
    ("hierarchy", plot_tag_hierarchy, "top", [0, "x", 2.5]),
    ("hierarchy", plot_tag_hierarchy, "value", ["tag", "bogus", None]),
    ("graph", plot_tag_graph, "max_nodes", [0, "x", 1.5]),
    ("graph", plot_tag_graph, "labels", [-1, "x", 1.5]),
    ("graph", plot_tag_graph, "edges_per_tag", [0, "x", 1.5]),
    ("graph", plot_tag_graph, "seed", [-1, 2**32, "x", 1.5, None]),
    ("graph", tag_graph_view, "max_nodes", ["x", 1.5]),
    ("trends", plot_remember_trends, "y", ["period", "bogus", 5]),
    ("by_robot", plot_remember_trends, "y", ["robot", "bogus"]),
    ("overlap", plot_robot_overlap, "value", ["robot1", "bogus", None]),
    ("overlap", plot_robot_overlap, "annotate", ["no", 0, None]),
    ("popular", plot_popular_tags, "ax", [5, "ax", plt]),
    ("trends", plot_remember_trends, "ax", [5, object()]),
]


@pytest.mark.parametrize("frame_name, plot, option, values", PLOT_OPTIONS,
                         ids=[f"{p.__name__}-{o}" for _, p, o, _ in PLOT_OPTIONS])
def test_plot_options_are_refused_by_their_name(core: LongTermMemory, frame_name: str,
                                                plot: Callable[..., Any], option: str,
                                                values: list[Any]) -> None:
    frame = _frames(core)[frame_name]
    assert isinstance(plot(frame), (matplotlib.axes.Axes, type(frame)))  # defaults draw
    for value in values:
        with pytest.raises(ValidationError) as raised:
            plot(frame, **{option: value})
        assert raised.value.field == option, value
    plt.close("all")


def test_plot_options_that_fit_still_draw(core: LongTermMemory) -> None:
    frames = _frames(core)
    _, given_ax = plt.subplots()
    assert plot_tag_cooccurrence(frames["cooccurrence"], measure="lift", top=np.int64(3),
                                 ax=given_ax) is given_ax
    assert plot_tag_hierarchy(frames["hierarchy"], children=0, top=1, value="direct_nodes")
    assert plot_tag_graph(frames["graph"], labels=0, seed=2**32 - 1, max_nodes=2)
    assert plot_remember_trends(frames["by_robot"], y="remembers")
    assert plot_robot_overlap(frames["overlap"], value="shared_nodes", annotate=np.bool_(False))
    plt.close("all")


def test_robot_overlap_plot_refuses_a_pair_given_twice(core: LongTermMemory) -> None:
    frame = robot_overlap(core)
    with pytest.raises(ValidationError) as raised:
        plot_robot_overlap(pd.concat([frame, frame.head(1)]))
    assert raised.value.field == "df"


def test_tag_graph_plot_of_tags_without_memories_does_not_divide_by_zero() -> None:
    import networkx as nx

    graph = nx.Graph(weight="jaccard")
    graph.add_edge("a", "b", weight=0.5)
    nx.set_node_attributes(graph, 0, "nodes")  # a graph edited by hand: sizes of 0
    assert isinstance(plot_tag_graph(graph), matplotlib.axes.Axes)


def test_tag_graph_plot_of_mixed_node_names_draws() -> None:
    """Names of several types (a graph built by hand) raised TypeError while sorting ties."""
    import networkx as nx

    graph = nx.Graph(weight="jaccard")
    graph.add_edge(1, "b", weight=0.5)
    graph.add_edge(2.5, "c", weight=0.5)
    graph.add_edge("b", "c", weight=0.5)
    nx.set_node_attributes(graph, 3, "nodes")
    nx.set_node_attributes(graph, {1: 0, "b": 1, 2.5: "x", "c": 0}, "community")
    ax = plot_tag_graph(graph)
    assert sorted(text.get_text() for text in ax.texts) == ["1", "2.5", "b", "c"]
    plt.close(ax.figure)


def test_index_usage_plot_refuses_an_axes_that_is_not_one() -> None:
    frame = pd.DataFrame({"table": ["nodes"], "index": ["nodes_pkey"], "idx_scan": [3]})
    with pytest.raises(ValidationError) as raised:
        plot_index_usage(frame, ax="left")
    assert raised.value.field == "ax"


# -- index usage readings -------------------------------------------------------------------

counter = st.one_of(st.integers(min_value=0, max_value=2**62), st.integers(-3, -1),
                    st.floats(allow_nan=True), st.none(), st.sampled_from(["7", b"7"]))
readings = st.lists(st.tuples(st.sampled_from(["idx_a", "idx_b", "idx_c"]), counter),
                    max_size=4)


def _reading(rows: list[tuple[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame({"table": ["nodes"] * len(rows), "index": [r[0] for r in rows],
                         "idx_scan": [r[1] for r in rows], "idx_tup_read": [0] * len(rows),
                         "idx_tup_fetch": [0] * len(rows)})


@FAST
@given(before=readings, after=readings)
def test_index_usage_delta_takes_counts_or_refuses_the_reading(
        before: list[tuple[str, Any]], after: list[tuple[str, Any]]) -> None:
    # NaN counters raised pandas' IntCastingNaNError, text a TypeError, and an index read
    # twice came back twice.
    try:
        delta = index_usage_delta(_reading(before), _reading(after))
    except ValidationError as exc:
        assert exc.field in ("before", "after")
        return
    old, new = dict(before), dict(after)
    assert len(old) == len(before) and len(new) == len(after)  # one reading per index
    assert delta["idx_scan"].dtype == "int64"
    expected = {i: new[i] - old[i] if new[i] >= old[i] else new[i] for i in new if i in old}
    assert dict(zip(delta["index"], delta["idx_scan"])) == expected


@FAST
@given(name=st.sampled_from(["alpha", "neighbours", "context", "speaker_boost",
                             "date_boost"]),
       value=st.one_of(st.floats(min_value=0, max_value=1e6),
                       st.floats(min_value=1e6, exclude_min=True, allow_nan=False),
                       st.integers(min_value=0, max_value=10**400)))
def test_a_fusion_weight_is_used_or_refused_by_name(core: LongTermMemory, name: str,
                                                    value: float) -> None:
    """Every weight of the default fusion up to a million scores; a larger one (1e308
    overflowed float8 on the server, a DatabaseError) is refused naming it."""
    try:
        rows = core.search_vector_bm25(query="memory about postgres", embedding=[1.0, 0.5, 0.25],
                                       limit=5, **{name: value})
    except ValidationError as exc:
        assert exc.field == name and value > 1e6
    else:
        assert value <= 1e6 and rows and all(np.isfinite(row["score"]) for row in rows)


def test_numpy_numbers_are_numbers_to_memory_growth(core: LongTermMemory) -> None:
    """As every other option takes them: numpy's integers and floats from a computation."""
    from htm_analytics.analysis import memory_growth

    plain = memory_growth(core, horizon=3, freq="W", confidence=0.9)
    numpy = memory_growth(core, horizon=np.int64(3), freq="W", confidence=np.float32(0.9))
    pd.testing.assert_frame_equal(plain, numpy, rtol=1e-6)
    for arguments, field in (({"horizon": np.float64(3.0)}, "horizon"),
                             ({"confidence": np.float64(1.0)}, "confidence"),
                             ({"horizon": np.int64(121)}, "horizon")):
        with pytest.raises(ValidationError) as caught:
            memory_growth(core, **arguments)
        assert caught.value.field == field


def test_table_statistics_are_typed_alike_before_any_vacuum(server_url: str,
                                                            core: LongTermMemory) -> None:
    """A fresh database, never vacuumed nor analysed, types its dates as one that was."""
    with temporary_database(server_url, "htm_fresh_statistics") as url, \
            LongTermMemory(url) as fresh:
        fresh_types = fresh.table_statistics().dtypes
    used = core.table_statistics()
    assert fresh_types.to_dict() == used.dtypes.to_dict()
    assert str(fresh_types["last_autovacuum"]) == "datetime64[us, UTC]"


def test_npmi_of_a_perfect_pair_is_one_not_past_it(server_url: str) -> None:
    """Two tags always together have an NPMI of exactly 1 (the demo's admin:login and
    x11:display-manager, 2 of 1,327 memories, showed 1.0000000000000002), and perfect pairs
    tie: the pair on more memories first, then by name."""
    with temporary_database(server_url, "htm_perfect_pair") as url, LongTermMemory(url) as ltm:
        ltm.bulk_add([f"memory {i}" for i in range(1327)], robots="alpha",
                     tags=[["admin:login", "x11:display-manager", "zz:a", "zz:b"] if i < 2
                           else ["big:a", "big:b"] if i < 12 else ["other"]
                           for i in range(1327)])
        pairs = tag_cooccurrence(ltm, min_shared=2, sort_by="npmi")
    assert pairs["npmi"].between(-1, 1).all()
    perfect = pairs[pairs["shared_nodes"] == pairs["nodes1"]]
    assert (perfect["npmi"] == 1.0).all() and len(perfect) >= 7
    order = list(zip(-perfect["shared_nodes"], perfect["topic1"], perfect["topic2"]))
    assert order == sorted(order) and perfect["topic1"].iloc[0] == "big:a"
