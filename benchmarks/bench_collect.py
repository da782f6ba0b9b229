"""``htm-analytics collect`` on the whole corpus: the time of one sample, its parts, and the
spread over repeats (the issue asks for seconds).

Usage: python benchmarks/bench_collect.py [--rows N] [--repeats 5] [--recall-queries 200]
                                          [--logged 200]

Uses the database ``htm_bench_corpus`` of bench_recall.py (made on first use); the history
goes to a temporary DuckDB file. ``--logged N`` first fills the query log (migration 011) with
up to N of the corpus's dev queries' real MiniLM vectors, so that collect also measures recall
on logged questions, in the same read of the stored vectors; the sampled recall is timed with
and without them, side by side.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench_recall import corpus_database

import htm_analytics as ha
from htm_analytics.advisor.collect import _sampled_recall
from htm_analytics.agent.datasets import read_dev_queries
from htm_analytics.store.connection import resolve_database_url


def timed(repeats: int, call) -> list[float]:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return seconds


def show(name: str, seconds: list[float]) -> None:
    print(f"{name:<34} median {statistics.median(seconds):6.2f} s  min {min(seconds):6.2f}  "
          f"max {max(seconds):6.2f}  ({len(seconds)} runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="corpus rows (default: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--logged", type=int, default=200)
    args = parser.parse_args()
    url = corpus_database(resolve_database_url(), args.rows, False)
    with ha.LongTermMemory(url) as writer:  # the query log: real questions' vectors
        have = writer.logged_query_vectors(384)
        missing = args.logged - (len(have[0]) if have is not None else 0)
        if missing > 0 and writer.logs_query_vectors:
            _, vectors = read_dev_queries(rows=missing)
            for vector in vectors:
                writer.log_query_vector(vector)
    with ha.LongTermMemory(url, read_only=True, cache_size=0) as store, \
            tempfile.TemporaryDirectory() as folder:
        counts = store.table_counts().set_index("table")["rows"]
        print(f"PostgreSQL {store.server_info['server_version']}; {counts['nodes']:,} memories")
        path = Path(folder) / "history.duckdb"
        ef = store.server_vitals()["ef_search"]
        show("collect (one sample, all parts)", timed(args.repeats, lambda: ha.collect_sample(
            store, path, recall_queries=args.recall_queries)))
        show("  vitals: server, tables, indexes", timed(args.repeats, lambda: (
            store.server_vitals(), store.relation_vitals(), store.table_counts())))
        show("  robots", timed(args.repeats, lambda: ha.robot_activity(store)))
        both, stored_only = [], []
        for _ in range(args.repeats):  # interleaved: with and without the logged queries
            both += timed(1, lambda: _sampled_recall(store, ef, args.recall_queries, 10, 0))
            stored_only += timed(1, lambda: _sampled_recall(
                store, ef, args.recall_queries, 10, 0, logged=False))
        show("  sampled recall, stored + logged", both)
        show("  sampled recall, stored only", stored_only)
        frames = ha.history(path)
        print(frames.recall[["sample_id", "recall", "recall_low", "recall_high",
                             "logged_queries", "logged_recall", "logged_recall_low",
                             "logged_recall_high"]].to_string(index=False))


if __name__ == "__main__":
    main()
