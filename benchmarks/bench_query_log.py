"""What logging a recall's query vector costs (migration 011), measured side by side.

``HTM.recall`` with ``log_queries=1`` (every vector recall logs its query vector: one more
statement) against ``log_queries=0``, interleaved query by query over the demo's labelled
questions (their real MiniLM vectors, so no model time is counted), on a scratch copy of the
demo memory; and ``store.log_query_vector`` alone.

Usage: python benchmarks/bench_query_log.py [--rounds 3] [--questions 200]
Uses the demo memory (``htm_demo`` on the embedded server, or on HTM_DBURL's server; created
and loaded when missing), copied to a scratch database that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import time

import htm_analytics as ha
from htm_analytics.report.demo import DEMO_DATABASE, DemoQueryEmbedder
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--questions", type=int, default=200)
    options = parser.parse_args()
    ha.demo_database_url()  # loads the demo when missing
    embedder = DemoQueryEmbedder()
    with scratch_database(resolve_database_url(), "htm_bench_query_log",
                          template=DEMO_DATABASE) as url, \
            ha.LongTermMemory(url, cache_size=0) as store:
        assert store.logs_query_vectors, "the demo copy has the query log (init-db)"
        logging = ha.HTM("logs", store=store, embedder=embedder, log_queries=1)
        silent = ha.HTM("silent", store=store, embedder=embedder, log_queries=0)
        names = ("log_queries=1", "log_queries=0", "log_query_vector alone")
        rounds: list[dict[str, list[float]]] = []
        for topic in embedder.examples[:5]:  # warm up both paths
            logging.recall(topic)
            silent.recall(topic)
        vector = embedder.embed(embedder.examples[0])
        questions = embedder.examples[:options.questions]
        for _ in range(options.rounds):
            timings: dict[str, list[float]] = {name: [] for name in names}
            for topic in questions:
                for name, htm in (("log_queries=1", logging), ("log_queries=0", silent)):
                    started = time.perf_counter()
                    htm.recall(topic)
                    timings[name].append(time.perf_counter() - started)
                started = time.perf_counter()
                store.log_query_vector(vector)
                timings["log_query_vector alone"].append(time.perf_counter() - started)
            rounds.append(timings)
        logging.close()
        silent.close()
        logged = int(store.fetch_frame("SELECT count(*) AS n FROM memory_query_vectors")["n"][0])
    print(f"{len(questions)} demo questions x {options.rounds} rounds, interleaved; "
          f"{logged} rows in the log at the end (it keeps at most 1,000); spread: max - min of "
          "the rounds' medians\n")
    print("| call | p50 ms (spread) | p95 ms |\n|---|---|---|")
    medians = {name: [statistics.median(r[name]) * 1000 for r in rounds] for name in names}
    for name in names:
        ordered = sorted(t for r in rounds for t in r[name])
        print(f"| {name} | {statistics.median(ordered) * 1000:.2f} "
              f"({max(medians[name]) - min(medians[name]):.2f}) | "
              f"{ordered[int(0.95 * (len(ordered) - 1))] * 1000:.2f} |")
    ratios = [a / b for a, b in zip(medians["log_queries=1"], medians["log_queries=0"])]
    print(f"\nrecall p50 with every query logged / without, per round: "
          f"{', '.join(f'{r:.2f}x' for r in ratios)}")


if __name__ == "__main__":
    main()
