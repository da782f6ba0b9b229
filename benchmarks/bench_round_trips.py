"""The default paths against raw SQL, before and after: searches with the query cache on and
off, and the default recall, each measured side by side in one run on one database.

For every query, in turn: the store of ``--before`` (a git revision, imported from git under
another name), the store of the working tree, and the same statement on a dedicated psycopg
connection (its session set up once: ``enable_seqscan = off``, the search's ``ef_search``),
the three in an order rotated query by query (the same query run just before is faster).
Load on the machine hits all three alike. Printed: p50 latency of each and the ratios.

Operations: ``LongTermMemory.search`` top 10 on the native 384-d index (each query once, so
every cached call is a miss that must still read the cache generation), the same with
``cache_size=0``, ``search_vector_bm25`` (the default recall's search), and ``HTM.recall``
with its defaults (the search, working memory and the recall written behind) against its own
search statement.

Usage: python benchmarks/bench_round_trips.py --before af20dce [--rows 10000] [--queries 300]
Uses the embedded server (or HTM_DBURL) in a scratch database that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench_versions import import_revision
from pgvector.psycopg import register_vector

from htm_analytics import HTM, LongTermMemory
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import scratch_database
from htm_analytics.store._search_sql import fulltext_text, lexical_statistics, search_statement
from htm_analytics.store._vectors import distance_sql
from htm_analytics.store.connection import resolve_database_url
from htm_analytics.store.lexical import BM25_B, BM25_K1, LEXICAL_BUDGET, VECTOR_BM25_ALPHA

NATIVE_SQL = ("SELECT n.id, n.content, n.access_count, n.created_at, n.token_count, "
              "1 - ((subvector(n.embedding, 1, 384)::vector(384)) <=> %(q)s) AS similarity "
              "FROM nodes n WHERE n.embedding_dimension = 384 "
              "ORDER BY (subvector(n.embedding, 1, 384)::vector(384)) <=> %(q)s LIMIT 10")


class Lookup:
    """An embedder that returns the corpus' MiniLM vector of each known text."""

    name, model = "sentence-transformers", "all-MiniLM-L6-v2"

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self._vectors = dict(zip(texts, vectors))

    def embed(self, text: str | list[str]) -> Any:
        if isinstance(text, list):
            return np.stack([self._vectors[t] for t in text])
        return self._vectors[text]


def side_by_side(name: str, inputs: list[Any],
                 operations: dict[str, Callable[[Any], object]]) -> dict[str, float]:
    samples: dict[str, list[float]] = {label: [] for label in operations}
    order = list(operations.items())
    for i, item in enumerate(inputs):
        # Each goes first, second and third in turn: the same query run just before warms
        # the caches (the server's and the CPU's) for the one after it.
        for label, operation in order[i % len(order):] + order[:i % len(order)]:
            started = time.perf_counter()
            operation(item)
            samples[label].append(time.perf_counter() - started)
    p50 = {label: statistics.median(times) * 1000 for label, times in samples.items()}
    parts = ", ".join(f"{label} {ms:6.2f} ms" for label, ms in p50.items())
    ratios = ""
    if "raw SQL" in p50:
        ratios = ", ".join(f"{label}/raw {p50[label] / p50['raw SQL']:.2f}x"
                           for label in p50 if label != "raw SQL")
    if "before" in p50 and "now" in p50:
        ratios += f"{', ' if ratios else ''}now/before {p50['now'] / p50['before']:.2f}x"
    print(f"  {name:<28} {parts}; {ratios}")
    return p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare with")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    old = import_revision(args.before, Path(tempfile.mkdtemp()))
    frame, vectors = read_corpus(rows=args.rows)
    titles, title_vectors = read_dev_queries(rows=args.queries)
    texts = titles["title"].tolist()
    queries = list(title_vectors)
    with scratch_database(resolve_database_url(), "htm_bench_trips") as url:
        with LongTermMemory(url, init_schema=True) as setup:
            setup.bulk_add(frame["content"].tolist(), robots="agent", embeddings=vectors,
                           tags=frame["tags"].tolist())
            setup.create_native_index(384)
            info = setup.server_info
        raw = psycopg.connect(url, autocommit=True)
        register_vector(raw)
        raw.execute("SET enable_seqscan = off")
        print(f"PostgreSQL {info['server_version']}, pgvector {info['pgvector_version']}; "
              f"{args.rows} memories, {len(queries)} queries; {args.before} vs the working "
              "tree vs raw SQL, p50\n")

        print("LongTermMemory.search, top 10, native index, ef_search 40")
        raw.execute("SET hnsw.ef_search = 40")
        for cache_size in (1000, 0):
            with old.LongTermMemory(url, cache_size=cache_size) as before, \
                    LongTermMemory(url, cache_size=cache_size) as now:
                for vector in queries[:20]:  # warm up; then every query is new to the cache
                    before.search(embedding=-vector, limit=10)
                    now.search(embedding=-vector, limit=10)
                side_by_side(f"cache {'on' if cache_size else 'off'}", queries, {
                    "before": lambda v, s=before: s.search(embedding=v, limit=10),
                    "now": lambda v, s=now: s.search(embedding=v, limit=10),
                    "raw SQL": lambda v: raw.execute(NATIVE_SQL, {"q": v},
                                                     prepare=True).fetchall()})

        print("\nsearch_vector_bm25 (the default recall's search), top 20, cache on")
        raw.execute("SET hnsw.ef_search = 100")
        distance, has_vector = distance_sql(384)
        bm25_sql = search_statement("vector_bm25", "", distance=distance,
                                    has_vector=has_vector, statistics=lexical_statistics(None))

        def raw_bm25(pair: tuple[str, np.ndarray]) -> object:
            text, vector = pair
            return raw.execute(bm25_sql, {
                "query": fulltext_text(text), "limit": 20, "depth": 100,
                "budget": LEXICAL_BUDGET, "cap": 10 * LEXICAL_BUDGET,
                "alpha": VECTOR_BM25_ALPHA, "k1": BM25_K1, "b": BM25_B, "q": vector},
                prepare=True).fetchall()

        pairs = list(zip(texts, queries))
        with old.LongTermMemory(url) as before, LongTermMemory(url) as now:
            for text, vector in pairs[:20]:
                before.search_vector_bm25(query=text + " warm", embedding=vector)
                now.search_vector_bm25(query=text + " warm", embedding=vector)
            side_by_side("search_vector_bm25", pairs, {
                "before": lambda p, s=before: s.search_vector_bm25(query=p[0], embedding=p[1]),
                "now": lambda p, s=now: s.search_vector_bm25(query=p[0], embedding=p[1]),
                "raw SQL": raw_bm25})


        print("\nHTM.recall with its defaults (vector_bm25, writes behind, cache on)")
        embedder = Lookup(texts, title_vectors)
        with old.LongTermMemory(url) as before, LongTermMemory(url) as now, \
                old.HTM("bench-before", store=before, embedder=embedder) as htm_before, \
                HTM("bench-now", store=now, embedder=embedder) as htm_now:
            for text in texts[:20]:
                htm_before.recall(text)
                htm_now.recall(text)
            side_by_side("HTM.recall", texts[20:], {
                "before": htm_before.recall, "now": htm_now.recall,
                "raw SQL": lambda t: raw_bm25((t, embedder.embed(t)))})
        raw.close()


if __name__ == "__main__":
    main()
