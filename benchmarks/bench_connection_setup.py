"""A new connection of the store, before and after, against a bare ``psycopg.connect``.

The pool opens connections in its own thread (the first, one more while callers wait, one
to replace a connection the server lost) and searches open their own. Each is opened as the
store's pool opens it (the pool's ``kwargs``, then the store's ``configure`` hook), for the
store of ``--before`` (a git revision) and of the working tree, and as a bare connection with
nothing set up: the floor. The three run in turn, ``--connections`` times, in a rotated
order. Printed: the median of each and the ratios.

Usage: python benchmarks/bench_connection_setup.py --before 56da4de [--connections 500].
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

import psycopg
from bench_versions import import_revision

from htm_analytics import LongTermMemory
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url


def opener(url: str, store: Any) -> Callable[[], None]:
    """Open and close one connection the way ``store``'s pool does."""
    def run() -> None:
        conn = psycopg.connect(url, **(store._pool.kwargs or {}))
        store._configure_connection(conn)
        conn.close()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare with")
    parser.add_argument("--connections", type=int, default=500)
    args = parser.parse_args()
    old = import_revision(args.before, Path(tempfile.mkdtemp()))
    with scratch_database(resolve_database_url(), "htm_bench_connect") as url, \
            LongTermMemory(url, init_schema=True) as now, old.LongTermMemory(url) as before:
        info = now.server_info
        operations = {f"store at {args.before}": opener(url, before),
                      "store, working tree": opener(url, now),
                      "bare psycopg.connect": lambda: psycopg.connect(url).close()}
        times: dict[str, list[float]] = {name: [] for name in operations}
        names = list(operations)
        for i in range(args.connections):
            for name in names[i % 3:] + names[:i % 3]:
                started = time.perf_counter()
                operations[name]()
                times[name].append(time.perf_counter() - started)
    print(f"PostgreSQL {info['server_version']}, pgvector {info['pgvector_version']}; "
          f"{args.connections} connections each, opened and closed; medians\n")
    medians = {name: statistics.median(values) * 1000 for name, values in times.items()}
    bare = medians["bare psycopg.connect"]
    for name, ms in medians.items():
        print(f"  {name:<28} {ms:7.2f} ms   {ms / bare:5.2f}x bare")
    earlier, current = medians[names[0]], medians[names[1]]
    print(f"\n  working tree vs {args.before}: {earlier / current:.2f}x faster "
          f"({earlier - current:.2f} ms less per connection)")


if __name__ == "__main__":
    main()
