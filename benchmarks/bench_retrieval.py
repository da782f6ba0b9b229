"""Retrieval quality and latency of every search strategy on the full corpus, side by side.

Usage: python benchmarks/bench_retrieval.py [--queries 1000] [--fuzzy 50] [--out docs/benchmarks]

The 60,326 distinct corpus memories (one robot, with their tags and MiniLM vectors, native
384-d HNSW index) are loaded once into the database ``htm_bench_retrieval`` on the embedded
server (or on HTM_DBURL's server) and reused by later runs; ``--reload`` starts over,
``--drop`` removes it. Queries are the first N dev-queries (a package's title; its
description is the one relevant memory), run through the toolkit's own API
(``LongTermMemory.search_by_strategy``, cache off) by ``htm_analytics.evaluate_retrieval``.
Exact dense search (numpy over every stored vector) is printed as the ceiling of the vector
arm.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

import htm_analytics as ha
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import drop_database, ensure_database
from htm_analytics.store.connection import mask_url, resolve_database_url

matplotlib.use("Agg")
DATABASE = "htm_bench_retrieval"
STRATEGIES = ["vector", "fulltext", "fulltext_any", "hybrid", "rrf", "vector_bm25"]


def corpus_database(server: str, *, reload: bool) -> str:
    url = ensure_database(server, DATABASE, fresh=reload)
    with ha.LongTermMemory(url, init_schema=True) as store:
        if store.table_counts().set_index("table").loc["nodes", "rows"] == 0:
            frame, vectors = read_corpus()
            started = time.perf_counter()
            store.bulk_add(frame["content"].tolist(), robots="debian", embeddings=vectors,
                           tags=frame["tags"].tolist(),
                           embedding_model=("sentence-transformers",
                                            "sentence-transformers/all-MiniLM-L6-v2"))
            print(f"loaded {len(frame)} corpus rows in {time.perf_counter() - started:.0f} s")
        if 384 not in store.native_dimensions:
            store.create_native_index(384)
    return url


def exact_dense(store: ha.LongTermMemory, queries: pd.DataFrame, k: int) -> dict[str, float]:
    """Recall@k and MRR@k of an exact cosine scan over every stored vector (numpy)."""
    frame, vectors = read_corpus()
    ids = np.asarray(store.node_ids_by_content(frame["content"].tolist()), dtype=np.int64)
    node_ids, first = np.unique(ids, return_index=True)
    matrix = vectors[first] / np.linalg.norm(vectors[first], axis=1, keepdims=True)
    query_vectors = np.stack(queries["vector"])
    ranks = []
    for vector, answer in zip(query_vectors, queries["relevant"]):
        scores = matrix @ vector
        top = node_ids[np.argsort(-scores)[:k]].tolist()
        ranks.append(top.index(answer) + 1 if answer in top else 0)
    found = np.asarray(ranks)
    return {"recall": float((found > 0).mean()),
            "mrr": float(np.where(found > 0, 1 / np.maximum(found, 1), 0).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--fuzzy", type=int, default=10,
                        help="queries for the (slow) fuzzy strategy; 0 skips it")
    parser.add_argument("--strategies", default=",".join(STRATEGIES),
                        help="comma-separated strategies of the main table")
    parser.add_argument("--reload", action="store_true")
    parser.add_argument("--drop", action="store_true", help="drop the database and exit")
    parser.add_argument("--out", default="docs/benchmarks")
    args = parser.parse_args()
    server = resolve_database_url()
    if args.drop:
        drop_database(server, DATABASE)
        print(f"dropped {DATABASE}")
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    url = corpus_database(server, reload=args.reload)
    frame, _ = read_corpus(embeddings=False)
    titles, title_vectors = read_dev_queries(rows=args.queries)
    with ha.LongTermMemory(url, pool_size=1, cache_size=0) as store:
        counts = store.table_counts().set_index("table")["rows"]
        print(f"{mask_url(url)}: PostgreSQL {store.server_info['server_version']}, pgvector "
              f"{store.server_info['pgvector_version']}; {counts['nodes']} memories, "
              f"{len(titles)} queries, k=10, cache off")
        relevant = store.node_ids_by_content(frame["content"].iloc[titles["row"]].tolist())
        queries = pd.DataFrame({"query": titles["title"], "relevant": relevant,
                                "vector": list(title_vectors)})
        started = time.perf_counter()
        strategies = [name for name in args.strategies.split(",") if name]
        result = ha.evaluate_retrieval(store, queries, strategies=strategies, k=10)
        print(f"\n## every strategy, one run ({time.perf_counter() - started:.0f} s)\n")
        print(result.summary.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        result.summary.to_csv(out / "retrieval.csv", index=False)
        result.per_query.to_csv(out / "retrieval-per-query.csv", index=False)
        significant = result.significance.query("strategy_b == 'vector_bm25' or "
                                                "strategy_a == 'vector_bm25'")
        print("\n## paired t-tests against vector_bm25 (Holm-corrected)\n")
        print(significant.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        dense = exact_dense(store, queries, 10)
        print(f"\nexact dense (numpy, every vector): recall@10 {dense['recall']:.3f}, "
              f"MRR@10 {dense['mrr']:.3f}")
        if args.fuzzy:
            started = time.perf_counter()
            fuzzy = ha.evaluate_retrieval(store, queries.head(args.fuzzy), strategies=["fuzzy"],
                                          k=10).summary
            print(f"\n## fuzzy through the lexicon, first {args.fuzzy} queries "
                  f"({time.perf_counter() - started:.0f} s)\n")
            print(fuzzy.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            exhaustive = []
            for text in titles["title"].head(min(args.fuzzy, 5)):
                started = time.perf_counter()
                store.search_fuzzy(query=text, limit=10, exhaustive=True)
                exhaustive.append(time.perf_counter() - started)
            print(f"fuzzy scoring every memory the trigram index lets through (exhaustive=True),"
                  f" first {len(exhaustive)} queries: p50 {np.median(exhaustive) * 1000:.0f} ms")
        ax = ha.plot_retrieval(result.summary)
        ax.figure.savefig(out / "retrieval.png", dpi=110)


if __name__ == "__main__":
    main()
