"""Throughput under concurrency: QPS and latency of ``store.search`` and ``HTM.recall`` at
1, 2, 4, 8 and 16 client threads sharing one ``LongTermMemory``, on the real corpus.

Each thread runs its share of ``--ops`` operations (the dev queries' real MiniLM vectors,
top 10 on the native 384-d index; every thread is its own robot for recalls). Printed per
level: QPS, p50 and p95 latency, errors (there must be none: a thread waiting for a pooled
connection waits, it does not fail), and how long requests waited for a connection
(``psycopg_pool`` statistics). For recalls also the QPS counting the time to write what the
recall buffer still held when the level ended: the rate the database sustains.
``--pool-sizes`` compares pool sizes in the same run.

Usage: python benchmarks/bench_threads.py [--rows 10000] [--ops 400]
       [--threads 1,2,4,8,16] [--pool-sizes 5]
Uses the embedded server (or HTM_DBURL) in a scratch database that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable

import numpy as np
from bench_htm import MODEL, PROVIDER, LookupEmbedder

from htm_analytics import HTM, LongTermMemory
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url


def run_level(threads: int, ops: int, make_worker: Callable[[int], Callable[[int], object]]
              ) -> tuple[float, list[float], int]:
    """Run ``ops`` operations over ``threads`` threads; (seconds, latencies, errors)."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start_line = threading.Barrier(threads + 1)

    def body(t: int) -> None:
        work = make_worker(t)
        mine: list[float] = []
        failed = 0
        start_line.wait()
        for i in range(t, ops, threads):
            began = time.perf_counter()
            try:
                work(i)
            except Exception:
                failed += 1
            mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    workers = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    start_line.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - began, latencies, errors[0]


def report(label: str, threads: int, seconds: float, latencies: list[float], errors: int,
           waited_ms: float, flush_seconds: float | None = None) -> None:
    p50, p95 = np.percentile(latencies, [50, 95]) * 1000
    sustained = ("" if flush_seconds is None else
                 f" ({len(latencies) / (seconds + flush_seconds):5.1f} with the writes)")
    print(f"  {label:7s} {threads:3d} threads: {len(latencies) / seconds:7.1f} QPS{sustained}, "
          f"p50 {p50:7.2f} ms, p95 {p95:7.2f} ms, errors {errors}, "
          f"waited for a connection {waited_ms / max(len(latencies), 1):6.2f} ms/op")


def pool_wait_ms(store: LongTermMemory) -> float:
    """Milliseconds requests waited for a connection, both pools, since the last call."""
    waited = store._pool.pop_stats().get("requests_wait_ms", 0)
    return waited + 1000 * store._search.pop_wait_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--threads", default="1,2,4,8,16")
    parser.add_argument("--pool-sizes", default="5")
    args = parser.parse_args()
    levels = [int(t) for t in args.threads.split(",")]

    server = resolve_database_url()
    frame, vectors = read_corpus(rows=args.rows)
    queries, query_vectors = read_dev_queries(rows=args.ops)
    titles = queries["title"].tolist()
    embedder = LookupEmbedder(titles, query_vectors)
    with scratch_database(server, "htm_bench") as url:
        with LongTermMemory(url, init_schema=True) as loader:
            loader.bulk_add(frame["content"].tolist(), robots="agent", embeddings=vectors,
                            tags=frame["tags"].tolist(), embedding_model=(PROVIDER, MODEL))
            loader.create_native_index(384)
            info = loader.server_info
        print(f"PostgreSQL {info['server_version']}, pgvector {info['pgvector_version']}; "
              f"{args.rows} rows, {args.ops} operations per level, {os.cpu_count()} cores, "
              "top 10 on the native 384-d index\n")
        for pool_size in (int(p) for p in args.pool_sizes.split(",")):
            print(f"pool_size={pool_size} (per pool: searches have their own)")
            with LongTermMemory(url, cache_size=0, pool_size=pool_size) as store:
                robots = [HTM(f"client-{t}", store=store, embedder=embedder)
                          for t in range(max(levels))]
                for vector in query_vectors[:20]:  # warm the connections and caches
                    store.search(embedding=vector, limit=10)

                def searcher(t: int, store: LongTermMemory = store) -> Callable[[int], object]:
                    return lambda i: store.search(embedding=query_vectors[i], limit=10)

                def recaller(t: int, robots: list[HTM] = robots) -> Callable[[int], object]:
                    return lambda i: robots[t].recall(titles[i], limit=10)

                for threads in levels:
                    pool_wait_ms(store)
                    seconds, latencies, errors = run_level(threads, args.ops, searcher)
                    report("search", threads, seconds, latencies, errors, pool_wait_ms(store))
                for threads in levels:
                    store.flush_recall_writes()
                    pool_wait_ms(store)
                    seconds, latencies, errors = run_level(threads, args.ops, recaller)
                    waited = pool_wait_ms(store)
                    began = time.perf_counter()  # what the background has not written yet
                    store.flush_recall_writes()
                    report("recall", threads, seconds, latencies, errors, waited,
                           time.perf_counter() - began)
                buffer = store.recall_buffer
                store.flush_recall_writes()
                print(f"  recall writes: {buffer.flushed_steps} steps in {buffer.flushes} "
                      f"flushes, {buffer.flush_seconds / max(buffer.flushed_steps, 1) * 1000:.2f}"
                      " ms of database time per step\n")


if __name__ == "__main__":
    main()
