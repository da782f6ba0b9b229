"""The default recall search (``search_vector_bm25``) of two revisions, side by side.

Usage:
    HTM_CORPUS_DIR=/work/shared/data/debian-memories python benchmarks/bench_default_recall.py \
        --before 24b921d [--queries 300] [--rounds 3] [--conversations locomo10.zip \
        --conversation conv-42]

The package of ``--before`` is imported from git beside the working tree's
(``bench_versions.import_revision``), and both stores search the same database, query by
query, the order of the two alternating from one query to the next so that load on the
machine hits both alike. Each round prints p50 and p95 of both and the ratio of the p50s;
the last line gives the median ratio over the rounds with the lowest and highest.

- The corpus: the 60,326 memories of ``bench_retrieval.py``'s database (loaded by it on first
  use, kept), the first ``--queries`` dev-query titles with their MiniLM vectors.
- ``--conversations FILE``: one conversation of a benchmark file (LoCoMo: ``conv-42``, the
  first held-out one) replayed into a scratch database by ``evaluate_conversations``
  (``--embedder``, default minilm), its questions searched the same way; dropped at the end.
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
from bench_retrieval import corpus_database
from bench_versions import import_revision

import htm_analytics as ha
from htm_analytics.agent.datasets import read_dev_queries
from htm_analytics.store import drop_database, with_database
from htm_analytics.store.connection import resolve_database_url
from htm_analytics.tuning.conversation_formats import read_conversations


def alternating(name: str, queries: list[tuple[str, np.ndarray]],
                searches: dict[str, Callable[[str, np.ndarray], object]], rounds: int) -> None:
    """Time every query with each search, the first one alternating query by query."""
    labels = list(searches)
    ratios = []
    print(f"  {name} ({len(queries)} queries x {rounds} rounds)")
    for round_number in range(1, rounds + 1):
        times: dict[str, list[float]] = {label: [] for label in labels}
        for i, (text, vector) in enumerate(queries):
            for label in labels if i % 2 == 0 else labels[::-1]:
                started = time.perf_counter()
                searches[label](text, vector)
                times[label].append((time.perf_counter() - started) * 1000)
        p50 = {label: statistics.median(values) for label, values in times.items()}
        ratios.append(p50[labels[1]] / p50[labels[0]])
        print("    round " + str(round_number) + ": " + "; ".join(
            f"{label} p50 {p50[label]:.2f} ms, p95 {np.percentile(times[label], 95):.2f} ms"
            for label in labels) + f"; {labels[1]}/{labels[0]} {ratios[-1]:.2f}x")
    print(f"    {labels[1]}/{labels[0]}: {statistics.median(ratios):.2f}x "
          f"({min(ratios):.2f}-{max(ratios):.2f} over {rounds} rounds)")


def compare(url: str, old: Any, name: str, queries: list[tuple[str, np.ndarray]],
            rounds: int) -> None:
    with old.LongTermMemory(url, cache_size=0) as before, \
            ha.LongTermMemory(url, cache_size=0) as now:
        for store in (before, now):  # warm both: plans, connections, the index's pages
            for text, vector in queries[:20]:
                store.search_vector_bm25(query=text, embedding=vector, limit=10)
        alternating(name, queries, {
            "before": lambda t, v: before.search_vector_bm25(query=t, embedding=v, limit=10),
            "now": lambda t, v: now.search_vector_bm25(query=t, embedding=v, limit=10)},
            rounds)


def conversation_queries(path: str, conversation: str, embedder_name: str
                         ) -> tuple[str, list[tuple[str, np.ndarray]]]:
    """A kept scratch database holding one replayed conversation, and its questions."""
    (chosen,) = [c for c in read_conversations(path) if c.conversation_id == conversation]
    embedder = ha.get_embedder(embedder_name)
    result = ha.evaluate_conversations([chosen], strategies=["vector_bm25"],
                                       embedding_service=embedder, keep=True, progress=False)
    questions = [q.question for q in chosen.questions if not q.abstention]
    vectors = np.asarray(embedder.embed(questions), dtype=np.float32)
    database = result.conversations["database"].iloc[0]
    return str(database), list(zip(questions, vectors))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare with")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conversations", help="a conversation benchmark file")
    parser.add_argument("--conversation", default="conv-42")
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    old = import_revision(args.before, Path(tempfile.mkdtemp()))
    server = resolve_database_url()
    titles, vectors = read_dev_queries(rows=args.queries)
    url = corpus_database(server, reload=False)
    print(f"search_vector_bm25, {args.before} (before) and the working tree (now), "
          "alternating query by query, cache off")
    compare(url, old, "corpus titles", list(zip(titles["title"], vectors)), args.rounds)
    if args.conversations:
        database, queries = conversation_queries(args.conversations, args.conversation,
                                                 args.embedder)
        try:
            compare(with_database(server, database), old, args.conversation, queries,
                    args.rounds)
        finally:
            drop_database(server, database)


if __name__ == "__main__":
    main()
