"""Vector, full-text, fuzzy, hybrid and tag searches, checked against independent answers."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htm_analytics import EmbeddingError, LongTermMemory, ValidationError
from htm_analytics.store import SEARCH_STRATEGIES
from htm_analytics.store._common import bind_timeframe
from htm_analytics.store._search_sql import tag_matches_sql

MEMORIES = [
    ("PostgreSQL connection pooling keeps database latency low", ["database:postgresql"]),
    ("The database uses HNSW indexes for vector search", ["database:postgresql:pgvector",
                                                          "ai:embeddings"]),
    ("Ruby gems are packaged libraries for the Ruby language", ["programming:ruby:gems"]),
    ("Embeddings map text to vectors for semantic retrieval", ["ai:embeddings"]),
    ("Redis is an in-memory key value store", ["database:redis"]),
    ("Python notebooks are great for data exploration", ["programming:python"]),
]


class WordEmbedder:
    """A tiny deterministic embedder: counts of a fixed vocabulary (lexical, for tests)."""

    vocabulary: ClassVar[list[str]] = [
        "database", "postgresql", "vector", "ruby", "embeddings", "redis", "python", "search",
        "semantic", "memory"]
    model = "word-count-test"

    def embed(self, text: str) -> list[float]:
        words = text.lower().replace(",", " ").split()
        counts = [float(sum(w.startswith(v[:6]) for w in words)) for v in self.vocabulary]
        counts.append(0.1)  # never all zero
        return counts


@pytest.fixture
def seeded(ltm: LongTermMemory) -> tuple[LongTermMemory, list[int]]:
    robot = ltm.register_robot("seeder")
    embedder = WordEmbedder()
    ids = []
    for content, tags in MEMORIES:
        node = ltm.add(content=content, robot_id=robot, embedding=embedder.embed(content))
        for tag in tags:
            ltm.add_tag(node_id=node["node_id"], tag=tag)
        ids.append(node["node_id"])
    return ltm, ids


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_vector_search_orders_by_exact_cosine(seeded: tuple) -> None:
    ltm, ids = seeded
    embedder = WordEmbedder()
    query = "semantic vector search for embeddings"
    rows = ltm.search(query=query, limit=10, embedding_service=embedder)
    q = np.array(embedder.embed(query))
    expected = sorted(((cosine(q, np.array(embedder.embed(c))), i)
                       for i, (c, _) in zip(ids, MEMORIES)), reverse=True)
    assert [r["id"] for r in rows][:2] == [i for _, i in expected][:2]
    for row in rows:
        exact = {i: s for s, i in expected}[row["id"]]
        assert row["similarity"] == pytest.approx(exact, abs=1e-5)
    assert list(rows[0]) == ["id", "content", "access_count", "created_at", "token_count",
                             "similarity"]


def test_vector_search_accepts_batch_embedders_and_reports_failures(seeded: tuple) -> None:
    ltm, _ = seeded

    class Batch:
        def embed(self, texts: object) -> np.ndarray:
            return np.array([WordEmbedder().embed(str(texts))])

    class Broken:
        def embed(self, text: str) -> list[float]:
            raise RuntimeError("model server down")

    assert ltm.search(query="redis memory", limit=1, embedding_service=Batch())[0][
        "content"].startswith("Redis")
    with pytest.raises(EmbeddingError, match="model server down"):
        ltm.search(query="anything", embedding_service=Broken())
    with pytest.raises(ValidationError, match="embed"):
        ltm.search(query="anything", embedding_service=object())


def test_search_limit_above_default_ef_search_returns_all_rows(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("many")
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(120, 16)).astype(np.float32)
    ltm.bulk_add([f"memory {i}" for i in range(120)], robots="many", embeddings=vectors,
                 defer_indexes=False)
    rows = ltm.search(embedding=vectors[0], limit=100)
    assert len(rows) == 100  # without raising hnsw.ef_search an index scan stops at 40
    sims = [r["similarity"] for r in rows]
    assert sims == sorted(sims, reverse=True) and rows[0]["content"] == "memory 0"
    assert robot


def test_fulltext_all_any_and_websearch(seeded: tuple) -> None:
    ltm, ids = seeded
    both = ltm.search_fulltext(query="database vector")
    assert [r["id"] for r in both] == [ids[1]]
    anyword = ltm.search_fulltext(query="database vector", match="any")
    assert {r["id"] for r in anyword} == {ids[0], ids[1], ids[3]}  # "vectors" stems too
    assert anyword[0]["id"] == ids[1]  # matches both words, ranks first
    web = ltm.search_fulltext(query='database -vector', match="websearch")
    assert [r["id"] for r in web] == [ids[0]]
    assert ltm.search_fulltext(query="nothing matches zzz") == []
    with pytest.raises(ValidationError):
        ltm.search_fulltext(query="x", match="fuzzy")  # type: ignore[arg-type]


def test_fulltext_uses_the_gin_index(seeded: tuple, db: psycopg.Connection) -> None:
    db.execute("SET enable_seqscan = off")  # a tiny table: make the planner show its options
    plan = "\n".join(r[0] for r in db.execute(
        "EXPLAIN SELECT id FROM nodes n, (SELECT plainto_tsquery('english', 'database') AS q) "
        "tsq WHERE to_tsvector('english', n.content) @@ q"))
    assert "idx_nodes_content_gin" in plan


def test_fuzzy_search_tolerates_typos(seeded: tuple) -> None:
    ltm, ids = seeded
    rows = ltm.search_fuzzy(query="conection poolin")
    assert rows and rows[0]["id"] == ids[0]
    assert 0 < rows[0]["similarity"] <= 1
    whole = ltm.search_fuzzy(query="Redis is an in-memory key value stor", method="whole")
    assert [r["id"] for r in whole] == [ids[4]]
    with pytest.raises(ValidationError):
        ltm.search_fuzzy(query="x", threshold=0)


def test_find_query_matching_tags_matches_whole_segments(seeded: tuple) -> None:
    ltm, _ = seeded
    assert ltm.find_query_matching_tags("PostgreSQL database tuning") == [
        "database", "database:postgresql", "database:postgresql:pgvector", "database:redis"]
    assert ltm.find_query_matching_tags("data") == []  # 'data' is not the segment 'database'
    assert ltm.find_query_matching_tags("an ok") == []  # words under 3 characters are ignored


def test_hybrid_weighted_matches_the_reference_formula(seeded: tuple) -> None:
    ltm, ids = seeded
    embedder = WordEmbedder()
    query = "postgresql database"
    rows = ltm.search_hybrid(query=query, limit=10, embedding_service=embedder)
    tags = ltm.find_query_matching_tags(query)
    q = np.array(embedder.embed(query))
    # Independent computation: candidates = full-text matches (all words) + tagged nodes.
    fulltext = {r["id"] for r in ltm.search_fulltext(query=query, limit=100)}
    tagged = {i for i in ids if set(ltm.get_node_tags(i)) & set(tags)}
    expected = {}
    for node_id, (content, _) in zip(ids, MEMORIES):
        if node_id in fulltext | tagged:
            similarity = cosine(q, np.array(embedder.embed(content)))
            boost = len(set(ltm.get_node_tags(node_id)) & set(tags)) / len(tags)
            expected[node_id] = 0.7 * similarity + 0.3 * boost
    assert {r["id"] for r in rows} == set(expected)
    for row in rows:
        assert row["combined_score"] == pytest.approx(expected[row["id"]], abs=1e-5)
        assert row["combined_score"] == pytest.approx(
            0.7 * row["similarity"] + 0.3 * row["tag_boost"])
    scores = [r["combined_score"] for r in rows]
    assert scores == sorted(scores, reverse=True)


def test_hybrid_rrf_fuses_three_ranked_lists(seeded: tuple) -> None:
    ltm, ids = seeded
    rows = ltm.search_hybrid(query="semantic embeddings search", limit=10,
                             embedding_service=WordEmbedder(), fusion="rrf")
    for row in rows:
        ranks = [row[k] for k in ("vector_rank", "fulltext_rank", "tag_rank")]
        assert row["rrf_score"] == pytest.approx(sum(1 / (60 + r) for r in ranks if r))
        assert len(row["sources"]) == sum(r is not None for r in ranks)
    # Every node with an embedding is a vector candidate, so all six are returned.
    assert len(rows) == len(ids)
    top = rows[0]
    assert top["content"].startswith("Embeddings map text") and len(top["sources"]) == 3
    # Without a timeframe the arms skip `nodes`; with one covering everything they join it:
    # the same best two of each arm either way.
    query, everything = "database vector search embeddings", (dt.datetime(1900, 1, 1),
                                                               dt.datetime(2999, 1, 1))
    ranks = [[(r["id"], r["vector_rank"], r["fulltext_rank"], r["tag_rank"])
              for r in ltm.search_hybrid(query=query, limit=10, fusion="rrf",
                                         prefilter_limit=2, timeframe=timeframe,
                                         embedding_service=WordEmbedder())]
             for timeframe in (None, everything)]
    assert ranks[0] == ranks[1]
    assert {r[2] for r in ranks[0]} == {None, 1, 2} and {r[3] for r in ranks[0]} == {None, 1, 2}


def test_timeframe_filters_every_search(seeded: tuple, db: psycopg.Connection) -> None:
    ltm, ids = seeded
    old = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    db.execute("UPDATE nodes SET created_at = %s WHERE id = %s", (old, ids[0]))
    ltm.clear_cache()
    window = (dt.datetime(2019, 12, 31), dt.date(2020, 1, 2))  # naive = UTC; date = midnight
    embedder = WordEmbedder()
    assert [r["id"] for r in ltm.search(query="database", embedding_service=embedder,
                                        timeframe=window)] == [ids[0]]
    assert [r["id"] for r in ltm.search_fulltext(query="database", match="any",
                                                 timeframe=window)] == [ids[0]]
    assert [r["id"] for r in ltm.search_fuzzy(query="connection", timeframe=window)] == [ids[0]]
    assert {r["id"] for r in ltm.search_hybrid(query="database", timeframe=window,
                                               embedding_service=embedder)} == {ids[0]}
    assert [r["id"] for r in ltm.search_by_tags(tags=["database"], timeframe=window)] == [
        ids[0]]
    assert ltm.popular_tags(timeframe=window) == [
        {"name": "database", "usage_count": 1}, {"name": "database:postgresql",
                                                 "usage_count": 1}]


def test_nodes_by_topic_prefix_is_segment_bounded(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("r")
    a = ltm.add(content="a", robot_id=robot)["node_id"]
    b = ltm.add(content="b", robot_id=robot)["node_id"]
    c = ltm.add(content="c", robot_id=robot)["node_id"]
    ltm.add_tag(node_id=a, tag="database", ancestors=False)
    ltm.add_tag(node_id=b, tag="database:postgresql", ancestors=False)
    ltm.add_tag(node_id=c, tag="databases", ancestors=False)
    assert {n["id"] for n in ltm.nodes_by_topic("database")} == {a, b}
    assert [n["id"] for n in ltm.nodes_by_topic("database", exact=True)] == [a]
    assert [n["id"] for n in ltm.nodes_by_topic("databases")] == [c]
    assert [n["id"] for n in ltm.nodes_by_topic("database", limit=1)] == [b]  # newest first
    with pytest.raises(ValidationError):
        ltm.nodes_by_topic("database%")


def test_reference_case_ancestors_make_exact_topics_work(ltm: LongTermMemory) -> None:
    """Reference case 37: a deep tag also tags its ancestors."""
    robot = ltm.register_robot("r")
    node = ltm.add(content="pgvector notes", robot_id=robot)["node_id"]
    assert ltm.add_tag(node_id=node, tag="database:postgresql:extensions:pgvector") == [
        "database", "database:postgresql", "database:postgresql:extensions",
        "database:postgresql:extensions:pgvector"]
    assert [n["id"] for n in ltm.nodes_by_topic("database", exact=True)] == [node]
    for i in range(3):
        other = ltm.add(content=f"ai note {i}", robot_id=robot)["node_id"]
        ltm.add_tag(node_id=other, tag=f"ai:topic{i}:leaf")
    assert {"name": "ai", "usage_count": 3} in ltm.popular_tags()
    assert ltm.get_node_tags(node) == ltm.node_topics(node)


def test_reference_case_topic_relationships(ltm: LongTermMemory) -> None:
    """Reference case 38: two nodes tagged database:postgresql relate the pair."""
    robot = ltm.register_robot("r")
    for text in ("one", "two"):
        node = ltm.add(content=text, robot_id=robot)["node_id"]
        ltm.add_tag(node_id=node, tag="database:postgresql")
    assert ltm.topic_relationships(min_shared_nodes=2) == [
        {"topic1": "database", "topic2": "database:postgresql", "shared_nodes": 2}]
    assert ltm.topic_relationships(min_shared_nodes=3) == []


def test_search_by_tags_any_and_all(seeded: tuple) -> None:
    ltm, ids = seeded
    anytag = ltm.search_by_tags(tags=["database:redis", "ai:embeddings"])
    assert {r["id"] for r in anytag} == {ids[1], ids[3], ids[4]}
    assert all(r["relevance"] == 0.5 for r in anytag)
    both = ltm.search_by_tags(tags=["database:postgresql", "ai:embeddings"], match_all=True)
    assert [r["id"] for r in both] == [ids[1]]
    assert both[0]["relevance"] == 1.0
    assert both[0]["matched_tags"] == ["ai:embeddings", "database:postgresql"]
    assert "database:postgresql:pgvector" in both[0]["tags"]
    with pytest.raises(ValidationError):
        ltm.search_by_tags(tags=[])
    with pytest.raises(ValidationError, match="not a valid tag"):
        ltm.search_by_tags(tags=["Bad Tag"])


@pytest.mark.parametrize("tag", ["Database", "data base", "a::b", ":a", "a:", "ä", "a_b", ""])
def test_malformed_tags_are_rejected(ltm: LongTermMemory, tag: str) -> None:
    node = ltm.add(content="x", robot_id=ltm.register_robot("r"))["node_id"]
    with pytest.raises(ValidationError, match="not a valid tag") as info:
        ltm.add_tag(node_id=node, tag=tag)
    assert info.value.field == "tag"


def test_add_tag_to_missing_node(ltm: LongTermMemory) -> None:
    from htm_analytics import NotFoundError
    with pytest.raises(NotFoundError):
        ltm.add_tag(node_id=999, tag="a")


@pytest.mark.parametrize("limit", [0, -1, 1001, 2.5, "10", True])
def test_limits_must_be_positive_integers(ltm: LongTermMemory, limit: object) -> None:
    with pytest.raises(ValidationError) as info:
        ltm.search_fulltext(query="x", limit=limit)  # type: ignore[arg-type]
    assert info.value.field == "limit"


def test_stats_has_every_reference_key(seeded: tuple) -> None:
    ltm, ids = seeded
    stats = ltm.stats()
    assert set(stats) == {"total_nodes", "nodes_by_robot", "total_tags", "oldest_memory",
                          "newest_memory", "active_robots", "robot_activity", "database_size",
                          "cache"}
    assert stats["total_nodes"] == len(ids)
    assert list(stats["nodes_by_robot"].values()) == [len(ids)]
    assert stats["robot_activity"][0]["name"] == "seeder"
    assert stats["database_size"] > 0
    assert stats["oldest_memory"] <= stats["newest_memory"]


def test_search_by_strategy_names_every_search(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("r")
    ltm.add(content="PostgreSQL primary database", robot_id=robot, embedding=[1.0, 0.0, 0.5])
    for strategy in SEARCH_STRATEGIES:
        rows = ltm.search_by_strategy(strategy, query="PostgreSQL database",
                                      embedding=[1.0, 0.0, 0.4])
        assert [r["content"] for r in rows] == ["PostgreSQL primary database"], strategy
    with pytest.raises(ValidationError) as info:
        ltm.search_by_strategy("telepathy", query="x")
    assert info.value.field == "strategy"


@pytest.mark.parametrize("strategy", ["vector", "rrf", "vector_bm25"])
def test_a_vector_search_without_a_vector_or_an_embedder_names_the_vector(
        ltm: LongTermMemory, strategy: str) -> None:
    with pytest.raises(ValidationError) as raised:
        ltm.search_by_strategy(strategy, query="which database?", embedding=None)
    assert raised.value.field == "embedding"
    with pytest.raises(ValidationError) as raised:
        ltm.search_by_strategy(strategy, query="which database?", embedding_service=object())
    assert raised.value.field == "embedding_service"


_TAG_NAMES = ["a", "a:b", "a:b:c", "d", "e:f"]
_NODES = st.lists(st.tuples(st.sets(st.sampled_from(_TAG_NAMES)), st.booleans(),
                            st.integers(0, 3)), max_size=12)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=_NODES, asked=st.lists(st.sampled_from([*_TAG_NAMES, "absent"]), max_size=6),
       prefilter=st.integers(1, 6), embedded_only=st.booleans(),
       window=st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 3))))
def test_the_hybrid_tag_arms_rank_nodes_by_matching_tags(
        ltm: LongTermMemory, database_url: str, nodes: list, asked: list[str], prefilter: int,
        embedded_only: bool, window: tuple[int, int] | None) -> None:
    """Both forms of the tag arm (every node, and a timeframe's) give the nodes with the most
    of the asked tags that pass the condition, ties by id, as counted here."""
    day = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    with psycopg.connect(database_url) as conn:  # rolled back: nothing stays
        ids = []
        for i, (tags, embedded, days) in enumerate(nodes):
            ids.append(conn.execute(
                "INSERT INTO nodes (content, embedding, embedding_dimension, created_at) "
                "VALUES (%s, CASE WHEN %s THEN array_fill(0.5, ARRAY[2000])::vector END, "
                "CASE WHEN %s THEN 2000 END, %s) RETURNING id",
                (f"node {i}", embedded, embedded, day + dt.timedelta(days=days))).fetchone()[0])
            for tag in sorted(tags):
                conn.execute("INSERT INTO tags (name) VALUES (%s) ON CONFLICT (name) DO NOTHING",
                             (tag,))
                conn.execute("INSERT INTO node_tags (node_id, tag_id) SELECT %s, id FROM tags "
                             "WHERE name = %s", (ids[-1], tag))
        params: dict = {"tags": asked, "prefilter": prefilter}
        where = "" if window is None else bind_timeframe(params, (
            day + dt.timedelta(days=min(window)), day + dt.timedelta(days=max(window))))
        condition = " AND n.embedding IS NOT NULL" if embedded_only else ""
        found = conn.execute(tag_matches_sql(where, condition), params).fetchall()
        conn.rollback()
    expected = sorted(
        ((-len(tags & set(asked)), node_id) for node_id, (tags, embedded, days) in zip(ids, nodes)
         if tags & set(asked) and (embedded or not embedded_only)
         and (window is None or min(window) <= days <= max(window))))[:prefilter]
    assert found == [(node_id, -negative) for negative, node_id in expected]
