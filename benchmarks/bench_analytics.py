"""Analysis helpers on the whole corpus, live (PostgreSQL) and from a DuckDB snapshot, side by
side.

Usage: python benchmarks/bench_analytics.py   (needs the htm_bench_corpus database made by
benchmarks/bench_recall.py)
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import htm_analytics as ha
from htm_analytics.store import with_database
from htm_analytics.store.connection import resolve_database_url

CASES = [
    ("tag_cooccurrence", ha.tag_cooccurrence, {}),
    ("tag_cooccurrence level=1", ha.tag_cooccurrence, {"level": 1}),
    ("tag_hierarchy", ha.tag_hierarchy, {}),
    ("popular_tags freq=M", ha.popular_tags, {"freq": "M"}),
    ("remember_trends W", ha.remember_trends, {"freq": "W"}),
    ("remember_trends W by robot", ha.remember_trends, {"freq": "W", "by": "robot"}),
    ("remember_count_distribution", ha.remember_count_distribution, {}),
    ("robot_overlap", ha.robot_overlap, {}),
    ("robot_activity", ha.robot_activity, {}),
]


def best_of(function, source, options, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function(source, **options)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    url = with_database(resolve_database_url(), "htm_bench_corpus")
    with ha.LongTermMemory(url, cache_size=0) as store:
        counts = store.table_counts().set_index("table")["rows"]
        print(f"{counts['nodes']} nodes, {counts['robot_nodes']} robot-node pairs, "
              f"{counts['node_tags']} node-tag links, {counts['memory_events']} events\n")
        folder = Path(tempfile.mkdtemp())
        started = time.perf_counter()
        ha.export_snapshot(store, folder / "corpus.duckdb")
        print(f"export_snapshot to DuckDB: {time.perf_counter() - started:.1f} s "
              f"({(folder / 'corpus.duckdb').stat().st_size / 2**20:.0f} MiB)\n")
        print(f"{'helper':32} {'PostgreSQL':>11} {'DuckDB':>9} {'ratio':>7}")
        with ha.Snapshot(folder / "corpus.duckdb") as snapshot:
            for name, function, options in CASES:
                live = best_of(function, store, options)
                offline = best_of(function, snapshot, options)
                print(f"{name:32} {live * 1000:9.0f} ms {offline * 1000:6.0f} ms "
                      f"{live / offline:6.1f}x")


if __name__ == "__main__":
    main()
