"""Memory hygiene: near-duplicates planted in a real database are found, clean data yields
nothing, and bad arguments are refused with the field named."""

from __future__ import annotations

import datetime as dt
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from htm_analytics import LongTermMemory, ValidationError
from htm_analytics.analysis import memory_hygiene, near_duplicates, normalise_text
from htm_analytics.analysis.hygiene import NEAR_DUPLICATE_COLUMNS, pair_clusters, vector_pairs
from tests.test_hostile_input import FAST, anything

DIMENSION = 32
WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber",
    "basalt", "cobalt", "dune", "ember", "fjord", "granite", "harbor", "ivory", "jasper",
]


def random_texts(count: int, seed: int) -> list[str]:
    """Texts of random words: no two share enough trigrams to look alike."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=12)) + f" {i}" for i in range(count)]


def random_vectors(count: int, seed: int, dimension: int = DIMENSION) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(count, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def perturbed(vector: np.ndarray, cosine: float, seed: int) -> np.ndarray:
    """A unit vector whose cosine similarity with ``vector`` is exactly ``cosine``."""
    noise = np.random.default_rng(seed).normal(size=vector.shape)
    noise -= noise @ vector * vector
    noise /= np.linalg.norm(noise)
    return (cosine * vector + np.sqrt(1 - cosine**2) * noise).astype(np.float32)


def node_id(store: LongTermMemory, content: str) -> int:
    found = store.node_ids_by_content([content])[0]
    assert found is not None
    return found


@pytest.fixture
def clean(ltm: LongTermMemory) -> dict[str, Any]:
    """Sixty memories of two robots, far apart by vector and by text."""
    texts, vectors = random_texts(60, seed=1), random_vectors(60, seed=2)
    ltm.bulk_add(texts[:30], robots="alpha", embeddings=vectors[:30])
    ltm.bulk_add(texts[30:], robots="beta", embeddings=vectors[30:])
    return {"texts": texts, "vectors": vectors}


def test_clean_memory_has_no_near_duplicates(ltm: LongTermMemory,
                                             clean: dict[str, Any]) -> None:
    pairs = near_duplicates(ltm)
    assert pairs.empty
    assert dict(pairs.dtypes.astype(str)) == {c: str(pd.Series(dtype=t).dtype)
                                              for c, t in NEAR_DUPLICATE_COLUMNS.items()}
    assert pairs.attrs["compared"] == [{"model": "unnamed model (32-d)", "vectors": 60}]


def test_planted_near_duplicates_are_found_and_clustered(ltm: LongTermMemory,
                                                         clean: dict[str, Any]) -> None:
    texts, vectors = clean["texts"], clean["vectors"]
    # A paraphrase pair (0.97), a group of three (0.99 each to the first), one just under the
    # threshold (0.94, not a near-duplicate), a case-and-punctuation twin with an unrelated
    # vector, and a memory without a vector nearly equal to another's text.
    planted = {
        "paraphrase": (0, perturbed(vectors[0], 0.97, 10)),
        "three_1": (1, perturbed(vectors[1], 0.99, 11)),
        "three_2": (1, perturbed(vectors[1], 0.99, 12)),
        "under": (2, perturbed(vectors[2], 0.94, 13)),
    }
    contents = {name: f"planted {name} memory with its own words" for name in planted}
    ltm.bulk_add(list(contents.values()), robots="gamma",
                 embeddings=np.vstack([v for _, v in planted.values()]))
    twin = texts[40].upper().replace(" ", ",  ") + "!"
    ltm.bulk_add([twin], robots="gamma", embeddings=random_vectors(1, seed=99))
    gamma = ltm.register_robot("gamma")
    vectorless = texts[5] + " ."
    ltm.add(content=vectorless, robot_id=gamma)

    pairs = near_duplicates(ltm, min_similarity=0.95, pairs="all")
    found = {(int(r.node_a), int(r.node_b)): r for r in pairs.itertuples()}
    ids = {name: node_id(ltm, text) for name, text in contents.items()}
    base = [node_id(ltm, texts[i]) for i in range(60)]

    def key(a: int, b: int) -> tuple[int, int]:
        return (min(a, b), max(a, b))

    expected = {key(base[0], ids["paraphrase"]), key(base[1], ids["three_1"]),
                key(base[1], ids["three_2"]), key(ids["three_1"], ids["three_2"]),
                key(base[40], node_id(ltm, twin)), key(base[5], node_id(ltm, vectorless))}
    assert set(found) == expected
    assert found[key(base[0], ids["paraphrase"])].similarity == pytest.approx(0.97, abs=1e-5)
    assert found[key(base[0], ids["paraphrase"])].basis == "vector"
    # cos between the two perturbed copies of vectors[1] is at least 2 * 0.99^2 - 1
    assert found[key(ids["three_1"], ids["three_2"])].similarity >= 0.96
    text_twin = found[key(base[40], node_id(ltm, twin))]
    assert text_twin.text_twin and text_twin.basis == "text" and text_twin.similarity == 1
    trigram = found[key(base[5], node_id(ltm, vectorless))]
    assert trigram.basis == "trigram" and trigram.similarity >= 0.95
    assert not pd.isna(trigram.similarity) and pd.isna(trigram.model)
    three = pairs[pairs["node_a"] == min(base[1], ids["three_1"])]
    assert set(three["cluster_size"]) == {3} and three["cluster"].iloc[0] == 0
    assert pairs["cluster"].nunique() == 4
    row = found[key(base[0], ids["paraphrase"])]
    assert {row.robots_a, row.robots_b} == {"alpha", "gamma"}
    assert texts[0][:20] in (row.content_a + row.content_b)

    # Scope: only memories gamma remembers, or created before the planted ones.
    assert set(map(tuple, near_duplicates(ltm, robots="gamma")[["node_a", "node_b"]]
                   .to_numpy().tolist())) == {key(ids["three_1"], ids["three_2"])}
    assert near_duplicates(ltm, timeframe=(dt.datetime(2000, 1, 1),
                                           dt.datetime(2000, 1, 2))).empty
    # A lower threshold takes the 0.94 pair in.
    assert key(base[2], ids["under"]) in set(map(tuple, near_duplicates(
        ltm, min_similarity=0.93)[["node_a", "node_b"]].to_numpy().tolist()))


@pytest.mark.parametrize("dimension, sketch, held_rows", [
    (32, True, None), (384, True, None), (384, False, None), (32, True, 100), (384, True, 1)])
def test_tiled_comparison_equals_brute_force(dimension: int, sketch: bool,
                                             held_rows: int | None) -> None:
    """Batches and tiles smaller than the data, clustered vectors: the same pairs as the
    full similarity matrix, at several thresholds, with and without the sketch bound, and
    with fewer vectors held than there are (passes reading the rest again), each pair
    once."""
    rng = np.random.default_rng(5)
    centres = random_vectors(20, seed=6, dimension=dimension)
    vectors = np.vstack([perturbed(centres[i % 20], rng.uniform(0.85, 1.0), i)
                         for i in range(700)])
    vectors[13] = 0  # no direction: never a pair
    ids = np.arange(1, 701, dtype=np.int64)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-30)
    full = unit.astype(np.float64) @ unit.astype(np.float64).T
    reads: list[tuple[int | None, int | None]] = []

    def read(first: int | None, last: int | None) -> Any:
        reads.append((first, last))
        chosen = (ids >= (first or 0)) & (ids <= (last or ids[-1]))
        for start in range(0, int(chosen.sum()), 150):
            yield (ids[chosen][start:start + 150], vectors[chosen][start:start + 150])

    for threshold in (0.8, 0.9, 0.97):
        reads.clear()
        got, compared = [], []
        for a, b, _ in vector_pairs(read, threshold, tile_rows=64, sketch=sketch,
                                    held_rows=held_rows, compared=compared.append):
            got.extend(zip(np.minimum(a, b).tolist(), np.maximum(a, b).tolist()))
        assert sum(compared) == 699 * 698 // 2  # every pair once, whatever the passes
        i, j = np.nonzero(np.triu(full >= threshold, k=1))
        expected = {(int(ids[x]), int(ids[y])) for x, y in zip(i, j) if 13 not in (x, y)}
        assert sorted(got) == sorted(expected) and len(expected) > 100
        assert reads[0] == (None, None) and (len(reads) > 4) == (held_rows is not None)
        firsts = [first for first, _ in reads[1:]]
        assert firsts == sorted(set(firsts)) and all(last == 700 for _, last in reads[1:])


@pytest.mark.parametrize("text, twin", [
    ("Hello, World!", "hello   world"),
    ("ＦＵＬＬ width", "full WIDTH"),
    ("Straße — ok", "STRASSE ok"),
])
def test_normalised_text_ignores_case_space_and_punctuation(text: str, twin: str) -> None:
    assert normalise_text(text) == normalise_text(twin)


def test_normalised_text_keeps_words_apart() -> None:
    assert normalise_text("re-use it") != normalise_text("reuse it")
    assert normalise_text("café") != normalise_text("cafe")


@FAST
@given(min_similarity=anything, robots=anything, timeframe=anything, width=anything,
       pairs=anything, progress=anything)
def test_bad_arguments_name_their_field(ltm: LongTermMemory, min_similarity: Any,
                                        robots: Any, timeframe: Any, width: Any,
                                        pairs: Any, progress: Any) -> None:
    try:
        near_duplicates(ltm, min_similarity=min_similarity, robots=robots,
                        timeframe=timeframe, content_width=width, pairs=pairs,
                        progress=progress)
    except ValidationError as exc:
        assert exc.field in {"min_similarity", "robots", "timeframe", "content_width",
                             "pairs", "progress"}
    try:
        memory_hygiene(ltm, checks="sensitive", pairs=pairs)
    except ValidationError as exc:
        assert exc.field == "pairs"
    else:
        assert pairs in ("all", "tree")
    try:  # refused as itself, not as the supersession check's max_similarity it feeds
        memory_hygiene(ltm, checks="supersession", min_similarity=min_similarity)
    except ValidationError as exc:
        assert exc.field == "min_similarity"


def test_a_snapshot_or_anything_else_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        near_duplicates("postgresql://nowhere")  # type: ignore[arg-type]
    assert caught.value.field == "store"


@pytest.mark.parametrize("hits, total", [(0, 100), (100, 100), (13, 2000), (1, 1)])
def test_wilson_interval_holds_the_share(hits: int, total: int) -> None:
    from htm_analytics.analysis._common import wilson_interval

    low, high = wilson_interval(hits, total)
    assert 0 <= low <= hits / total <= high <= 1 and high - low < 0.95


def test_trigram_pairs_equal_every_pair_compared(ltm: LongTermMemory,
                                                 db: Any) -> None:
    """The prefix-filtered comparison finds exactly the pairs pg_trgm's `similarity` finds
    over every pair, on texts of a small vocabulary (many near-misses, shared prefixes,
    case and punctuation variants), some with a vector."""
    rng = np.random.default_rng(11)
    words = ["the", "a", "memory", "robot", "user", "prefers", "tea", "coffee", "python",
             "ruby", "vector", "index"]
    texts: set[str] = set()
    for _ in range(120):
        base = list(rng.choice(words, size=int(rng.integers(1, 8))))
        texts.add(" ".join(base))
        base[int(rng.integers(len(base)))] = str(rng.choice(words))
        texts.add(" ".join(base).upper() + str(rng.choice(["", "!", " x"])))
    robot = ltm.register_robot("r")
    for i, text in enumerate(sorted(texts)):
        ltm.add(content=text, robot_id=robot,
                embedding=[1.0, float(i)] if i % 3 == 0 else None)
    for threshold in (0.6, 0.9, 0.95):
        expected = {tuple(row) for row in db.execute(
            "SELECT a.id, b.id FROM nodes a JOIN nodes b ON a.id < b.id "
            "WHERE (a.embedding IS NULL OR b.embedding IS NULL) "
            "AND similarity(a.content, b.content) >= %s", (threshold,)).fetchall()}
        found = ltm.trigram_pairs(threshold)
        assert set(zip(found["node_a"], found["node_b"])) == expected and expected
    assert db.execute("SELECT count(*) FROM nodes").fetchone()[0] == len(texts)


def test_trigram_pairs_skip_a_memory_where_every_text_has_a_vector(database_url: str) -> None:
    """Without a memory lacking a vector there is no pair to look for: the pair statement
    (which computes every text's trigrams first) is not run, and a bare memory brings it
    back."""
    statements: list[str] = []
    with LongTermMemory(database_url, tracer=lambda text, *_: statements.append(text)) as ltm:
        robot = ltm.register_robot("r")
        for text in ("tea with milk", "Tea with milk!", "coffee black"):
            ltm.add(content=text, robot_id=robot, embedding=[1.0, 0.5])
        statements.clear()
        assert ltm.trigram_pairs(0.5).empty
        assert not any("show_trgm" in text for text in statements) and statements
        ltm.add(content="tea with milk.", robot_id=robot)
        found = ltm.trigram_pairs(0.5)
        assert any("show_trgm" in text for text in statements) and len(found) == 2


@FAST
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)).filter(lambda p: p[0] < p[1]),
                min_size=1, max_size=60, unique=True))
def test_pair_clusters_number_networkx_components(pairs: list[tuple[int, int]]) -> None:
    """Groups numbered biggest first, of equal sizes the one with the lowest id first, as the
    connected components of networkx sorted that way."""
    graph = nx.Graph(pairs)
    components = sorted(nx.connected_components(graph), key=lambda c: (-len(c), min(c)))
    number = {node: i for i, members in enumerate(components) for node in members}
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    nodes, cluster, size = pair_clusters(a, b)
    assert nodes.tolist() == sorted(graph.nodes)
    assert cluster.tolist() == [number[x] for x in a.tolist()]
    assert size.tolist() == [len(components[number[x]]) for x in a.tolist()]


def test_tree_keeps_each_clusters_strongest_pairs(ltm: LongTermMemory,
                                                  clean: dict[str, Any]) -> None:
    """``pairs="tree"``: the clusters and memories of every pair, joined by a maximum
    spanning tree of them (networkx's), with each kept pair's own similarity and basis."""
    texts, vectors = clean["texts"], clean["vectors"]
    copies = np.vstack([perturbed(vectors[7], 0.99, 100 + i) for i in range(24)])
    ltm.bulk_add([f"copy {i} of the seventh memory" for i in range(24)], robots="gamma",
                 embeddings=copies)
    # Three case-and-spacing twins with unrelated vectors: a clique of text pairs.
    ltm.bulk_add([texts[50].upper(), texts[50].replace(" ", "  ") + ".", texts[50] + "!"],
                 robots="gamma", embeddings=random_vectors(3, seed=98))
    every = near_duplicates(ltm, pairs="all")
    tree = near_duplicates(ltm)
    assert every.attrs["pairs"] == "all" and tree.attrs["pairs"] == "tree"
    assert tree.attrs["pairs_compared"] == every.attrs["pairs_compared"] == 300
    assert len(every) == 300 + 6 and len(tree) == 24 + 3
    for frame in (every, tree):
        assert frame.groupby("cluster")["cluster_size"].first().tolist() == [25, 4]
    members = {name: frame.groupby("cluster").apply(
        lambda g: sorted(set(g["node_a"]) | set(g["node_b"])), include_groups=False).tolist()
        for name, frame in (("every", every), ("tree", tree))}
    assert members["every"] == members["tree"]
    key = ["node_a", "node_b"]
    joined = tree.merge(every, on=key, suffixes=("", "_every"), validate="1:1")
    assert len(joined) == len(tree)
    for column in ("similarity", "basis", "text_twin", "cluster", "cluster_size"):
        assert (joined[column] == joined[f"{column}_every"]).all(), column
    assert tree.groupby("cluster").size().tolist() == [24, 3]
    for cluster in (0, 1):
        graph = nx.Graph()
        graph.add_weighted_edges_from(every[every["cluster"] == cluster][
            ["node_a", "node_b", "similarity"]].itertuples(index=False))
        best = nx.maximum_spanning_tree(graph).size(weight="weight")
        assert tree[tree["cluster"] == cluster]["similarity"].sum() == pytest.approx(best)
    assert tree[tree["cluster"] == 1]["text_twin"].all()
    # The summary counts the tree's pairs (one per extra copy) by default, every pair if
    # asked; the groups, memories and shares are the same.
    rows = {choice: memory_hygiene(ltm, checks="near_duplicates", pairs=choice).summary
            .iloc[0] for choice in ("tree", "all")}
    assert memory_hygiene(ltm, checks="near_duplicates").summary.iloc[0].equals(rows["tree"])
    assert (rows["tree"]["findings"], rows["all"]["findings"]) == (27, 306)
    assert rows["tree"]["memories"] == rows["all"]["memories"] == 29
    assert rows["tree"]["share"] == rows["all"]["share"]
    assert "27 fewer memories" in rows["tree"]["what_it_means"]
    assert "Of the 27 pairs kept (the strongest joining each group), 3 join" \
        in rows["tree"]["what_it_means"]
    assert "Of the 306 pairs kept (every pair), 6 join" in rows["all"]["what_it_means"]


@FAST
@given(st.lists(st.tuples(st.integers(1, 25), st.integers(1, 25),
                          st.sampled_from([0.5, 0.75, 0.875, 1.0]),
                          st.sampled_from(["vector", "trigram", "text"]))
                .filter(lambda p: p[0] != p[1]), min_size=1, max_size=80),
       st.integers(1, 30))
def test_pair_collector_forest_is_a_maximum_spanning_forest(
        pairs: list[tuple[int, int, float, str]], spill_rows: int) -> None:
    """Whatever the order and however often the forest is recomputed: the components of
    every pair, joined by a maximum spanning forest of each pair's kept value (its highest
    similarity, a compared pair before a text pair)."""
    from htm_analytics.analysis.pair_graph import PairCollector

    collector = PairCollector(spanning=True, spill_rows=spill_rows)
    everything = PairCollector(spanning=False)
    for a, b, similarity, basis in pairs:
        for target in (collector, everything):
            target.add(np.array([a]), np.array([b]), np.array([similarity]), basis=basis)
    kept = {(a, b): (s, basis) for a, b, s, basis, _ in
            everything.frame().itertuples(index=False, name=None)}
    for a, b, *_ in pairs:  # the rule, replayed
        best = max(((s, t) for x, y, s, t in pairs if {x, y} == {a, b}),
                   key=lambda value: (value[1] != "text", value[0]))
        assert kept[(min(a, b), max(a, b))] == best
    forest = collector.frame()
    graph = nx.Graph()
    graph.add_weighted_edges_from((a, b, s) for (a, b), (s, _) in kept.items())
    assert set(zip(forest["node_a"], forest["node_b"])) <= set(kept)
    assert [kept[(a, b)] for a, b in zip(forest["node_a"], forest["node_b"])] == \
        list(zip(forest["similarity"], forest["basis"]))
    tree = nx.Graph(list(zip(forest["node_a"], forest["node_b"])))
    assert nx.is_forest(tree)
    assert sorted(map(sorted, nx.connected_components(tree))) == \
        sorted(map(sorted, nx.connected_components(graph)))
    best = nx.maximum_spanning_tree(graph).size(weight="weight")
    assert forest["similarity"].sum() == pytest.approx(best)
    assert collector.compared == everything.compared == \
        sum(basis != "text" for *_, basis in pairs)


def test_held_vectors_bound_reads_again_with_the_same_pairs(
        ltm: LongTermMemory, clean: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for a few vectors only, the full check reads the rest again from the store
    (pass after pass, by id range) and finds the same pairs."""
    from htm_analytics.analysis import hygiene

    copies = np.vstack([perturbed(clean["vectors"][3], 0.99, 200 + i) for i in range(30)])
    ltm.bulk_add([f"copy {i} of the third memory" for i in range(30)], robots="gamma",
                 embeddings=copies)
    whole = near_duplicates(ltm, pairs="all")
    reads: list[tuple[Any, Any]] = []
    iter_vectors = ltm.iter_vectors

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append((kwargs["first_id"], kwargs["last_id"]))
        return iter_vectors(*args, **kwargs)

    monkeypatch.setattr(ltm, "iter_vectors", counted)
    monkeypatch.setattr(hygiene, "_BATCH_ROWS", 8)
    monkeypatch.setattr(hygiene, "_HELD_VECTOR_BYTES", 20 * 4 * (DIMENSION + 33))
    part = near_duplicates(ltm, pairs="all")
    assert len(reads) > 2 and reads[0] == (None, None)
    assert len(whole) == 31 * 30 // 2  # the third memory and its 30 copies
    # Tiles group other vectors together, so float32 sums (and the order of pairs of equal
    # similarity) may differ in the last bits.
    def by_pair(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(["node_a", "node_b"], ignore_index=True)

    pd.testing.assert_frame_equal(by_pair(part), by_pair(whole), check_exact=False,
                                  rtol=1e-6)


def test_vectors_are_compared_within_their_model(ltm: LongTermMemory) -> None:
    """Vectors of two named models and unnamed ones of the same dimension: only pairs
    within one model are compared (the provenance row looked up per memory)."""
    base = random_vectors(1, seed=41)[0]
    near = [perturbed(base, 0.99, seed) for seed in range(4)]
    ids = ltm.bulk_add(["model one, first", "model one, copy"], robots="a",
                       embeddings=np.vstack([base, near[0]]),
                       embedding_model=("p", "one"))["node_id"].tolist()
    ltm.bulk_add(["model two, alike"], robots="a", embeddings=near[1][None],
                 embedding_model=("p", "two"), check_models=False)
    unnamed = ltm.bulk_add(["no model named, alike", "no model named, alike too"],
                           robots="a", embeddings=np.vstack(near[2:]))["node_id"].tolist()
    found = near_duplicates(ltm)
    assert sorted(zip(found["node_a"], found["node_b"], found["model"])) == [
        (ids[0], ids[1], "p/one (32-d)"), (unnamed[0], unnamed[1], "unnamed model (32-d)")]
    assert sorted(g["vectors"] for g in found.attrs["compared"]) == [1, 2, 2]
