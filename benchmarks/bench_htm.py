"""What an agent's recall writes cost, measured side by side in one run on the real corpus.

1. The working-memory step of one recall (10 memories recalled and held, the previous 10
   evicted): ``LongTermMemory.update_working_memory`` (one transaction, each row rewritten
   once) vs the same step as the seed API's separate calls (``track_access``,
   ``mark_evicted``, ``mark_in_working_memory``, ``update_robot_activity``), interleaved.
   The same step written behind (``buffer_working_memory``): what the recall waits for, and
   the database time per step of the background flushes.
2. ``HTM.recall`` end to end, writing its step directly (``buffer_writes=False``) and
   behind (the default), each interleaved query by query with the search it runs (query
   vectors: the corpus's real MiniLM vectors, looked up instead of computed, so no model time
   is counted). ``HTM.remember`` one by one, ``remember_many`` in batches of 50, and where a
   remember's time goes (per statement, from the store's tracer).
3. All again after the reference schema's three indexes on access columns
   (``access_count``, ``last_accessed``, ``in_working_memory``) are dropped and ``nodes`` is
   given ``fillfactor = 90``: what a user can do to make recall writes HOT.

Usage: python benchmarks/bench_htm.py [--rows 10000] [--steps 150]
Uses the embedded server (or HTM_DBURL) in a scratch database that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time

import numpy as np
import psycopg

from htm_analytics import HTM, LongTermMemory, table_health
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url

PROVIDER, MODEL = "sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2"


class LookupEmbedder:
    """The corpus's precomputed MiniLM vectors, answered as the model that made them."""

    name, model, dimensions = PROVIDER, MODEL, 384

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self.vectors = dict(zip(texts, vectors))

    def embed(self, texts: str | list[str]) -> np.ndarray:
        if isinstance(texts, str):
            return self.vectors[texts]
        return np.stack([self.vectors[t] for t in texts])


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def recall_steps(ltm: LongTermMemory, robot: int, ids: list[int], steps: int
                 ) -> tuple[list[float], list[float]]:
    """Samples of one recall's writes: combined, and as separate calls (interleaved, each
    on its own ``10 * steps + 10`` memories)."""
    combined, separate = [], []
    size = 10 * steps + 10
    for step in range(1, steps + 1):
        for pool, samples in ((ids[:size], combined), (ids[size:2 * size], separate)):
            now, before = pool[10 * step:10 * step + 10], pool[10 * step - 10:10 * step]
            start = time.perf_counter()
            if samples is combined:
                ltm.update_working_memory(robot, recalled=now, held=now, evicted=before)
            else:
                ltm.track_access(now, robot_id=robot, event="recall")
                ltm.mark_evicted(before, robot_id=robot)
                ltm.mark_in_working_memory(now, robot_id=robot)
                ltm.update_robot_activity(robot)
            samples.append(time.perf_counter() - start)
    return combined, separate


def buffered_steps(ltm: LongTermMemory, robot: int, ids: list[int], steps: int
                   ) -> tuple[list[float], float]:
    """The same steps written behind: samples of what the caller waits for, and the
    database seconds per step of the flushes (background and final)."""
    buffer = ltm.recall_buffer
    seconds, flushed = buffer.flush_seconds, buffer.flushed_steps
    samples = []
    for step in range(1, steps + 1):
        now, before = ids[10 * step:10 * step + 10], ids[10 * step - 10:10 * step]
        start = time.perf_counter()
        ltm.buffer_working_memory(robot, recalled=now, held=now, evicted=before)
        samples.append(time.perf_counter() - start)
    ltm.flush_recall_writes()
    return samples, (buffer.flush_seconds - seconds) / (buffer.flushed_steps - flushed)


# What HTM.recall runs by default (docs/retrieval.md).
RECALL_STRATEGY = inspect.signature(HTM.recall).parameters["strategy"].default


def recall_vs_search(htm: HTM, titles: list[str]) -> tuple[list[float], list[float]]:
    """``htm.recall`` and the search it runs (its default strategy), interleaved title by
    title."""
    recalls, searches = [], []
    for title in titles:
        vector = htm.embedder.embed(title)
        start = time.perf_counter()
        htm.store.search_by_strategy(RECALL_STRATEGY, query=title, limit=10, embedding=vector)
        searches.append(time.perf_counter() - start)
        start = time.perf_counter()
        htm.recall(title, limit=10)
        recalls.append(time.perf_counter() - start)
    return recalls, searches


def remember_latency(htm: HTM, texts: list[str], batch: int = 50
                     ) -> tuple[list[float], list[float]]:
    """``remember`` per text, and ``remember_many`` per text in batches of ``batch``."""
    half = len(texts) // 2
    one_by_one = []
    for text in texts[:half]:
        start = time.perf_counter()
        htm.remember(text)
        one_by_one.append(time.perf_counter() - start)
    batched = []
    for first in range(half, len(texts), batch):
        chunk = texts[first:first + batch]
        start = time.perf_counter()
        htm.remember_many(chunk)
        batched.append((time.perf_counter() - start) / len(chunk))
    return one_by_one, batched


def remember_breakdown(url: str, embedder: LookupEmbedder, texts: list[str]) -> None:
    """Where one remember's time goes: the store's statements by their first words."""
    spent: dict[str, list[float]] = {}

    def collect(text: str, _params: object, seconds: float) -> None:
        key = " ".join(text.split()[:4])[:48]
        if "robots_touched" in key:  # the recall buffer's thread, not the remember's wait
            key = "(background flush of the working-memory steps)"
        spent.setdefault(key, []).append(seconds)

    with LongTermMemory(url, cache_size=0, tracer=collect) as traced, \
            HTM("agent", store=traced, embedder=embedder) as htm:
        spent.clear()
        start = time.perf_counter()
        for text in texts:
            htm.remember(text)
        total = (time.perf_counter() - start) / len(texts)
    print(f"  one remember ({total * 1000:.2f} ms on average), per statement (mean ms):")
    for key, samples in sorted(spent.items(), key=lambda kv: -sum(kv[1]))[:6]:
        print(f"    {sum(samples) / len(texts) * 1000:6.2f}  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()

    server = resolve_database_url()
    # About 5 % of the corpus repeats a description: read enough for distinct new texts.
    frame, vectors = read_corpus(rows=int((args.rows + 5 * args.steps + 100) * 1.2))
    frame = frame.drop_duplicates("content")
    vectors = vectors[frame.index.to_numpy()]
    loaded, extra = frame.iloc[: args.rows], frame.iloc[args.rows:]
    titles, title_vectors = read_dev_queries(rows=args.steps)
    embedder = LookupEmbedder(extra["content"].tolist() + titles["title"].tolist(),
                              np.concatenate([vectors[args.rows:], title_vectors]))
    with scratch_database(server, "htm_bench") as url, LongTermMemory(url, cache_size=0,
                                                                        init_schema=True) as ltm:
        info = ltm.server_info
        ltm.bulk_add(loaded["content"].tolist(), robots="agent",
                     embeddings=vectors[: args.rows], tags=loaded["tags"].tolist(),
                     embedding_model=(PROVIDER, MODEL))
        ltm.create_native_index(384)
        robot = ltm.register_robot("agent")
        ids = ltm.fetch_frame("SELECT id FROM nodes ORDER BY md5(id::text)")["id"].tolist()
        print(f"PostgreSQL {info['server_version']}, pgvector {info['pgvector_version']}; "
              f"{args.rows} memories (padded 2000-d HNSW + native 384-d HNSW), "
              f"{args.steps} steps\n")
        texts = iter(extra["content"].tolist())
        size = 10 * args.steps + 10
        for schema in ("reference schema", "access indexes dropped, fillfactor 90"):
            if schema != "reference schema":
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("DROP INDEX idx_nodes_access_count, "
                                 "idx_nodes_last_accessed, idx_nodes_in_working_memory")
                    conn.execute("ALTER TABLE nodes SET (fillfactor = 90)")
                    start = time.perf_counter()
                    conn.execute("VACUUM FULL nodes")  # rewrites pages with the free space
                    print(f"  (VACUUM FULL nodes, indexes rebuilt: "
                          f"{time.perf_counter() - start:.1f} s)\n")
                ids = ids[3 * size:]  # memories not yet touched
            combined, separate = recall_steps(ltm, robot, ids, args.steps)
            behind, flush_per_step = buffered_steps(ltm, robot, ids[2 * size:3 * size],
                                                    args.steps)
            titles_list = titles["title"].tolist()
            with HTM("agent", store=ltm, embedder=embedder, buffer_writes=False) as direct:
                direct_recalls, direct_searches = recall_vs_search(direct, titles_list)
            with HTM("agent", store=ltm, embedder=embedder) as htm:
                recalls, searches = recall_vs_search(htm, titles_list)
                one_by_one, batched = remember_latency(
                    htm, [next(texts) for _ in range(2 * args.steps)])
            print(schema)
            print(f"  one recall's writes: update_working_memory {p50_ms(combined):6.2f} ms,"
                  f" separate calls {p50_ms(separate):6.2f} ms, ratio "
                  f"{p50_ms(separate) / p50_ms(combined):.2f}x")
            print(f"  written behind: the recall waits {p50_ms(behind):6.3f} ms (p50); the "
                  f"flushes cost the database {flush_per_step * 1000:6.2f} ms per step "
                  f"(direct / behind {p50_ms(combined) / (flush_per_step * 1000):.2f}x)")
            print(f"  (HTM.recall runs {RECALL_STRATEGY}; its search is the same strategy "
                  "through the store)")
            print(f"  HTM.recall (top 10, p50), writes direct: {p50_ms(direct_recalls):6.2f} ms"
                  f" vs its search {p50_ms(direct_searches):5.2f} ms, ratio "
                  f"{p50_ms(direct_recalls) / p50_ms(direct_searches):.2f}x")
            print(f"  HTM.recall (top 10, p50), written behind: {p50_ms(recalls):6.2f} ms vs"
                  f" its search {p50_ms(searches):5.2f} ms, ratio "
                  f"{p50_ms(recalls) / p50_ms(searches):.2f}x "
                  f"(p95 {np.percentile(recalls, 95) * 1000:.2f} ms)")
            print(f"  HTM.remember {p50_ms(one_by_one):6.2f} ms (p50), remember_many "
                  f"{p50_ms(batched):6.2f} ms per memory in batches of 50, ratio "
                  f"{p50_ms(one_by_one) / p50_ms(batched):.1f}x")
            if schema == "reference schema":
                remember_breakdown(url, embedder, [next(texts) for _ in range(50)])
            nodes = table_health(ltm).set_index("table").loc["nodes"]
            print(f"  updates of nodes so far: {nodes['n_tup_upd']:,}, HOT "
                  f"{nodes['n_tup_hot_upd']:,}\n")


if __name__ == "__main__":
    main()
