"""Store benchmarks, measured side by side in one run on the real corpus.

1. Loading: ``bulk_add`` (binary COPY + set-based SQL) vs one ``add`` per row, and vs a
   hand-written raw load of the same rows (binary COPY into ``nodes`` between dropping and
   recreating the same indexes, no dedup, robots, tags or events).
2. Vector search: ``LongTermMemory.search`` vs the same raw SQL on one psycopg connection,
   on the seed's padded 2000-d HNSW index and on a native 384-d index.
3. Full-text search: ``search_fulltext`` vs raw SQL.

Usage: python benchmarks/bench_store.py [--rows 10000] [--per-row 1000] [--queries 200]
Uses the embedded server (or HTM_DBURL) in a scratch database that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from htm_analytics import LongTermMemory
from htm_analytics.connection import resolve_database_url
from htm_analytics.datasets import read_corpus, read_dev_queries
from htm_analytics.store import scratch_database


def raw_load(url: str, contents: list[str], vectors: np.ndarray) -> float:
    """Seconds for the plainest fast load: drop the search indexes, binary COPY, recreate."""
    padded = np.zeros((len(vectors), 2000), dtype=np.float32)
    padded[:, : vectors.shape[1]] = vectors
    with psycopg.connect(url) as conn:
        register_vector(conn)
        start = time.perf_counter()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
            "AND tablename IN ('nodes', 'node_search_vectors') "
            "AND indexname IN ('idx_nodes_embedding', 'idx_nodes_content_gin', "
            "'idx_nodes_content_trgm', 'idx_node_search_vectors_content_tsv')").fetchall()
        for name, _ in indexes:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        with conn.cursor().copy("COPY nodes (content, content_hash, embedding, "
                                "embedding_dimension) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["text", "text", "vector", "int4"])
            for text, vector in zip(contents, padded):
                digest = hashlib.sha256(text.encode()).hexdigest()
                copy.write_row((text, digest, vector, vectors.shape[1]))
        for _, definition in indexes:
            conn.execute(definition)
        conn.commit()
        return time.perf_counter() - start


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(function, inputs) -> list[float]:
    samples = []
    for item in inputs:
        start = time.perf_counter()
        function(item)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--per-row", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    server = resolve_database_url()
    frame, vectors = read_corpus(rows=args.rows + args.per_row)
    bulk, extra = frame.iloc[: args.rows], frame.iloc[args.rows:]
    queries, query_vectors = read_dev_queries(rows=args.queries)
    with scratch_database(server, "htm_bench") as url, \
            LongTermMemory(url, cache_size=0, pool_size=2, init_schema=True) as ltm:
            info = ltm.server_info
            print(f"PostgreSQL {info['server_version']}, pgvector {info['pgvector_version']}; "
                  f"{args.rows} bulk rows, {args.per_row} per-row adds, "
                  f"{args.queries} queries\n")

            # 1. loading -------------------------------------------------------------------
            start = time.perf_counter()
            ltm.bulk_add(bulk["content"].tolist(), robots=bulk["maintainer"].tolist(),
                         embeddings=vectors[: args.rows], tags=bulk["tags"].tolist())
            bulk_seconds = time.perf_counter() - start
            robots = {name: ltm.register_robot(name) for name in extra["maintainer"].unique()}
            start = time.perf_counter()
            for (_, row), vector in zip(extra.iterrows(), vectors[args.rows:]):
                node = ltm.add(content=row["content"], robot_id=robots[row["maintainer"]],
                               embedding=vector)
                for tag in row["tags"]:
                    ltm.add_tag(node_id=node["node_id"], tag=tag)
            per_row_seconds = time.perf_counter() - start
            bulk_rate, row_rate = args.rows / bulk_seconds, args.per_row / per_row_seconds
            with scratch_database(server, "htm_bench_raw") as raw_url:
                LongTermMemory(raw_url, init_schema=True).close()  # the same schema, empty
                unique = bulk.drop_duplicates("content")
                raw_seconds = raw_load(raw_url, unique["content"].tolist(),
                                       vectors[: args.rows][unique.index.to_numpy()])
            raw_rate = len(unique) / raw_seconds
            print("loading (with tags, into a table with all seed indexes)")
            print(f"  bulk_add      {bulk_rate:9.0f} rows/s  ({bulk_seconds:.1f} s for "
                  f"{args.rows}, includes rebuilding the HNSW and GIN indexes)")
            print(f"  add per row   {row_rate:9.0f} rows/s  ({per_row_seconds:.1f} s for "
                  f"{args.per_row})")
            print(f"  raw COPY      {raw_rate:9.0f} rows/s  ({raw_seconds:.1f} s for "
                  f"{len(unique)} distinct rows, same index rebuilds, PostgreSQL's default "
                  "build workers)")
            print(f"  bulk_add / per row {bulk_rate / row_rate:4.1f}x, "
                  f"bulk_add / raw COPY {bulk_rate / raw_rate:4.2f}x\n")

            # 2. vector search ------------------------------------------------------------
            raw = psycopg.connect(url, autocommit=True)
            register_vector(raw)
            raw.execute("SET enable_seqscan = off")
            padded = np.zeros((len(query_vectors), 2000), dtype=np.float32)
            padded[:, :384] = query_vectors
            raw_sql = ("SELECT id, content, access_count, created_at, token_count, "
                       "1 - (embedding <=> %s) AS similarity FROM nodes "
                       "WHERE embedding IS NOT NULL ORDER BY embedding <=> %s LIMIT 10")
            for vector in padded[:20]:  # warm the caches
                raw.execute(raw_sql, (vector, vector), prepare=True).fetchall()
                ltm._vector_search(vector, 2000, 10, None)
            raw_padded = timed(lambda v: raw.execute(raw_sql, (v, v), prepare=True).fetchall(),
                               padded)
            store_padded = timed(lambda v: ltm._vector_search(v, 2000, 10, None), padded)

            start = time.perf_counter()
            ltm.create_native_index(384)
            native_build = time.perf_counter() - start
            native_sql = ("SELECT id, content, access_count, created_at, token_count, "
                          "1 - ((subvector(embedding, 1, 384)::vector(384)) <=> %s) "
                          "AS similarity FROM nodes WHERE embedding_dimension = 384 "
                          "ORDER BY (subvector(embedding, 1, 384)::vector(384)) <=> %s "
                          "LIMIT 10")
            for vector in query_vectors[:20]:
                raw.execute(native_sql, (vector, vector), prepare=True).fetchall()
                ltm.search(embedding=vector, limit=10)
            raw_native = timed(lambda v: raw.execute(native_sql, (v, v),
                                                     prepare=True).fetchall(), query_vectors)
            store_native = timed(lambda v: ltm.search(embedding=v, limit=10), query_vectors)
            print("vector search, top 10, p50 latency (ef_search 40)")
            print(f"  padded 2000-d index: store {p50_ms(store_padded):6.2f} ms, raw SQL "
                  f"{p50_ms(raw_padded):6.2f} ms, ratio "
                  f"{p50_ms(store_padded) / p50_ms(raw_padded):.2f}x")
            print(f"  native  384-d index: store {p50_ms(store_native):6.2f} ms, raw SQL "
                  f"{p50_ms(raw_native):6.2f} ms, ratio "
                  f"{p50_ms(store_native) / p50_ms(raw_native):.2f}x "
                  f"(index built in {native_build:.1f} s)")
            print(f"  padded / native (store): {p50_ms(store_padded) / p50_ms(store_native):.2f}x"
                  "\n")

            # 3. full-text search -----------------------------------------------------------
            titles = queries["title"].tolist()
            print("full-text search, top 10, p50 latency")
            for match, build in (("all", "plainto_tsquery('english', %(query)s)"),
                                 ("any", "replace(plainto_tsquery('english', %(query)s)"
                                         "::text, ' & ', ' | ')::tsquery")):
                fts_sql = ("SELECT n.id, n.content, n.access_count, n.created_at, "
                           "n.token_count, ts_rank(to_tsvector('english', n.content), q) AS rank "
                           f"FROM nodes n, (SELECT {build} AS q) AS tsq "
                           "WHERE to_tsvector('english', n.content) @@ q "
                           "ORDER BY rank DESC, n.id LIMIT 10")
                raw_fts = timed(lambda t, s=fts_sql: raw.execute(s, {"query": t},
                                                                 prepare=True).fetchall(),
                                titles)
                store_fts = timed(lambda t, m=match: ltm.search_fulltext(query=t, match=m,
                                                                           limit=10),
                                  titles)
                ratio = p50_ms(store_fts) / p50_ms(raw_fts)
                print(f"  match={match}: store {p50_ms(store_fts):7.2f} ms, raw SQL "
                      f"{p50_ms(raw_fts):7.2f} ms, ratio {ratio:.2f}x")
            raw.close()


if __name__ == "__main__":
    main()
