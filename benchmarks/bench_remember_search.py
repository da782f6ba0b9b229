"""An agent's loop, remember then search, before and after, side by side on one memory.

Usage: HTM_CORPUS_DIR=... python benchmarks/bench_remember_search.py [--rows 50000]
       [--steps 100] [--repeat 2] [--before REVISION] [--database URL]

Loads ``--rows`` corpus memories (MiniLM vectors, their model recorded) into a scratch
database (or takes the memory at ``--database``, such as one ``bench_scale.py --keep`` built,
and remembers into it corpus texts marked as new), then, alternately with the store of
``--before`` (imported from git beside this checkout) and of this checkout, ``--steps``
times: remembers a new corpus text with its vector, then runs the default search
(``vector_bm25``, top 10) for a dev query, timing the search. A vector search checks the
query against the stored vectors' models, which a store reads once; before, each remember of
a vector made the next search read them again (a scan of every memory). Prints the median
search after a remember for each version, their ratio, and the median of a search with no
remember before it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_versions import import_revision

import htm_analytics as ha
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import resolve_database_url, scratch_database

PROVIDER, MODEL = "sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2"


def searches_after_remembers(module: Any, url: str, name: str, texts: Any,
                             queries: list[tuple[str, Any]]) -> tuple[list[float], list[float]]:
    """Seconds of each search that follows a remember, and of each that follows a search."""
    after_remember: list[float] = []
    after_search: list[float] = []
    with module.LongTermMemory(url, cache_size=0) as store:
        robot = store.register_robot(f"agent-{name}")
        store.search_vector_bm25(query=queries[0][0], embedding=queries[0][1])
        for query, vector in queries:
            text, text_vector = next(texts)
            store.add(content=text, robot_id=robot, embedding=text_vector,
                      embedding_model=(PROVIDER, MODEL))
            for times in (after_remember, after_search):
                started = time.perf_counter()
                store.search_vector_bm25(query=query, embedding=vector)
                times.append(time.perf_counter() - started)
    return after_remember, after_search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000, help="memories loaded first")
    parser.add_argument("--steps", type=int, default=100, help="remembers per run")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each version")
    parser.add_argument("--before", default="db1bc25", help="the earlier revision")
    parser.add_argument("--database", help="a memory to remember into instead of a new one")
    args = parser.parse_args()
    loaded = 0 if args.database else args.rows
    needed = loaded + 2 * args.repeat * args.steps
    frame, vectors = read_corpus(rows=int(needed * 1.1) + 100)
    frame = frame.drop_duplicates("content")
    assert vectors is not None
    vectors = vectors[frame.index.to_numpy()]
    if len(frame) < needed:
        raise SystemExit(f"the corpus has {len(frame):,} distinct texts; {needed:,} needed")
    titles, title_vectors = read_dev_queries(rows=args.steps)
    queries = list(zip(titles["title"].tolist(), title_vectors))
    # In a memory built from the corpus, a corpus text is no new memory: mark it as one.
    new = [f"{text} (remembered by bench_remember_search {time.time_ns()})" if args.database
           else text for text in frame["content"].tolist()[loaded:]]
    texts = iter(zip(new, vectors[loaded:]))
    with tempfile.TemporaryDirectory() as folder, \
            scratch_database(resolve_database_url(), "htm_bench") as scratch:
        url = args.database or scratch
        versions = {"before": import_revision(args.before, Path(folder)), "after": ha}
        with ha.LongTermMemory(url, init_schema=not args.database) as store:
            if not args.database:
                store.bulk_add(frame["content"].tolist()[:loaded], robots="loader",
                               embeddings=vectors[:loaded], embedding_model=(PROVIDER, MODEL))
            info = store.server_info
            counts = store.table_counts()
            memories = dict(zip(counts["table"], counts["rows"]))["nodes"]
        print(f"PostgreSQL {info['server_version']}, pgvector {info['pgvector_version']}; "
              f"{memories:,} memories, {args.steps} remember-then-search steps per run, "
              f"{args.repeat} runs of each version, alternately")
        timed: dict[str, tuple[list[float], list[float]]] = {
            name: ([], []) for name in versions}
        for _ in range(args.repeat):
            for name, module in versions.items():
                for total, part in zip(timed[name], searches_after_remembers(
                        module, url, name, texts, queries)):
                    total.extend(part)
    p50 = {name: [statistics.median(t) * 1000 for t in times] for name, times in timed.items()}
    for name in versions:
        label = f"{name} ({args.before})" if name == "before" else name
        print(f"  {label:>18}: a search after a remember {p50[name][0]:7.2f} ms p50, "
              f"after a search {p50[name][1]:7.2f} ms p50")
    print(f"  a search after a remember: before / after {p50['before'][0] / p50['after'][0]:.2f}x")


if __name__ == "__main__":
    main()
