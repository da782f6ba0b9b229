"""Concurrent searches at the recommended ef_search: QPS and latency with 1, 2, 4 and 8 client
threads, each on its own pooled connection.

Usage: python benchmarks/bench_concurrency.py [--queries N] [--repeats N]

Runs on the demo memory (``htm_demo`` on the embedded server, or on HTM_DBURL's server;
created and loaded when missing). Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os

import htm_analytics as ha


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    with ha.LongTermMemory(ha.demo_database_url()) as store:
        advice = ha.recommend_ef_search(store, target_recall=0.95, k=10, queries=200)
        print(advice.evidence, "\n")
        sweep = ha.concurrency_sweep(store, ef_search=advice.ef_search or 40, k=10,
                                     threads=(1, 2, 4, 8), queries=options.queries,
                                     repeats=options.repeats)
    print(f"{os.cpu_count()} cores; {options.queries} queries x {options.repeats} repeats per "
          "thread count\n")
    print("| threads | QPS (spread) | speedup | p50 ms (spread) | p95 ms |\n"
          "|---|---|---|---|---|")
    for row in sweep.itertuples():
        print(f"| {row.threads} | {row.qps:,.0f} ({row.qps_spread:,.0f}) | {row.speedup:.2f}x | "
              f"{row.latency_p50_ms:.2f} ({row.latency_p50_spread_ms:.2f}) | "
              f"{row.latency_p95_ms:.2f} |")
    print(f"\nspread: max - min over the {options.repeats} repeats; "
          + ha.describe_concurrency(sweep))


if __name__ == "__main__":
    main()
