"""Tag helpers, each checked against pandas over the raw rows, on a slice of the real corpus
with a simulated history; the DuckDB snapshot against the live answers; bad options and the
plots. The trend and robot helpers: test_analytics_trends_and_robots.py."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from analytics_helpers import raw_tables
from fixtures_db import END
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

import htm_analytics as ha
from htm_analytics import LongTermMemory, Snapshot, ValidationError, export_snapshot


@pytest.fixture(scope="module")
def store(memory_url: str) -> Iterator[LongTermMemory]:
    with LongTermMemory(memory_url, cache_size=0) as live:
        yield live


@pytest.fixture(scope="module")
def raw(memory_url: str) -> dict[str, pd.DataFrame]:
    """The memory tables read with plain psycopg: the independent side of every check."""
    return raw_tables(memory_url)


@pytest.fixture(scope="module", params=["duckdb", "parquet"])
def snapshot(request: pytest.FixtureRequest, store: LongTermMemory,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Snapshot]:
    folder = tmp_path_factory.mktemp("snapshot")
    path = folder / ("memory.duckdb" if request.param == "duckdb" else "memory")
    export_snapshot(store, path)
    with Snapshot(path) as snap:
        yield snap


def _expected_pairs(node_tags: pd.DataFrame, min_shared: int) -> pd.DataFrame:
    pairs = node_tags.merge(node_tags, on="node_id", suffixes=("1", "2"))
    pairs = pairs[pairs["tag1"] < pairs["tag2"]]
    ancestor = [b.startswith(a + ":") for a, b in zip(pairs["tag1"], pairs["tag2"])]
    pairs = pairs[~np.array(ancestor, dtype=bool)]
    shared = pairs.groupby(["tag1", "tag2"]).size().rename("shared_nodes").reset_index()
    return shared[shared["shared_nodes"] >= min_shared]


# -- tags --------------------------------------------------------------------------------------

def test_tag_cooccurrence_matches_pandas(store: LongTermMemory, raw: dict) -> None:
    result = ha.tag_cooccurrence(store, min_shared=3)
    node_tags = raw["node_tags"]
    expected = _expected_pairs(node_tags, 3)
    sizes = node_tags.groupby("tag").size()
    total = node_tags["node_id"].nunique()
    merged = result.merge(expected, left_on=["topic1", "topic2"], right_on=["tag1", "tag2"],
                          how="outer", suffixes=("", "_expected"), indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"].head()
    assert (merged["shared_nodes"] == merged["shared_nodes_expected"]).all()
    n1 = result["topic1"].map(sizes).to_numpy()
    n2 = result["topic2"].map(sizes).to_numpy()
    shared = result["shared_nodes"].to_numpy()
    np.testing.assert_array_equal(result["nodes1"], n1)
    np.testing.assert_allclose(result["jaccard"], shared / (n1 + n2 - shared))
    np.testing.assert_allclose(result["lift"], shared * total / (n1 * n2))
    np.testing.assert_allclose(result["pmi"], np.log(shared * total / (n1 * n2)))
    assert (result["total_nodes"] == total).all()
    assert result["npmi"].between(-1, 1).all()
    assert (result["topic1"] < result["topic2"]).all()
    assert result["shared_nodes"].is_monotonic_decreasing
    assert result.dtypes.to_dict() == {
        "topic1": "string", "topic2": "string", "shared_nodes": "int64", "nodes1": "int64",
        "nodes2": "int64", "total_nodes": "int64", "jaccard": "float64", "lift": "float64",
        "pmi": "float64", "npmi": "float64"}


def test_tag_cooccurrence_rolls_up_and_filters(store: LongTermMemory, raw: dict) -> None:
    node_tags = raw["node_tags"]
    top = node_tags.assign(tag=node_tags["tag"].str.split(":").str[0]).drop_duplicates()
    expected = _expected_pairs(top, 2)
    result = ha.tag_cooccurrence(store, level=1)
    assert len(result) == len(expected) > 10
    assert not result["topic1"].str.contains(":").any()

    devel = ha.tag_cooccurrence(store, prefix="devel", min_shared=1)
    assert len(devel) > 0
    for column in ("topic1", "topic2"):
        assert devel[column].str.startswith("devel:").all()

    by_jaccard = ha.tag_cooccurrence(store, sort_by="jaccard", limit=5)
    assert len(by_jaccard) == 5 and by_jaccard["jaccard"].is_monotonic_decreasing


def test_scope_filters_restrict_nodes(store: LongTermMemory, raw: dict) -> None:
    start, end = END - dt.timedelta(days=30), END
    nodes = raw["nodes"]
    recent = set(nodes.loc[(nodes["created_at"] >= start) & (nodes["created_at"] <= end),
                           "node_id"])
    popular = ha.popular_tags(store, limit=None, timeframe=(start, end))
    node_tags = raw["node_tags"]
    expected = node_tags[node_tags["node_id"].isin(recent)].groupby("tag").size()
    assert popular.set_index("tag")["nodes"].sort_index().to_dict() == expected.to_dict()

    robot_nodes = raw["robot_nodes"].merge(raw["robots"], on="robot_id")
    coder = set(robot_nodes.loc[robot_nodes["robot"] == "coder", "node_id"])
    popular = ha.popular_tags(store, limit=None, robots="coder")
    expected = node_tags[node_tags["node_id"].isin(coder)].groupby("tag").size()
    assert popular.set_index("tag")["nodes"].sort_index().to_dict() == expected.to_dict()


def test_popular_tags_overall_and_per_period(store: LongTermMemory, raw: dict) -> None:
    node_tags = raw["node_tags"]
    counts = node_tags.groupby("tag").size()
    result = ha.popular_tags(store, limit=10)
    expected = counts.reset_index(name="nodes").sort_values(["nodes", "tag"],
                                                            ascending=[False, True]).head(10)
    assert result["tag"].tolist() == expected["tag"].tolist()
    assert result["nodes"].tolist() == expected["nodes"].tolist()
    np.testing.assert_allclose(result["share"],
                               expected["nodes"] / node_tags["node_id"].nunique())

    monthly = ha.popular_tags(store, limit=3, freq="M")
    assert set(monthly["tag"]) == set(result["tag"].head(3))
    assert monthly.groupby("tag")["nodes"].sum().to_dict() == \
        result.head(3).set_index("tag")["nodes"].to_dict()
    assert (monthly["period"].dt.day == 1).all()


def test_tag_hierarchy_matches_pandas(store: LongTermMemory, raw: dict) -> None:
    result = ha.tag_hierarchy(store)
    node_tags = raw["node_tags"]
    assert set(result["tag"]) == set(raw["tags"]["tag"])  # tagging stores every ancestor
    tagged = node_tags.groupby("tag")["node_id"].nunique()
    below = {tag: set() for tag in result["tag"]}
    for node, tag in zip(node_tags["node_id"], node_tags["tag"]):
        parts = tag.split(":")
        for depth in range(1, len(parts)):
            below[":".join(parts[:depth])].add(node)
    row = result.set_index("tag")
    for tag in ["devel", "devel:lang", "role", "interface"]:
        own = set(node_tags.loc[node_tags["tag"] == tag, "node_id"])
        assert row.loc[tag, "tagged_nodes"] == tagged[tag]
        assert row.loc[tag, "direct_nodes"] == len(own - below[tag])
        assert row.loc[tag, "cumulative_nodes"] == len(own | below[tag])
    assert row.loc["devel:lang", "parent"] == "devel"
    assert row.loc["devel:lang", "depth"] == 2 and row.loc["devel:lang", "name"] == "lang"
    assert pd.isna(row.loc["devel", "parent"])
    # Depth first: every parent comes right before its subtree.
    position = {tag: i for i, tag in enumerate(result["tag"])}
    children = result.dropna(subset=["parent"])
    assert all(position[p] < position[c] for p, c in zip(children["parent"], children["tag"]))


def test_tag_hierarchy_lists_implied_ancestors(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("r")
    node = ltm.add(content="an orphan leaf", robot_id=robot)["node_id"]
    ltm.add_tag(node_id=node, tag="a:b:c", ancestors=False)
    result = ha.tag_hierarchy(ltm).set_index("tag")
    assert result["stored"].to_dict() == {"a": False, "a:b": False, "a:b:c": True}
    assert result["cumulative_nodes"].tolist() == [1, 1, 1]
    assert result["direct_nodes"].tolist() == [0, 0, 1]


def test_tag_graph_and_export(store: LongTermMemory, tmp_path: Path) -> None:
    pairs = ha.tag_cooccurrence(store, level=2, min_shared=5)
    graph = ha.tag_graph(store, level=2, min_shared=5, weight="npmi", seed=3)
    assert graph.number_of_edges() == len(pairs)
    edge = pairs.iloc[0]
    data = graph.edges[edge["topic1"], edge["topic2"]]
    assert data["shared_nodes"] == edge["shared_nodes"]
    assert data["weight"] == pytest.approx(max(edge["npmi"], 0))
    communities = {graph.nodes[n]["community"] for n in graph}
    assert communities == set(range(graph.graph["communities"]))
    sizes = ha.popular_tags(store, limit=None, level=2)  # every tag in scope, its own query
    assert list(graph.nodes) == sizes["tag"].tolist()
    assert [graph.nodes[n]["nodes"] for n in graph] == sizes["nodes"].tolist()
    again = ha.tag_graph(store, level=2, min_shared=5, weight="npmi", seed=3)
    assert nx.get_node_attributes(again, "community") == \
        nx.get_node_attributes(graph, "community")
    for suffix, reader in ((".graphml", nx.read_graphml), (".gexf", nx.read_gexf)):
        path = ha.write_tag_graph(graph, tmp_path / f"tags{suffix}")
        read = reader(path)
        assert read.number_of_nodes() == graph.number_of_nodes()
        assert read.number_of_edges() == graph.number_of_edges()
    with pytest.raises(ValidationError):
        ha.write_tag_graph(graph, tmp_path / "tags.png")


# -- snapshots ---------------------------------------------------------------------------------

SNAPSHOT_CASES = [
    (ha.tag_cooccurrence, {}),
    (ha.tag_cooccurrence, {"level": 2, "sort_by": "npmi", "robots": ["coder", "ops"]}),
    (ha.tag_hierarchy, {"prefix": "devel"}),
    (ha.popular_tags, {"freq": "W", "timeframe": (END - dt.timedelta(days=60), END)}),
    (ha.popular_tags, {"limit": None}),
    (ha.remember_trends, {"freq": "D"}),
    (ha.remember_trends, {"freq": "M", "by": "robot"}),
    (ha.remember_trends, {"freq": "W", "by": "tag", "prefix": "role"}),
    (ha.remember_count_distribution, {"by": "robot"}),
    (ha.most_reinforced, {"limit": 15}),
    (ha.robot_overlap, {}),
    (ha.robot_overlap, {"top": 4, "robots": ["scout", "coder", "ops", "planner"]}),
    (ha.robot_activity, {"robots": ["scout", "coder"]}),
]


@pytest.mark.parametrize(("helper", "options"), SNAPSHOT_CASES,
                         ids=[f"{h.__name__}-{i}" for i, (h, _) in enumerate(SNAPSHOT_CASES)])
def test_snapshot_answers_like_the_live_store(store: LongTermMemory, snapshot: Snapshot,
                                              helper, options) -> None:
    live = helper(store, **options)
    offline = helper(snapshot, **options)
    assert len(live) > 0
    assert_frame_equal(offline, live, check_exact=False, rtol=1e-12)
    assert offline.attrs == live.attrs



SQL_FOLDER = Path(ha.__file__).parent / "sql" / "analytics"


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.text(max_size=12), st.none(), st.integers(), st.lists(st.text()),
                      st.sampled_from(["node_id_range", "_scoped_nodes", "tag_names.sql",
                                       "../analytics/tag_names", "../hygiene/sample_ids"])))
@example(name="a\x00")
@example(name="x" * 100_000)
def test_only_the_shipped_analytics_queries_run(store: LongTermMemory, snapshot: Snapshot,
                                                name: object) -> None:
    """``analytics_frame`` runs a query of sql/analytics by its name, nothing else: another
    name, a path or a shared fragment is a ValidationError naming it."""
    shipped = {path.stem for path in SQL_FOLDER.glob("*.sql") if not path.stem.startswith("_")}
    for source in (store, snapshot):
        if isinstance(name, str) and name in shipped:
            assert name != "node_id_range" or len(source.analytics_frame(name, {}, {})) == 1
            continue
        with pytest.raises(ValidationError) as raised:
            source.analytics_frame(name, {}, {})  # type: ignore[arg-type]
        assert raised.value.field == "name"


def test_a_query_out_of_the_folder_is_not_run(store: LongTermMemory, snapshot: Snapshot,
                                              tmp_path: Path) -> None:
    (tmp_path / "evil.sql").write_text("SELECT current_user AS who")
    name = os.path.relpath(tmp_path / "evil", SQL_FOLDER)
    for source in (store, snapshot):
        with pytest.raises(ValidationError, match="is no analytics query"):
            source.analytics_frame(name, {}, {})
        with pytest.raises(ValidationError, match="is no analytics query"):
            next(source.analytics_pages(name, {}, ["who"]))


def test_tables_are_exported_from_one_snapshot(database_url: str) -> None:
    """A memory remembered while the tables are read is in none of them: the copy never
    holds a link to a memory it lacks."""
    with LongTermMemory(database_url) as store, LongTermMemory(database_url) as writer:
        store.add(content="before the export", robot_id=store.register_robot("r"))
        seen: dict[str, int] = {}
        for table, chunk in store.iter_tables_chunks():
            if table == "nodes" and table not in seen:
                writer.add(content="during the export", robot_id=writer.register_robot("w"),
                           tags=["t"])
            seen[table] = seen.get(table, 0) + len(chunk)
        assert seen == {"robots": 1, "nodes": 1, "robot_nodes": 1, "memory_events": 1}
        assert store.count_in_scope() == 2
    with pytest.raises(ValidationError, match="tables"):
        next(store.iter_tables_chunks(["nodes", "pg_authid"]))

def test_snapshot_keeps_tables_and_native_embeddings(store: LongTermMemory,
                                                     snapshot: Snapshot) -> None:
    assert_frame_equal(snapshot.table_counts(), store.table_counts())
    info = snapshot.info
    assert info["schema_version"] == ha.SCHEMA_VERSION
    assert "password" not in str(info["source"]).lower() or "****" in info["source"]
    with snapshot._con.cursor() as cur:
        lengths = cur.execute("SELECT DISTINCT len(embedding) FROM nodes "
                              "WHERE embedding IS NOT NULL").fetchall()
    assert lengths == [(384,)]


def test_snapshot_vectors_equal_the_stored_ones(ltm: LongTermMemory, tmp_path: Path) -> None:
    """Every vector arrives whole, at its own dimension and bit for bit; a memory without one
    has NULL."""
    robot = ltm.register_robot("r")
    rng = np.random.default_rng(7)
    stored = {}
    for i in range(45):
        dimension = (3, 5, 384)[i % 3]
        vector = rng.standard_normal(dimension).astype(np.float32) if i % 9 else None
        node = ltm.add(content=f"memory {i}", robot_id=robot, embedding=vector,
                       check_models=False)
        stored[node["node_id"]] = vector
    path = export_snapshot(ltm, tmp_path / "vectors.duckdb")
    with Snapshot(path) as snapshot, snapshot._con.cursor() as cur:
        rows = dict(cur.execute("SELECT id, embedding FROM nodes").fetchall())
    assert rows.keys() == stored.keys()
    for node, vector in stored.items():
        if vector is None:
            assert rows[node] is None
        else:
            np.testing.assert_array_equal(np.array(rows[node], dtype=np.float32), vector)


def test_export_snapshot_refuses_to_overwrite(store: LongTermMemory, tmp_path: Path) -> None:
    target = tmp_path / "memory.duckdb"
    export_snapshot(store, target)
    with pytest.raises(ValidationError, match="exists"):
        export_snapshot(store, target)
    export_snapshot(store, target, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.duckdb"]
    with pytest.raises(ValidationError, match="no snapshot"):
        Snapshot(tmp_path / "missing.duckdb")


def test_overwrite_replaces_only_a_snapshot(store: LongTermMemory, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """overwrite=True replaces an earlier snapshot; a folder or file of anything else, or
    the current folder, is refused before any work and left as it was."""
    folder = tmp_path / "parquet"
    export_snapshot(store, folder)
    export_snapshot(store, folder, overwrite=True)
    assert (folder / "snapshot_info.parquet").is_file()
    documents = tmp_path / "docs"
    documents.mkdir()
    (documents / "precious.txt").write_text("keep me")
    other = tmp_path / "other.duckdb"
    other.write_bytes(b"not a database")
    (folder / "notes.txt").write_text("mine")
    (tmp_path / "empty").mkdir()
    export_snapshot(store, tmp_path / "empty", overwrite=True)
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "nodes.parquet").write_bytes(b"")
    for target, why in ((documents, "not a snapshot's"), (folder, "not a snapshot's"),
                        (tmp_path / "odd", "no snapshot_info"),
                        (other, "not a snapshot"), (tmp_path / "docs" / "precious.txt",
                                                    "not a folder")):
        with pytest.raises(ValidationError, match=why) as refused:
            export_snapshot(store, target, overwrite=True)
        assert refused.value.field == "path"
    assert (documents / "precious.txt").read_text() == "keep me"
    assert other.read_bytes() == b"not a database"
    assert (folder / "notes.txt").read_text() == "mine"
    monkeypatch.chdir(folder)
    (folder / "notes.txt").unlink()
    with pytest.raises(ValidationError, match="current folder"):
        export_snapshot(store, ".", overwrite=True)
    assert (folder / "snapshot_info.parquet").is_file()


def test_failed_export_leaves_nothing(memory_url: str, tmp_path: Path) -> None:
    closed = LongTermMemory(memory_url)
    closed.close()
    with pytest.raises(ha.DatabaseError):
        export_snapshot(closed, tmp_path / "memory")
    assert list(tmp_path.iterdir()) == []


# -- validation and plots -------------------------------------------------------------------------

@pytest.mark.parametrize(("call", "field"), [
    (lambda s: ha.remember_trends(s, freq="fortnight"), "freq"),
    (lambda s: ha.remember_trends(s, by="node"), "by"),
    (lambda s: ha.tag_cooccurrence(s, prefix="Not A Tag"), "prefix"),
    (lambda s: ha.tag_cooccurrence(s, min_shared=0), "min_shared"),
    (lambda s: ha.tag_cooccurrence(s, sort_by="size"), "sort_by"),
    (lambda s: ha.popular_tags(s, robots=[]), "robots"),
    (lambda s: ha.robot_overlap(s, timeframe=(END, END - dt.timedelta(days=1))), "timeframe"),
    (lambda s: ha.tag_graph(s, weight="size"), "weight"),
])
def test_bad_options_are_typed_errors(store: LongTermMemory, call, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        call(store)
    assert info.value.field == field


def test_plots_draw_their_data(store: LongTermMemory) -> None:
    import matplotlib.pyplot as plt

    cooccurrence = ha.tag_cooccurrence(store)
    ax = ha.plot_tag_cooccurrence(cooccurrence, top=10)
    assert len(ax.patches) == 10
    assert ax.patches[0].get_width() == pytest.approx(cooccurrence["npmi"].max())

    graph = ha.tag_graph(store, level=1)
    ax = ha.plot_tag_graph(graph, labels=5, max_nodes=8)
    assert len(ax.texts) == 5 and len(ax.collections) >= 2
    assert len(ax.collections[-1].get_offsets()) == 8  # the node markers

    hierarchy = ha.tag_hierarchy(store)
    roots = hierarchy[hierarchy["depth"] == 1]
    ax = ha.plot_tag_hierarchy(hierarchy, children=0)
    assert len(ax.patches) == min(40, len(roots))
    ax = ha.plot_tag_hierarchy(hierarchy, children=2, top=500)
    expected = sum(1 + min(2, (hierarchy["parent"] == root).sum()) for root in roots["tag"])
    assert len(ax.patches) == expected
    biggest = roots.sort_values("cumulative_nodes", ascending=False).iloc[0]
    assert ax.get_yticklabels()[0].get_text() == biggest["tag"]
    assert ax.patches[0].get_width() == biggest["cumulative_nodes"]

    popular = ha.popular_tags(store, limit=5)
    assert [p.get_width() for p in ha.plot_popular_tags(popular).patches] == \
        popular["nodes"].tolist()
    assert len(ha.plot_popular_tags(ha.popular_tags(store, limit=3, freq="M")).lines) == 3

    trends = ha.remember_trends(store, freq="W")
    ax = ha.plot_remember_trends(trends)
    assert len(ax.patches) == 3 * len(trends)
    by_robot = ha.remember_trends(store, freq="W", by="robot")
    assert len(ha.plot_remember_trends(by_robot).lines) == by_robot["robot"].nunique()

    distribution = ha.remember_count_distribution(store)
    assert len(ha.plot_remember_count_distribution(distribution).patches) == len(distribution)

    overlap = ha.robot_overlap(store)
    _, ax = plt.subplots()
    assert ha.plot_robot_overlap(overlap, ax=ax) is ax
    n = overlap["robot1"].nunique()
    # The diagonal (a robot with itself, always 1) is blank so the pairs get the colour scale.
    assert ax.images[0].get_array().shape == (n, n) and len(ax.texts) == n * n - n
    assert np.ma.getmaskarray(ax.images[0].get_array()).diagonal().all()

    activity = ha.robot_activity(store)
    assert len(ha.plot_robot_activity(activity).patches) == 2 * len(activity)
