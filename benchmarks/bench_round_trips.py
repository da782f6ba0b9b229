"""The default paths against raw SQL, before and after: searches with the query cache on and
off, and the default recall, each measured side by side in one run on one database.

For every query, in turn: the store of ``--before`` (a git revision, imported from git under
another name), the store of the working tree, and the very statement the working tree's
store runs for that query (text and parameters, recorded beforehand by its tracer), on two
dedicated psycopg connections set up once as the store's are (``enable_seqscan = off``, the
search's ``ef_search``): one returning dicts, as the store does, one returning tuples. The
operations run in an order rotated query by query (the same query run just before is
faster), so load on the machine hits all alike; ``--rounds`` rounds, the caches emptied
before each, so every cached call is a miss that must still read the cache generation.
Printed: p50 latency of each (the median of the rounds' p50s) and its ratio to each raw
connection, with the lowest and highest round's ratio.

Operations: ``LongTermMemory.search`` top 10 on the native 384-d index, with the query cache
on and with ``cache_size=0``; ``search_vector_bm25`` (the default recall's search); and
``HTM.recall`` with its defaults (the search, working memory and the recall written behind)
against its own search statement (and the embedder's look-up).

Usage: python benchmarks/bench_round_trips.py --before af20dce [--rows 10000] [--queries 300]
[--rounds 3]. Uses the embedded server (or HTM_DBURL) in a scratch database that is dropped
afterwards.
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
from psycopg.rows import dict_row

from htm_analytics import HTM, LongTermMemory
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url
from htm_analytics.store.search_pool import DEFAULT_EF_SEARCH, SESSION_EF_SEARCH


class Lookup:
    """An embedder that returns the corpus' MiniLM vector of each known text."""

    name, model = "sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2"

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self._vectors = dict(zip(texts, vectors))

    def embed(self, text: str | list[str]) -> Any:
        if isinstance(text, list):
            return np.stack([self._vectors[t] for t in text])
        return self._vectors[text]


def side_by_side(name: str, inputs: list[Any],
                 operations: dict[str, Callable[[Any], object]], rounds: int,
                 before_round: Callable[[], object] = lambda: None) -> None:
    """Print each operation's p50 (the median over ``rounds`` rounds of each round's p50) and
    its ratio to the first raw operation, with the lowest and highest round's ratio."""
    p50s: dict[str, list[float]] = {label: [] for label in operations}
    order = list(operations.items())
    for _ in range(rounds):
        before_round()  # e.g. empty the caches: every query a miss again
        samples: dict[str, list[float]] = {label: [] for label in operations}
        for i, item in enumerate(inputs):
            # Each goes first, second, ... in turn: the same query run just before warms
            # the caches (the server's and the CPU's) for the one after it.
            for label, operation in order[i % len(order):] + order[:i % len(order)]:
                started = time.perf_counter()
                operation(item)
                samples[label].append(time.perf_counter() - started)
        for label, times in samples.items():
            p50s[label].append(statistics.median(times) * 1000)
    baselines = [label for label in operations if label.startswith("raw")]
    print(f"  {name}")
    for label, values in p50s.items():
        line = f"    {label:<18} {statistics.median(values):7.2f} ms"
        for base in baselines if label not in baselines else baselines[baselines.index(label) + 1:]:
            ratios = [mine / theirs for mine, theirs in zip(values, p50s[base])]
            line += (f"; /{base} {statistics.median(ratios):.2f}x "
                     f"({min(ratios):.2f}-{max(ratios):.2f})")
        print(line)


def recorded(url: str, cache_size: int, call: Callable[[Any, Any], object],
             inputs: list[Any], wrap: Callable[[LongTermMemory], Any] = lambda s: s
             ) -> list[tuple[str, Any]]:
    """The search statement (text and parameters) this tree's store runs for each input, as
    its tracer sees it (the last statement holding a vector distance), from a store of its
    own (``wrap(store)`` is what ``call`` gets): the raw side then runs exactly that."""
    seen: list[tuple[str, Any]] = []
    statements = []
    with LongTermMemory(url, cache_size=cache_size,
                        tracer=lambda text, params, _: seen.append((text, params))) as store, \
            wrap(store) as target:
        for item in inputs:
            seen.clear()
            call(target, item)
            statements.append([entry for entry in seen if "<=>" in entry[0]][-1])
    return statements


def raw_connections(url: str, ef_search: int) -> dict[str, psycopg.Connection[Any]]:
    """Dedicated connections returning tuples and dicts, set up once as the store's are."""
    connections: dict[str, psycopg.Connection[Any]] = {
        "raw SQL (dicts)": psycopg.connect(url, autocommit=True, row_factory=dict_row),
        "raw SQL (tuples)": psycopg.connect(url, autocommit=True)}
    for conn in connections.values():
        register_vector(conn)
        conn.execute("SET enable_seqscan = off")
        conn.execute(f"SET hnsw.ef_search = {int(ef_search)}")
    return connections


def replaying(conn: psycopg.Connection[Any]) -> Callable[[tuple[Any, tuple[str, Any]]], object]:
    return lambda pair: conn.execute(pair[1][0], pair[1][1], prepare=True).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare with")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
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
        print(f"PostgreSQL {info['server_version']}, pgvector {info['pgvector_version']}; "
              f"{args.rows} memories, {len(queries)} queries, {args.rounds} rounds; "
              f"{args.before} vs the working tree vs the same statements on dedicated "
              "connections; p50 (median of the rounds' p50s), ratios with the lowest and "
              "highest round's\n")

        print("LongTermMemory.search, top 10, native index, ef_search 40")
        raw = raw_connections(url, DEFAULT_EF_SEARCH)
        for cache_size in (1000, 0):
            inputs = list(zip(queries, recorded(
                url, cache_size, lambda s, v: s.search(embedding=v, limit=10), queries)))
            with old.LongTermMemory(url, cache_size=cache_size) as before, \
                    LongTermMemory(url, cache_size=cache_size) as now:
                for vector in queries[:20]:  # warm up; then every query is new to the cache
                    before.search(embedding=-vector, limit=10)
                    now.search(embedding=-vector, limit=10)
                side_by_side(f"cache {'on' if cache_size else 'off'}", inputs, {
                    "before": lambda p, s=before: s.search(embedding=p[0], limit=10),
                    "now": lambda p, s=now: s.search(embedding=p[0], limit=10),
                    **{label: replaying(conn) for label, conn in raw.items()}},
                    args.rounds, before_round=lambda: (before._cache.clear(),
                                                       now._cache.clear()))
        for conn in raw.values():
            conn.close()

        print("\nsearch_vector_bm25 (the default recall's search), top 20, cache on")
        raw = raw_connections(url, SESSION_EF_SEARCH)
        pairs = list(zip(texts, queries))
        inputs = list(zip(pairs, recorded(
            url, 1000, lambda s, p: s.search_vector_bm25(query=p[0], embedding=p[1]), pairs)))
        with old.LongTermMemory(url) as before, LongTermMemory(url) as now:
            for text, vector in pairs[:20]:
                before.search_vector_bm25(query=text + " warm", embedding=vector)
                now.search_vector_bm25(query=text + " warm", embedding=vector)
            side_by_side("search_vector_bm25", inputs, {
                "before": lambda p, s=before: s.search_vector_bm25(query=p[0][0],
                                                                   embedding=p[0][1]),
                "now": lambda p, s=now: s.search_vector_bm25(query=p[0][0], embedding=p[0][1]),
                **{label: replaying(conn) for label, conn in raw.items()}},
                args.rounds, before_round=lambda: (before._cache.clear(), now._cache.clear()))

        print("\nHTM.recall with its defaults (vector_bm25, writes behind, cache on)")
        embedder = Lookup(texts, title_vectors)

        inputs = list(zip(texts[20:], recorded(
            url, 1000, lambda htm, text: htm.recall(text), texts[20:],
            wrap=lambda store: HTM("bench-capture", store=store, embedder=embedder))))
        with old.LongTermMemory(url) as before, LongTermMemory(url) as now, \
                old.HTM("bench-before", store=before, embedder=embedder) as htm_before, \
                HTM("bench-now", store=now, embedder=embedder) as htm_now:
            for text in texts[:20]:
                htm_before.recall(text)
                htm_now.recall(text)
            side_by_side("HTM.recall", inputs, {
                "before": lambda p: htm_before.recall(p[0]),
                "now": lambda p: htm_now.recall(p[0]),
                **{label: (lambda p, c=conn: (embedder.embed(p[0]),
                                              replaying(c)(p)))
                   for label, conn in raw.items()}},
                args.rounds, before_round=lambda: (before._cache.clear(), now._cache.clear()))
        for conn in raw.values():
            conn.close()


if __name__ == "__main__":
    main()
