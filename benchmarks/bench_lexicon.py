"""What the fuzzy-search lexicon costs writers, side by side in one run.

Two fresh databases per round, one with the lexicon's insert trigger (migration 009) and one
without it; in each, ``bulk_add`` of 5,000 corpus rows into a table whose indexes are kept
(not deferred) and then 300 single ``add`` calls. Rounds alternate, so that load on the
machine hits both alike.

Usage: python benchmarks/bench_lexicon.py [--rows 5000] [--adds 300] [--rounds 2]
Uses the embedded server (or HTM_DBURL) in scratch databases that are dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from htm_analytics import LongTermMemory
from htm_analytics.agent.datasets import read_corpus
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url


def measure(server: str, contents: list[str], vectors: object, extra: list[str], *,
            lexicon: bool) -> tuple[float, float]:
    """Seconds of the bulk load, and seconds per single add."""
    with scratch_database(server, "htm_bench_lexicon") as url, \
            LongTermMemory(url, init_schema=True) as store:
        if not lexicon:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP TRIGGER htm_analytics_lexicon ON nodes")
        started = time.perf_counter()
        store.bulk_add(contents, robots="loader", embeddings=vectors, defer_indexes=False)
        bulk = time.perf_counter() - started
        robot = store.register_robot("writer")
        started = time.perf_counter()
        for text in extra:
            store.add(content=text, robot_id=robot)
        return bulk, (time.perf_counter() - started) / len(extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--adds", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    frame, vectors = read_corpus(rows=args.rows + args.adds)
    contents = frame["content"].iloc[:args.rows].tolist()
    extra = frame["content"].iloc[args.rows:].tolist()
    server = resolve_database_url()
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(args.rounds):
        for lexicon in (True, False):
            results[lexicon].append(measure(server, contents, vectors[:args.rows], extra,
                                            lexicon=lexicon))
    medians = {lexicon: (statistics.median(b for b, _ in runs),
                         statistics.median(a for _, a in runs))
               for lexicon, runs in results.items()}
    for lexicon, (bulk, add) in medians.items():
        print(f"lexicon {'on ' if lexicon else 'off'}: bulk_add of {args.rows} rows "
              f"{bulk:5.1f} s, add {add * 1000:5.2f} ms per memory (medians of {args.rounds})")
    (bulk_on, add_on), (bulk_off, add_off) = medians[True], medians[False]
    print(f"ratio on/off: bulk_add {bulk_on / bulk_off:.2f}x, add {add_on / add_off:.2f}x")


if __name__ == "__main__":
    main()
