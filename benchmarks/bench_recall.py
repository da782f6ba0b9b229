"""HNSW tuning on the whole corpus: the default ef_search sweep, native vs padded index,
filtered searches with and without iterative scans, and index-build variants.

Usage: python benchmarks/bench_recall.py [--rows N] [--skip-build] [--out docs/benchmarks]

The corpus is loaded once (with a simulated history: five robots, 180 days, shared and
repeated remembers) into the database ``htm_bench_corpus`` on the embedded server (or on
HTM_DBURL's server) and reused by later runs; ``--reload`` starts over.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd

import htm_analytics as ha
from htm_analytics.agent.datasets import read_corpus, remember_history
from htm_analytics.store import ensure_database
from htm_analytics.store.connection import resolve_database_url

matplotlib.use("Agg")
DATABASE = "htm_bench_corpus"
END = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
SHOWN = ["filter", "iterative_scan", "ef_search", "recall_mean", "recall_p5", "latency_p50_ms",
         "latency_p95_ms", "qps", "returned_mean", "used_index"]


def corpus_database(server: str, rows: int | None, reload: bool) -> str:
    url = ensure_database(server, DATABASE, fresh=reload)
    with ha.LongTermMemory(url, init_schema=True) as store:
        if store.table_counts().set_index("table").loc["nodes", "rows"] == 0:
            frame, vectors = read_corpus(rows=rows)
            started = time.perf_counter()
            events = remember_history(store, frame, vectors, days=180, end=END, seed=0)
            print(f"loaded {len(frame)} corpus rows as {len(events)} remembers in "
                  f"{time.perf_counter() - started:.0f} s (bulk_add, padded HNSW build included)")
        if 384 not in store.native_dimensions:
            started = time.perf_counter()
            store.create_native_index(384)
            print(f"native 384-d HNSW index built in {time.perf_counter() - started:.1f} s")
    return url


def show(title: str, frame, seconds: float) -> None:
    print(f"\n## {title} ({seconds:.1f} s)\n")
    columns = [c for c in ["variant", "build_seconds", "index_bytes", *SHOWN] if c in frame]
    print(frame[columns].to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="corpus rows (default: all)")
    parser.add_argument("--reload", action="store_true")
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--out", default="docs/benchmarks")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    url = corpus_database(resolve_database_url(), args.rows, args.reload)
    with ha.LongTermMemory(url, pool_size=1, cache_size=0) as store:
        counts = store.table_counts().set_index("table")["rows"]
        print(f"PostgreSQL {store.server_info['server_version']}, pgvector "
              f"{store.server_info['pgvector_version']}; {counts['nodes']} nodes, "
              f"{counts['robot_nodes']} robot-node pairs")

        started = time.perf_counter()
        default = ha.benchmark_recall(store, progress=False, output=out / "recall-default.csv")
        show("default sweep, native 384-d index (500 queries x 6 settings x 3 repeats, "
             "ground truth included)", default, time.perf_counter() - started)

        started = time.perf_counter()
        padded = ha.benchmark_recall(store, padded_index=True, progress=False,
                                     output=out / "recall-padded.csv")
        show("same sweep, padded 2000-d index", padded, time.perf_counter() - started)
        for ef in (40, 160):
            n = default.set_index("ef_search").loc[ef]
            p = padded.set_index("ef_search").loc[ef]
            print(f"ef_search {ef}: p50 padded / native = "
                  f"{p['latency_p50_ms'] / n['latency_p50_ms']:.2f}x, "
                  f"recall {p['recall_mean']:.3f} vs {n['recall_mean']:.3f}")

        tags = ha.popular_tags(store, limit=None)
        tag = tags.loc[(tags["share"] > 0.03) & (tags["share"] < 0.06), "tag"].iloc[0]
        filters = [{"tag": tag}, {"robot": "planner"},
                   {"timeframe": (END - dt.timedelta(days=30), END)}]
        for force in (False, True):
            started = time.perf_counter()
            filtered = ha.benchmark_recall(
                store, queries=200, ef_search=(40, 160), repeats=1, filters=filters,
                iterative_scan=(None, "relaxed_order"), force_index=force, progress=False,
                output=out / f"recall-filtered{'-forced' if force else ''}.csv")
            show(f"filtered searches, 200 queries, force_index={force}", filtered,
                 time.perf_counter() - started)

        figure, axes = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
        both = ha.plot_recall_latency(pd.concat([default.assign(variant="native 384-d"),
                                                 padded.assign(variant="padded 2000-d")]),
                                      ax=axes[0])
        both.set_title("Recall vs QPS, full corpus")
        ha.plot_recall_by_ef(default, ax=axes[1])
        figure.savefig(out / "recall-latency.png", dpi=110)

        if not args.skip_build:
            started = time.perf_counter()
            build = ha.benchmark_index_build(store, progress=False,
                                             output=out / "index-build.csv")
            show(f"index build variants (maintenance_work_mem "
                 f"{build['maintenance_work_mem'].iloc[0]}, up to "
                 f"{build['max_parallel_maintenance_workers'].iloc[0]} parallel workers, "
                 "200 queries x 5 settings)",
                 build, time.perf_counter() - started)
            ax = ha.plot_recall_latency(build)
            ax.figure.savefig(out / "index-build.png", dpi=110)


if __name__ == "__main__":
    main()
