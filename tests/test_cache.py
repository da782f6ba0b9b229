"""The LRU + TTL query cache, alone and inside the store."""

from __future__ import annotations

import psycopg
import pytest

from htm_analytics import LongTermMemory, QueryCache


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lru_drops_the_least_recently_used() -> None:
    cache = QueryCache(size=2, ttl=60)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == (True, 1)  # a is now most recent
    cache.put("c", 3)
    assert cache.get("b") == (False, None)
    assert cache.get("a") == (True, 1) and cache.get("c") == (True, 3)
    assert cache.stats() == {"hits": 3, "misses": 1, "hit_rate": 75.0, "size": 2}


def test_entries_expire_after_ttl() -> None:
    clock = FakeClock()
    cache = QueryCache(size=10, ttl=5, clock=clock)
    cache.put("k", "v")
    clock.now = 4.9
    assert cache.get("k") == (True, "v")
    clock.now = 5.0
    assert cache.get("k") == (False, None)
    assert len(cache) == 0


def test_disabled_cache_stores_nothing() -> None:
    cache = QueryCache(size=0)
    cache.put("k", 1)
    assert not cache.enabled and cache.get("k") == (False, None)


def test_store_cache_hits_misses_and_invalidation(ltm: LongTermMemory,
                                                  db: psycopg.Connection) -> None:
    robot = ltm.register_robot("r")
    node = ltm.add(content="cached database fact", robot_id=robot)["node_id"]
    first = ltm.search_fulltext(query="database")
    # Change the row behind the cache's back: a hit returns the cached (old) answer.
    db.execute("UPDATE nodes SET token_count = 99 WHERE id = %s", (node,))
    second = ltm.search_fulltext(query="database")
    assert second == first and second[0]["token_count"] == 0
    assert ltm.stats()["cache"] == {"hits": 1, "misses": 1, "hit_rate": 50.0, "size": 1}
    ltm.search_fulltext(query="database", limit=5)  # other arguments: a miss
    assert ltm.stats()["cache"]["misses"] == 2

    ltm.add(content="cached database fact", robot_id=robot)  # dedup: results unchanged
    assert ltm.stats()["cache"]["size"] == 2
    other = ltm.add(content="another database fact", robot_id=robot)["node_id"]
    assert ltm.stats()["cache"]["size"] == 0  # new content invalidated the cache
    assert {r["id"] for r in ltm.search_fulltext(query="database")} == {node, other}
    ltm.delete(other)
    assert ltm.stats()["cache"]["size"] == 0
    assert [r["id"] for r in ltm.search_fulltext(query="database")] == [node]
    assert ltm.search_fulltext(query="database")[0]["token_count"] == 99


def test_cached_rows_are_copies(ltm: LongTermMemory) -> None:
    ltm.add(content="immutable cache", robot_id=ltm.register_robot("r"))
    rows = ltm.search_fulltext(query="cache")
    rows[0]["content"] = "changed by the caller"
    assert ltm.search_fulltext(query="cache")[0]["content"] == "immutable cache"


def test_cache_size_zero_removes_the_stats_key(database_url: str) -> None:
    with LongTermMemory(database_url, cache_size=0) as ltm:
        ltm.search_fulltext(query="x")
        assert "cache" not in ltm.stats()


def test_cache_arguments_are_validated(database_url: str) -> None:
    from htm_analytics import ValidationError
    with pytest.raises(ValidationError, match="cache_size"):
        LongTermMemory(database_url, cache_size=-1)
    with pytest.raises(ValidationError, match="cache_ttl"):
        LongTermMemory(database_url, cache_ttl=0)
