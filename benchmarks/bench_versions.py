"""The store of two revisions, measured side by side in one run on the same database.

The package of ``--before`` (any git revision) is extracted from git and imported under
another name, so both versions run in one process against one database: each query is timed
on the earlier store, then on the current one, alternately, so that load on the machine hits
both alike. Printed: p50 latency per operation and the ratio current / earlier.

Operations: vector search top 10 on the native 384-d index and on the padded one (two
stores, the native index added after the padded round), full-text search (every word and any
word), and the store calls of one recall step (``update_working_memory``).

Usage: python benchmarks/bench_versions.py --before 55e98ba [--rows 5000] [--queries 200]
Uses the embedded server (or HTM_DBURL) in a scratch database that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import importlib
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htm_analytics import LongTermMemory
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url

ROOT = Path(__file__).resolve().parents[1]


def import_revision(revision: str, folder: Path) -> Any:
    """The ``htm_analytics`` package of ``revision``, imported as ``htm_before``."""
    archive = subprocess.run(["git", "archive", revision, "htm_analytics"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "htm_analytics").rename(folder / "htm_before")
    # The earlier package must read its own SQL files, not the installed package's.
    for module in (folder / "htm_before").rglob("*.py"):
        source = module.read_text("utf-8")
        if 'files("htm_analytics")' in source:
            module.write_text(source.replace('files("htm_analytics")', 'files("htm_before")'),
                              "utf-8")
    sys.path.insert(0, str(folder))
    return importlib.import_module("htm_before")


def side_by_side(name: str, inputs: list[Any],
                 operations: tuple[Callable[[Any], object], ...]) -> None:
    samples: tuple[list[float], ...] = tuple([] for _ in operations)
    for item in inputs:
        for operation, times in zip(operations, samples):
            started = time.perf_counter()
            operation(item)
            times.append(time.perf_counter() - started)
    before, after = (statistics.median(times) * 1000 for times in samples)
    print(f"  {name:<34} before {before:7.2f} ms, now {after:7.2f} ms, "
          f"ratio {after / before:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="git revision to compare with")
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    old = import_revision(args.before, Path(tempfile.mkdtemp()))
    frame, vectors = read_corpus(rows=args.rows)
    titles, title_vectors = read_dev_queries(rows=args.queries)
    queries = list(title_vectors)
    texts = titles["title"].tolist()
    with scratch_database(resolve_database_url(), "htm_bench_versions") as url, \
            LongTermMemory(url, cache_size=0, init_schema=True) as now:
        now.bulk_add(frame["content"].tolist(), robots="agent", embeddings=vectors,
                     tags=frame["tags"].tolist())
        robot = now.register_robot("agent")
        ids = now.fetch_frame("SELECT id FROM nodes ORDER BY id")["id"].tolist()
        print(f"{args.before} vs the working tree; {len(ids)} memories, {len(queries)} "
              f"queries, p50 of each\n")
        for label, native in (("padded 2000-d", False), ("native 384-d", True)):
            if native:
                now.create_native_index(384)
            with old.LongTermMemory(url, cache_size=0) as before:
                print(f"vector index: {label}")
                side_by_side("search (top 10)", queries, (
                    lambda v, b=before: b.search(embedding=v, limit=10),
                    lambda v: now.search(embedding=v, limit=10)))
                if native:
                    for match in ("all", "any"):
                        side_by_side(f"search_fulltext (match={match})", texts, (
                            lambda t, m=match, b=before: b.search_fulltext(query=t, match=m),
                            lambda t, m=match: now.search_fulltext(query=t, match=m)))
                    # Each version walks its own chain of memories: recall 10, evict the
                    # 10 it recalled the step before (the same writes on both sides).
                    half = min(len(ids) // 2, 10 * (len(queries) + 1))
                    chains = ids[:half], ids[half:2 * half]
                    steps = list(range(1, half // 10))
                    side_by_side("update_working_memory (10 rows)", steps, tuple(
                        lambda k, store=store, chain=chain: store.update_working_memory(
                            robot, recalled=chain[10 * k:10 * k + 10],
                            held=chain[10 * k:10 * k + 10],
                            evicted=chain[10 * k - 10:10 * k])
                        for store, chain in zip((before, now), chains)))


if __name__ == "__main__":
    main()
