"""The current gem's database as it writes it (timestamp columns without time zone, no
``embedding_dimension``, vectors padded to 2000), read by the toolkit: bare, and after
``init-db``. Side by side in one run:

1. ``fulltext_any`` and ``vector_bm25`` (recall's default), top 10, on the bare database as
   the tables' owner (document frequencies from the statistics of the seed's full-text index),
   as a SELECT-only role (which may not see those statistics: matches counted through the
   index, capped), and after ``init-db`` (stored vectors and their statistics).
2. Streaming the nodes out (``iter_table_chunks``, what snapshots read) where the dimension is
   derived from each vector, against the same rows with ``embedding_dimension`` written.
3. Vector search through a native 384-d index whose predicate is the derived dimension,
   against the 2000-d HNSW index.

Usage: python benchmarks/bench_gem_written.py [--rows 10000] [--queries 100]
Uses the embedded server (or HTM_DBURL) in scratch databases dropped afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import make_conninfo

from htm_analytics import LongTermMemory
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url

# The gem's tables as its Sequel migrations create them: timestamp columns without time zone.
SCHEMA = Path(__file__).resolve().parents[1] / "tests" / "sql" / "gem_0032_schema.sql"


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def load_as_the_gem(url: str, contents: list[str], vectors: np.ndarray) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA.read_text().replace(
            "timestamptz", "timestamp without time zone").encode())
        register_vector(conn)
        padded = np.zeros((len(vectors), 2000), dtype=np.float32)
        padded[:, :vectors.shape[1]] = vectors
        with conn.cursor() as cur, cur.copy(
                "COPY nodes (content, content_hash, token_count, embedding) "
                "FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["text", "varchar", "int4", "vector"])
            for text, vector in zip(contents, padded):
                copy.write_row((text, hashlib.sha256(text.encode()).hexdigest(),
                                len(text.split()), vector))
        conn.execute("VACUUM ANALYZE nodes")


def timed(samples: list[float], call: Callable[[], Any]) -> None:
    started = time.perf_counter()
    call()
    samples.append(time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    frame, vectors = read_corpus(rows=int(args.rows * 1.2))
    assert vectors is not None
    frame = frame.drop_duplicates("content").iloc[:args.rows]
    vectors = vectors[frame.index.to_numpy()]
    contents = frame["content"].tolist()
    queries, query_vectors = read_dev_queries()
    texts = queries["title"].tolist()[:args.queries]
    server = resolve_database_url()
    reader = f"htm_bench_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(reader)))
    try:
        with scratch_database(server, "htm_bench_gem", template=None) as bare_url, \
                scratch_database(server, "htm_bench_gem_added", template=None) as added_url:
            for url in (bare_url, added_url):
                load_as_the_gem(url, contents, vectors)
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}")
                                 .format(sql.Identifier(reader)))
            LongTermMemory(added_url, init_schema=True).close()
            with psycopg.connect(added_url, autocommit=True) as conn:
                conn.execute("ANALYZE")
            print(f"{len(contents)} memories written as the current gem writes them; "
                  f"{len(texts)} dev queries\n")
            stores = {"bare, owner": LongTermMemory(bare_url, cache_size=0, pool_size=1),
                      "bare, SELECT-only role": LongTermMemory(
                          make_conninfo(bare_url, user=reader), cache_size=0, pool_size=1),
                      "after init-db": LongTermMemory(added_url, cache_size=0, pool_size=1)}
            times: dict[str, dict[str, list[float]]] = {
                n: {"fulltext_any": [], "vector_bm25": []} for n in stores}
            for i, text in enumerate(texts):
                for name, store in stores.items():
                    for strategy in ("fulltext_any", "vector_bm25"):
                        timed(times[name][strategy],
                              lambda s=store, t=text, st=strategy, q=query_vectors[i]:
                              s.search_by_strategy(st, query=t, limit=10, embedding=q))
            print("search, top 10, p50")
            base = times["after init-db"]
            for name in stores:
                cells = []
                for strategy in ("fulltext_any", "vector_bm25"):
                    took, ratio = p50_ms(times[name][strategy]), \
                        p50_ms(times[name][strategy]) / p50_ms(base[strategy])
                    cells.append(f"{strategy} {took:6.2f} ms ({ratio:.2f}x)")
                print(f"  {name:24s} " + "  ".join(cells))

            exports: dict[str, list[float]] = {"derived": [], "recorded": []}
            store = stores["bare, owner"]
            with psycopg.connect(added_url, autocommit=True) as conn:
                conn.execute("UPDATE nodes SET embedding_dimension = 384")
                conn.execute("VACUUM ANALYZE nodes")
            for run in range(3):
                for name in ("derived", "recorded") if run % 2 else ("recorded", "derived"):
                    source = store if name == "derived" else stores["after init-db"]
                    timed(exports[name], lambda s=source: sum(
                        len(c) for c in s.iter_table_chunks("nodes")))
            print(f"\nstreaming {len(contents)} nodes out (iter_table_chunks), p50: "
                  f"dimension derived {p50_ms(exports['derived']):.0f} ms, recorded "
                  f"{p50_ms(exports['recorded']):.0f} ms "
                  f"({p50_ms(exports['derived']) / p50_ms(exports['recorded']):.2f}x)")

            started = time.perf_counter()
            with LongTermMemory(bare_url) as owner:
                owner.create_native_index(384)
            built = time.perf_counter() - started
            vector: dict[str, list[float]] = {"padded 2000-d": [], "native 384-d": []}
            padded_store = stores["bare, owner"]  # opened before the index: does not use it
            native_store = LongTermMemory(bare_url, cache_size=0, pool_size=1)
            for q in query_vectors[:len(texts)]:
                timed(vector["padded 2000-d"],
                      lambda q=q: padded_store.search(embedding=q, limit=10))
                timed(vector["native 384-d"],
                      lambda q=q: native_store.search(embedding=q, limit=10))
            print(f"\nnative 384-d index on the derived dimension: built in {built:.1f} s; "
                  f"vector search p50 {p50_ms(vector['native 384-d']):.2f} ms against "
                  f"{p50_ms(vector['padded 2000-d']):.2f} ms on the 2000-d index")
            for store in [*stores.values(), native_store]:
                store.close()
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(reader)))


if __name__ == "__main__":
    main()
