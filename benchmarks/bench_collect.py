"""``htm-analytics collect`` on the whole corpus: the time of one sample, its parts, and the
spread over repeats (the issue asks for seconds).

Usage: python benchmarks/bench_collect.py [--rows N] [--repeats 5] [--recall-queries 200]

Uses the database ``htm_bench_corpus`` of bench_recall.py (made on first use); the history
goes to a temporary DuckDB file.
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
    args = parser.parse_args()
    url = corpus_database(resolve_database_url(), args.rows, False)
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
        show(f"  sampled recall ({args.recall_queries} queries)", timed(
            args.repeats, lambda: _sampled_recall(store, ef, args.recall_queries, 10, 0)))
        frames = ha.history(path)
        print(frames.recall[["sample_id", "recall", "recall_low", "recall_high"]].to_string(
            index=False))


if __name__ == "__main__":
    main()
