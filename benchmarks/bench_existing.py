"""What reading and writing databases the HTM gem wrote costs, side by side in one run.

1. ``add`` of new content per row, in a memory where no content is stored unstripped (the
   hash alone decides) and in the same memory once the seed-era gem has stored one text
   unstripped (each add of new content then also probes the seed's full-text index for an
   unstripped twin), interleaved.
2. The one scan a store makes, on its first add, to learn whether any content is unstripped.
3. Vector and full-text search, top 10, on the toolkit's schema and through the live-rows view
   of the current gem's schema (soft deletes), as the store runs them.

Usage: python benchmarks/bench_existing.py [--rows 20000] [--adds 300]
Uses the embedded server (or HTM_DBURL) in scratch databases dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from htm_analytics import LongTermMemory
from htm_analytics.agent.datasets import read_corpus
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--adds", type=int, default=300)
    args = parser.parse_args()
    frame, vectors = read_corpus(rows=int((args.rows + args.adds) * 1.3))
    frame = frame.drop_duplicates("content")
    vectors = vectors[frame.index.to_numpy()]
    frame = frame.reset_index(drop=True)
    loaded, extra = frame.iloc[: args.rows], frame.iloc[args.rows: args.rows + args.adds]
    server = resolve_database_url()
    with scratch_database(server, "htm_bench_plain") as plain_url, \
            scratch_database(server, "htm_bench_padded") as padded_url:
        for url in (plain_url, padded_url):
            with LongTermMemory(url, init_schema=True, cache_size=0) as store:
                store.bulk_add(loaded["content"].tolist(), robots="agent",
                               embeddings=vectors[: len(loaded)])
        with psycopg.connect(padded_url, autocommit=True) as conn:  # as the seed-era gem
            conn.execute("INSERT INTO nodes (content, content_hash) VALUES "
                         "('  stored by the gem  ', 'gem-hash')")
            conn.execute("VACUUM ANALYZE nodes")
        with psycopg.connect(plain_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE nodes")
        print(f"{len(loaded)} memories in each database; {args.adds} adds of new content each\n")

        stores = {name: LongTermMemory(url, cache_size=0, pool_size=1)
                  for name, url in (("plain", plain_url), ("padded", padded_url))}
        robots = {name: store.register_robot("agent") for name, store in stores.items()}
        first: dict[str, float] = {}
        times: dict[str, list[float]] = {"plain": [], "padded": []}
        contents = extra["content"].tolist()
        for i in range(args.adds):
            for name in ("plain", "padded") if i % 2 else ("padded", "plain"):
                started = time.perf_counter()
                stores[name].add(content=contents[i], robot_id=robots[name])
                took = time.perf_counter() - started
                if i == 0:
                    first[name] = took
                else:
                    times[name].append(took)
        print("add of new content, p50 (the first add, which includes the one-off scan, apart)")
        for name, label in (("plain", "no unstripped content"),
                            ("padded", "unstripped content present (full-text probe)")):
            print(f"  {label:45s} {p50_ms(times[name]):6.2f} ms  (first add "
                  f"{first[name] * 1000:.1f} ms)")
        print(f"  ratio padded / plain: {p50_ms(times['padded']) / p50_ms(times['plain']):.2f}x")

        scans = []
        with psycopg.connect(plain_url, autocommit=True) as conn:
            for _ in range(5):
                started = time.perf_counter()
                conn.execute("SELECT EXISTS (SELECT 1 FROM nodes WHERE content ~ "
                             "'^[[:space:]]|[[:space:]]$')").fetchone()
                scans.append(time.perf_counter() - started)
        print(f"\nthe once-per-store unstripped scan over {len(loaded) + args.adds} memories: "
              f"{p50_ms(scans):.1f} ms p50\n")

        # The same memory seen as the current gem's: add deleted_at, soft-delete 5 %.
        with psycopg.connect(padded_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE nodes ADD COLUMN deleted_at timestamptz")
            conn.execute("UPDATE nodes SET deleted_at = now() WHERE id % 20 = 0")
            conn.execute("VACUUM ANALYZE nodes")
        for store in stores.values():
            store.close()
        stores = {name: LongTermMemory(url, cache_size=0, pool_size=1)
                  for name, url in (("plain", plain_url), ("padded", padded_url))}
        search: dict[str, dict[str, list[float]]] = {n: {"vector": [], "fulltext": []}
                                                     for n in stores}
        for i in range(100):
            for name, store in stores.items():
                started = time.perf_counter()
                store.search(embedding=vectors[i], limit=10)
                search[name]["vector"].append(time.perf_counter() - started)
                started = time.perf_counter()
                store.search_fulltext(query=loaded["content"].iloc[i].split()[0], limit=10)
                search[name]["fulltext"].append(time.perf_counter() - started)
        print("search, top 10, p50: toolkit schema vs live-rows view of a soft-deleting schema")
        for kind in ("vector", "fulltext"):
            plain, gem = p50_ms(search["plain"][kind]), p50_ms(search["padded"][kind])
            print(f"  {kind:8s} {plain:6.2f} ms vs {gem:6.2f} ms, ratio {gem / plain:.2f}x")
        for store in stores.values():
            store.close()


if __name__ == "__main__":
    main()
