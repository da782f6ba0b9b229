"""What reading timestamps costs with infinities allowed, measured side by side in one run.

Reads the same ``--values`` timestamps (three columns of generated ``timestamptz`` rows) in
turn, ``--repeats`` times each, through psycopg's own loaders (compiled; they refuse
``infinity``) and through the store's (``store.timestamps.register_infinite_timestamps``:
they pass every finite value to psycopg's), in text and in binary, each from the statement
to the rows. Prints the medians and their ratio.

Usage: python benchmarks/bench_timestamps.py [--values 900000] [--repeats 5]
Uses the embedded server (or HTM_DBURL); reads only generated rows.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from htm_analytics.store.connection import resolve_database_url
from htm_analytics.store.timestamps import register_infinite_timestamps

ROWS = """SELECT now() - make_interval(secs => i), now() - make_interval(mins => i),
                 now() - make_interval(hours => i)
          FROM generate_series(1, %(rows)s) AS i"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=900_000,
                        help="timestamps read per run (three columns)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = args.values // 3
    with psycopg.connect(resolve_database_url(None), autocommit=True) as plain, \
            psycopg.connect(resolve_database_url(None), autocommit=True) as ours:
        print(f"PostgreSQL {plain.info.server_version}, psycopg {psycopg.__version__} "
              f"({psycopg.pq.__impl__}); {rows * 3:,} values a run, {args.repeats} runs "
              "each, in turn")
        register_infinite_timestamps(ours)
        ways = {"psycopg's loaders": plain, "the store's (infinity allowed)": ours}
        for conn in ways.values():
            conn.execute("SET TimeZone = 'UTC'")
        for binary in (False, True):
            seconds: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(args.repeats):
                for name, conn in ways.items():
                    started = time.perf_counter()
                    with conn.cursor(binary=binary) as cur:
                        cur.execute(ROWS, {"rows": rows}).fetchall()
                    seconds[name].append(time.perf_counter() - started)
            medians = {name: statistics.median(runs) for name, runs in seconds.items()}
            base = medians["psycopg's loaders"]
            print(f"\n{'binary' if binary else 'text'}:")
            for name, median in medians.items():
                print(f"  {name:<32} {median:6.2f} s  {median / base:5.2f}x  "
                      f"({median / (rows * 3) * 1e6:.2f} us a value)")


if __name__ == "__main__":
    main()
