"""HTM: remember, recall and forget on the real database, with working memory in step."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import numpy as np
import pandas as pd
import psycopg
import pytest

import htm_analytics as ha
from htm_analytics import HTM, EmbeddingError, NotFoundError, ValidationError
from htm_analytics.agent.embeddings import HashingEmbedder
from htm_analytics.store import SEARCH_STRATEGIES

NOW = dt.datetime(2026, 11, 18, 15, 30, tzinfo=dt.UTC)
FACTS = [
    ("PostgreSQL is our primary database for the memory store", ["database:postgresql"]),
    ("Redis caches the session tokens for five minutes", ["database:redis", "cache"]),
    ("The deploy pipeline runs on GitHub Actions every night", ["ci:github-actions"]),
    ("pgvector adds HNSW indexes for vector similarity search in PostgreSQL",
     ["database:postgresql:extensions"]),
]


class CountingEmbedder(HashingEmbedder):
    """The hashing provider, counting the texts it embeds."""

    def __init__(self, dimensions: int = 256) -> None:
        super().__init__(dimensions)
        self.texts: list[str] = []

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.texts += [texts] if isinstance(texts, str) else list(texts)
        return super().embed(texts)


@pytest.fixture
def htm(ltm: ha.LongTermMemory) -> Iterator[HTM]:
    with HTM("planner", store=ltm, embedder=CountingEmbedder(), clock=lambda: NOW) as robot:
        yield robot


def test_remember_stores_tags_embedding_model_and_working_memory(
        htm: HTM, db: psycopg.Connection) -> None:
    ids = [htm.remember(text, tags=tags) for text, tags in FACTS]
    assert len(set(ids)) == 4
    tags = htm.store.get_node_tags(ids[3])
    assert tags == ["database", "database:postgresql", "database:postgresql:extensions"]
    models = db.execute("SELECT provider, model, dimension, count(*) FROM node_embedding_models "
                        "GROUP BY 1, 2, 3").fetchall()
    assert models == [("hashing", "hashing-256-2gram", 256, 4)]
    assert sorted(htm.working_memory.keys()) == sorted(ids)
    assert htm.flush() == 4  # the working-memory steps are written behind
    flags = db.execute("SELECT count(*) FROM nodes WHERE in_working_memory").fetchone()
    assert flags == (4,)
    assert htm.working_memory.token_count == sum(ha.count_tokens(t) for t, _ in FACTS)
    active = db.execute("SELECT last_active FROM robots WHERE id = %s", (htm.robot_id,))
    assert active.fetchone()[0] is not None


def test_only_new_content_is_embedded_and_robots_share_it(ltm: ha.LongTermMemory,
                                                          db: psycopg.Connection) -> None:
    first, second = CountingEmbedder(), CountingEmbedder()
    a = HTM("a", store=ltm, embedder=first)
    b = HTM("b", store=ltm, embedder=second)
    node = a.remember("  shared knowledge about the cluster  ")
    assert a.remember("shared knowledge about the cluster") == node
    assert b.remember("shared knowledge about the cluster") == node
    assert first.texts == ["shared knowledge about the cluster"] and second.texts == []
    counts = db.execute("SELECT r.name, rn.remember_count FROM robot_nodes rn JOIN robots r "
                        "ON r.id = rn.robot_id ORDER BY r.name").fetchall()
    assert counts == [("a", 2), ("b", 1)]
    assert node in a.working_memory and node in b.working_memory


@pytest.mark.parametrize("strategy", SEARCH_STRATEGIES)
def test_recall_round_trip_for_each_strategy(htm: HTM, strategy: str,
                                             db: psycopg.Connection) -> None:
    ids = [htm.remember(text, tags=tags) for text, tags in FACTS]
    htm.clear_working_memory()
    found = htm.recall("PostgreSQL database", strategy=strategy, limit=3)
    assert FACTS[0][0] in found, found
    rows = htm.recall("PostgreSQL database", strategy=strategy, limit=3, raw=True)
    assert {"id", "content"} <= set(rows[0]) and rows[0]["id"] in ids
    assert rows[0]["id"] in htm.working_memory
    htm.flush()
    accessed = db.execute("SELECT access_count FROM nodes WHERE id = %s", (rows[0]["id"],))
    assert accessed.fetchone()[0] == 2  # recalled twice
    events = db.execute("SELECT count(*) FROM memory_events WHERE kind = 'recall' "
                        "AND robot_id = %s", (htm.robot_id,)).fetchone()
    assert events[0] >= 2


def test_working_memory_evicts_the_least_valuable_and_flags_it(ltm: ha.LongTermMemory,
                                                               db: psycopg.Connection) -> None:
    # Reference case 35 with the documented eviction order: the oldest, unused node goes.
    robot = HTM("small", store=ltm, working_memory_size=10,
                token_counter=lambda text: len(text.split()))
    first = robot.remember("one two three four")
    second = robot.remember("five six seven eight")
    third = robot.remember("nine ten eleven twelve")
    assert robot.working_memory.token_count == 8 and robot.working_memory.node_count == 2
    assert first not in robot.working_memory
    robot.flush()
    flags = dict(db.execute("SELECT id, in_working_memory FROM nodes").fetchall())
    assert flags == {first: False, second: True, third: True}
    evictions = db.execute("SELECT node_id FROM memory_events WHERE kind = 'evict'").fetchall()
    assert evictions == [(first,)]
    assert robot.clear_working_memory() == 2
    assert not any(dict(db.execute("SELECT id, in_working_memory FROM nodes").fetchall())
                   .values())
    with pytest.raises(ValidationError, match="do not fit this robot's working memory"):
        robot.remember("far too many words for a ten token working memory budget here")
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (3,)


def test_timeframe_phrases_filter_recall(htm: HTM, db: psycopg.Connection) -> None:
    old = htm.remember("PostgreSQL tuning notes from the spring")
    recent = htm.remember("PostgreSQL tuning notes from yesterday")
    db.execute("UPDATE nodes SET created_at = %s WHERE id = %s",
               (NOW - dt.timedelta(days=200), old))
    db.execute("UPDATE nodes SET created_at = %s WHERE id = %s",
               (NOW - dt.timedelta(days=1), recent))
    htm.store.clear_cache()
    assert htm.recall("PostgreSQL tuning", strategy="fulltext", timeframe="yesterday") == [
        "PostgreSQL tuning notes from yesterday"]
    assert len(htm.recall("PostgreSQL tuning", strategy="fulltext",
                          timeframe="last 365 days")) == 2
    assert htm.recall("PostgreSQL tuning", strategy="vector", timeframe="this month",
                      raw=True)[0]["id"] == recent
    with pytest.raises(ValidationError, match="cannot read 'last fortnight'"):
        htm.recall("PostgreSQL tuning", timeframe="last fortnight")


def test_forget_needs_confirmation(htm: HTM, db: psycopg.Connection) -> None:
    node = htm.remember("a secret to forget")
    with pytest.raises(ValidationError, match='confirm="confirmed"'):
        htm.forget(node)
    with pytest.raises(ValidationError):
        htm.forget(node, confirm="yes")
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (1,)
    assert htm.forget(node, confirm="confirmed")
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (0,)
    assert node not in htm.working_memory
    with pytest.raises(NotFoundError):
        htm.forget(node, confirm="confirmed")


def test_vector_search_refuses_another_model(ltm: ha.LongTermMemory) -> None:
    writer = HTM("writer", store=ltm, embedder=HashingEmbedder(256))
    writer.remember("PostgreSQL is our primary database")
    smaller = HTM("reader", store=ltm, embedder=HashingEmbedder(128))
    with pytest.raises(EmbeddingError, match=r"hashing/hashing-128-2gram \(128-d\) but the "
                                             r"stored vectors include hashing/hashing-256") as how:
        smaller.recall("database")
    # bad input as well: a ValidationError naming the argument
    assert isinstance(how.value, ha.ValidationError)
    assert how.value.field == "embedding_service"
    with pytest.raises(ha.EmbeddingMismatchError, match="has 3 dimensions") as bare:
        ltm.search(embedding=[0.1, 0.2, 0.3])
    assert bare.value.field == "embedding"
    assert smaller.recall("primary database", strategy="fulltext")  # no vectors involved

    class Other(HashingEmbedder):
        name = "other-provider"

    with pytest.raises(EmbeddingError, match="other-provider"):
        HTM("other", store=ltm, embedder=Other(256)).recall("database", strategy="rrf")
    assert HTM("same", store=ltm, embedder=HashingEmbedder(256)).recall("primary database")


def test_vectors_without_a_model_name_pass_when_the_dimension_matches(
        ltm: ha.LongTermMemory) -> None:
    robot = ltm.register_robot("importer")
    vector = HashingEmbedder(256).embed("imported memory about PostgreSQL")
    ltm.add(content="imported memory about PostgreSQL", robot_id=robot, embedding=vector)
    models = ltm.embedding_models()
    assert models["provider"].isna().all() and models["dimension"].tolist() == [256]
    assert HTM("reader", store=ltm, embedder=HashingEmbedder(256)).recall("PostgreSQL")
    with pytest.raises(EmbeddingError, match="unknown model"):
        HTM("other", store=ltm, embedder=HashingEmbedder(128)).recall("PostgreSQL")


def test_bad_input_is_rejected_before_anything_is_written(htm: HTM,
                                                          db: psycopg.Connection) -> None:
    for call in (lambda: htm.remember("   "), lambda: htm.remember("ok", tags="a-tag"),
                 lambda: htm.remember("ok", tags=["Not A Tag"]),
                 lambda: htm.remember("ok", token_count=-1),
                 lambda: htm.recall("x", strategy="magic"),
                 lambda: htm.recall("x", limit=0)):
        with pytest.raises(ValidationError):
            call()
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (0,)

    class Broken(HashingEmbedder):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            raise EmbeddingError("the provider is down")

    with pytest.raises(EmbeddingError):
        HTM("broken", store=htm.store, embedder=Broken()).remember("never stored")
    assert db.execute("SELECT count(*) FROM nodes").fetchone() == (0,)


def test_context_assembly_and_defaults(htm: HTM) -> None:
    for text, tags in FACTS:
        htm.remember(text, tags=tags)
    context = htm.assemble_context("recent", max_tokens=12)
    assert context == FACTS[-1][0]
    anonymous = HTM(store=htm.store)
    assert anonymous.robot_name.startswith("robot_") and len(anonymous.robot_name) == 14
    assert anonymous.embedder.name == "hashing"
    assert "HTM(robot_name='planner'" in repr(htm)
    assert isinstance(np.asarray(htm.embedder.embed("x")), np.ndarray)


def test_recall_on_the_demo_memory_with_its_model(demo: dict) -> None:
    from htm_analytics.report.demo import DemoQueryEmbedder, demo_queries

    with ha.LongTermMemory(demo["url"]) as store:
        models = store.embedding_models()
        assert models[["provider", "dimension"]].values.tolist() == [
            ["sentence-transformers", 384]]
        titles, _, answers = demo_queries(store, limit=20)
        reader = HTM("reader", store=store, embedder=DemoQueryEmbedder())
        hits = sum(reader.recall(title, limit=10, raw=True)[0]["id"] == answer
                   for title, answer in zip(titles, answers))
        assert hits >= 12  # real MiniLM queries find their package description first
        with pytest.raises(EmbeddingError, match="sentence-transformers/all-MiniLM-L6-v2"):
            HTM("lexical", store=store, embedder=HashingEmbedder(384)).recall(titles[0])


def test_recall_into_a_small_working_memory_keeps_flags_in_step(ltm: ha.LongTermMemory,
                                                                 db: psycopg.Connection) -> None:
    writer = HTM("writer", store=ltm, token_counter=lambda text: len(text.split()))
    for text, tags in FACTS:
        writer.remember(text, tags=tags)
    reader = HTM("reader", store=ltm, working_memory_size=25,
                 token_counter=lambda text: len(text.split()))
    found = reader.recall("PostgreSQL database", strategy="rrf", limit=4, raw=True)
    assert len(found) == 4 and sum(r["token_count"] for r in found) > 25
    held = set(reader.working_memory.keys())
    assert held and reader.working_memory.token_count <= 25
    reader.flush()
    flagged = {i for i, flag in db.execute("SELECT id, in_working_memory FROM nodes")
               if flag and i in {r["id"] for r in found}}
    # The writer's own flags aside, the recalled nodes are flagged exactly as the reader holds
    # them: the ones that did not fit were flagged evicted.
    assert {r["id"] for r in found} - held  # some did not fit
    assert {r["id"] for r in found} - held == {r["id"] for r in found} - flagged


def _written(db: psycopg.Connection) -> tuple[object, ...]:
    return tuple(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                 for table in ("nodes", "robots", "robot_nodes", "memory_events"))


@pytest.mark.parametrize(("field", "value"), [
    ("clock", 5), ("clock", "now"), ("clock", lambda: dt.datetime(2026, 11, 18)),
    ("clock", lambda: "2026-11-18"), ("clock", lambda: None), ("clock", lambda: pd.NaT),
    ("clock", lambda: 1 / 0), ("clock", lambda: dt.datetime(3000, 1, 1, tzinfo=dt.UTC)),
    ("token_counter", 5), ("token_counter", "words"),
    ("embedder", 5), ("store", 5), ("store", ["postgresql://"]),
    ("buffer_writes", "no"), ("buffer_writes", None), ("buffer_writes", np.array([1, 2])),
    ("log_queries", -1), ("log_queries", "10"), ("working_memory_size", 0),
    ("robot_name", "  "), ("robot_name", 5)])
def test_bad_constructor_arguments_are_refused_before_anything_is_written(
        ltm: ha.LongTermMemory, db: psycopg.Connection, field: str, value: object) -> None:
    before = _written(db)
    arguments: dict[str, object] = {"store": ltm, field: value}
    name = arguments.pop("robot_name", "other")
    with pytest.raises(ValidationError) as info:
        HTM(name, **arguments).remember("counter test")  # type: ignore[arg-type]
    assert info.value.field == field
    assert _written(db) == before


@pytest.mark.parametrize("count", [lambda text: "many", lambda text: -1, lambda text: 1.5,
                                   lambda text: 1 / 0, lambda text: None])
def test_a_token_counter_that_fails_is_named_and_writes_nothing(
        ltm: ha.LongTermMemory, db: psycopg.Connection, count: object) -> None:
    robot = HTM("counted", store=ltm, token_counter=count)  # type: ignore[arg-type]
    before = _written(db)
    for call in (lambda: robot.remember("counter test"),
                 lambda: robot.remember_many(["counter test", "another"])):
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == "token_counter"
    assert _written(db) == before
    assert robot.remember("counted by hand", token_count=3)  # the robot still works


def test_a_clock_going_wrong_later_is_refused_before_writing(ltm: ha.LongTermMemory,
                                                             db: psycopg.Connection) -> None:
    readings: list[object] = [NOW]
    robot = HTM("ticking", store=ltm, clock=lambda: readings[-1])  # type: ignore[arg-type, return-value]
    node = robot.remember("written while the clock was right")
    robot.flush()
    before = _written(db)
    readings.append(NOW.replace(tzinfo=None))
    for call in (lambda: robot.remember("written with a naive clock"),
                 lambda: robot.remember_many(["written with a naive clock"]),
                 lambda: robot.recall("clock", strategy="fulltext")):
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == "clock"
    robot.flush()
    assert _written(db) == before
    readings.append(NOW)
    assert robot.working_memory.keys() == [node]
    assert robot.recall("clock", strategy="fulltext") == ["written while the clock was right"]


@pytest.mark.parametrize("missing", [pd.NaT, float("nan"), pd.NA, (None, None),
                                     (pd.NaT, NOW)])
def test_recall_refuses_a_missing_timeframe(htm: HTM, db: psycopg.Connection,
                                            missing: object) -> None:
    htm.remember("PostgreSQL tuning notes")
    htm.flush()
    before = _written(db)
    with pytest.raises(ValidationError, match="missing value") as info:
        htm.recall("PostgreSQL tuning", strategy="fulltext", timeframe=missing)
    assert info.value.field == "timeframe"
    htm.flush()
    assert _written(db) == before


@pytest.mark.parametrize("raw", ["yes", 1, None])
def test_recall_refuses_a_raw_that_is_no_flag(htm: HTM, db: psycopg.Connection,
                                              raw: object) -> None:
    before = _written(db)
    with pytest.raises(ValidationError) as info:
        htm.recall("PostgreSQL tuning", strategy="fulltext", raw=raw)  # type: ignore[arg-type]
    assert info.value.field == "raw"
    htm.flush()
    assert _written(db) == before


@pytest.mark.parametrize(("field", "call"), [
    ("token_counts", lambda htm: htm.remember_many(["a"], token_counts=5)),
    ("tags", lambda htm: htm.remember_many(["a"], tags=5)),
    ("tags[0]", lambda htm: htm.remember_many(["a"], tags=[5])),
    ("tags[0]", lambda htm: htm.remember_many(["a"], tags=[None]))])
def test_remember_many_refuses_lists_that_are_not_lists(htm: HTM, db: psycopg.Connection,
                                                        field: str, call: object) -> None:
    with pytest.raises(ValidationError) as info:
        call(htm)  # type: ignore[operator]
    assert info.value.field == field
    assert _written(db)[0] == 0


def test_a_clock_is_read_once_when_given_and_once_per_reading(ltm: ha.LongTermMemory) -> None:
    """HTM checks its clock and hands the same checked clock to its working memory: a clock
    that ticks when read (a simulation's) is read once on construction, and each time the
    working memory asks for the time, once."""
    reads: list[int] = []

    def ticking() -> dt.datetime:
        reads.append(1)
        return NOW + dt.timedelta(seconds=len(reads))

    with HTM("ticking", store=ltm, embedder=CountingEmbedder(), clock=ticking) as robot:
        assert len(reads) == 1
        robot.working_memory.add("k", "value", token_count=1)
        assert len(reads) == 2
