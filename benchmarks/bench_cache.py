"""What the cache's generation check costs, measured side by side in one run.

Three stores on one database of corpus memories answer the same repeated full-text and
vector searches, interleaved:

1. ``cache_scope == "database"`` (migration 006): a hit reads the database's generation
   first (one indexed round trip);
2. ``cache_scope == "process"`` (the counter dropped in a copy of the database): a hit
   costs no round trip, but a delete by another process is seen after ``cache_ttl`` only;
3. ``cache_size=0``: every search runs.

Usage: python benchmarks/bench_cache.py [--rows 3000] [--repeats 300]
Uses the embedded server (or HTM_DBURL) in scratch databases that are dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import psycopg
from psycopg.conninfo import conninfo_to_dict

from htm_analytics import LongTermMemory
from htm_analytics.agent.datasets import read_corpus, remember_history
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    frame, vectors = read_corpus(rows=args.rows)
    server = resolve_database_url()
    with scratch_database(server, "htm_bench_cache") as url:
        with LongTermMemory(url, init_schema=True) as loader:
            remember_history(loader, frame, vectors, days=60)
        name = conninfo_to_dict(url)["dbname"]
        with scratch_database(server, "htm_bench_cache_process", template=name) as copy:
            with psycopg.connect(copy, autocommit=True) as conn:  # the same data, no counter
                conn.execute("DROP TABLE htm_analytics_cache_generation")
                conn.execute("DROP FUNCTION htm_analytics_bump_cache_generation() CASCADE")
            stores = {"database": LongTermMemory(url),
                      "process": LongTermMemory(copy, init_schema=False),
                      "uncached": LongTermMemory(url, cache_size=0)}
            assert stores["database"].cache_scope == "database"
            assert stores["process"].cache_scope == "process"
            query_vector = vectors[0]
            searches: dict[str, Callable[[LongTermMemory], object]] = {
                "full text": lambda s: s.search_fulltext(query="library for parsing files"),
                "vector": lambda s: s.search(embedding=query_vector, limit=10),
            }
            print(f"{args.rows} memories, {args.repeats} repeats, p50 per search (ms)")
            print(f"{'search':<10} {'database':>9} {'process':>9} {'uncached':>9}")
            for name, search in searches.items():
                samples: dict[str, list[float]] = {k: [] for k in stores}
                for store in stores.values():
                    search(store)  # warm: the first call fills the cache
                for _ in range(args.repeats):
                    for key, store in stores.items():
                        start = time.perf_counter()
                        search(store)
                        samples[key].append(time.perf_counter() - start)
                print(f"{name:<10} " + " ".join(f"{p50_ms(samples[k]):>9.3f}"
                                                for k in ("database", "process", "uncached")))
            for store in stores.values():
                store.close()


if __name__ == "__main__":
    main()
