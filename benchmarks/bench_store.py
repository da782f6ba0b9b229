"""Store benchmarks, measured side by side in one run on the real corpus.

1. Loading: ``bulk_add`` (binary COPY + set-based SQL) vs one ``add`` per row, and vs a
   hand-written raw load of the same rows (binary COPY into ``nodes`` between dropping and
   recreating the same indexes, no dedup, robots, tags or events).
2. Vector search: ``LongTermMemory.search`` vs the same raw SQL on one psycopg connection,
   on the seed's padded 2000-d HNSW index and on a native 384-d index.
   Store and raw SQL run interleaved, query by query; also the client CPU per query and the
   cost of statement tracing when it is off.
3. Hybrid search (weighted and RRF) vs its own two statements (matching tags, then the
   search) run raw on a dedicated connection.
4. Full-text search: ``search_fulltext`` vs raw SQL.

Usage: python benchmarks/bench_store.py [--rows 10000] [--per-row 1000] [--queries 200]
Uses the embedded server (or HTM_DBURL) in a scratch database that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import statistics
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from htm_analytics import LongTermMemory
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.store import scratch_database
from htm_analytics.store._search_sql import hybrid_rrf_sql, hybrid_weighted_sql, tsquery_sql
from htm_analytics.store.connection import resolve_database_url
from htm_analytics.store.tracing import _report


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


def interleaved(functions, inputs) -> list[list[float]]:
    """Samples of each function, run one after the other on each input: on a shared machine,
    load that comes and goes hits all of them alike."""
    samples: list[list[float]] = [[] for _ in functions]
    for item in inputs:
        for function, out in zip(functions, samples):
            start = time.perf_counter()
            function(item)
            out.append(time.perf_counter() - start)
    return samples


def cpu_ms(function, inputs) -> float:
    """Client CPU (this process) per call, in ms: less noisy than wall time."""
    start = time.process_time()
    for item in inputs:
        function(item)
    return (time.process_time() - start) / len(inputs) * 1000


def tracing_off_cost_us(calls: int = 200_000) -> float:
    """What the tracing cursor adds to one statement when tracing is off (microseconds):
    two clock reads and the check for a tracer or a DEBUG logger."""
    started = time.perf_counter()
    for _ in range(calls):
        begun = time.perf_counter()
        _report(None, None, "SELECT 1", None, time.perf_counter() - begun)
    return (time.perf_counter() - started) / calls * 1e6


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
                ltm.search(embedding=vector[:384], limit=10)
            raw_padded, store_padded = interleaved(
                [lambda v: raw.execute(raw_sql, (v, v), prepare=True).fetchall(),
                 lambda v: ltm.search(embedding=v[:384], limit=10)], padded)

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
            raw_native, store_native = interleaved(
                [lambda v: raw.execute(native_sql, (v, v), prepare=True).fetchall(),
                 lambda v: ltm.search(embedding=v, limit=10)], query_vectors)
            print("vector search, top 10, p50 latency (ef_search 40; store and raw SQL "
                  "interleaved query by query)")
            print(f"  padded 2000-d index: store {p50_ms(store_padded):6.2f} ms, raw SQL "
                  f"{p50_ms(raw_padded):6.2f} ms, ratio "
                  f"{p50_ms(store_padded) / p50_ms(raw_padded):.2f}x")
            print(f"  native  384-d index: store {p50_ms(store_native):6.2f} ms, raw SQL "
                  f"{p50_ms(raw_native):6.2f} ms, ratio "
                  f"{p50_ms(store_native) / p50_ms(raw_native):.2f}x "
                  f"(index built in {native_build:.1f} s)")
            print(f"  padded / native (store): {p50_ms(store_padded) / p50_ms(store_native):.2f}x")
            store_cpu = cpu_ms(lambda v: ltm.search(embedding=v, limit=10), query_vectors)
            raw_cpu = cpu_ms(lambda v: raw.execute(native_sql, (v, v), prepare=True).fetchall(),
                             query_vectors)
            print(f"  client CPU per query (native): store {store_cpu:.3f} ms, raw psycopg "
                  f"{raw_cpu:.3f} ms\n")

            # tracing: off (the default) vs a no-op tracer, and the off path alone
            with LongTermMemory(url, cache_size=0, pool_size=2,
                                tracer=lambda *_: None) as traced:
                for vector in query_vectors[:20]:
                    traced.search(embedding=vector, limit=10)
                untraced_s, traced_s = interleaved(
                    [lambda v: ltm.search(embedding=v, limit=10),
                     lambda v: traced.search(embedding=v, limit=10)], query_vectors)
            off_us = tracing_off_cost_us()
            print("tracing (native search, p50)")
            print(f"  off {p50_ms(untraced_s):6.2f} ms, no-op tracer {p50_ms(traced_s):6.2f} ms,"
                  f" ratio {p50_ms(traced_s) / p50_ms(untraced_s):.2f}x; the off path costs "
                  f"{off_us:.2f} us per statement ({off_us / 10 / p50_ms(untraced_s):.3f} % "
                  "of a default search, one statement)\n")

            # hybrid and RRF: the store vs the same two statements run raw -------------
            titles = queries["title"].tolist()
            raw.execute("SET hnsw.ef_search = 100")  # the store's: max(40, prefilter_limit)
            print("hybrid search, top 10, prefilter 100, p50 latency (interleaved)")
            for fusion in ("weighted", "rrf"):
                match = "all" if fusion == "weighted" else "any"
                tsquery = tsquery_sql(match)
                statement = (hybrid_weighted_sql(tsquery, "") if fusion == "weighted"
                             else hybrid_rrf_sql(tsquery, "", 384).as_string(raw))
                pairs = list(zip(titles, query_vectors))

                def run_raw(pair, statement=statement, fusion=fusion):
                    title, vector = pair
                    words = sorted({w for w in re.findall(r"[a-z0-9]+", title.lower())
                                    if len(w) >= 3})
                    tags = [r[0] for r in raw.execute(
                        "SELECT name FROM tags WHERE regexp_split_to_array(name, '[:-]') "
                        "&& %s::text[] ORDER BY name", (words,), prepare=True)]
                    padded_q = np.zeros(2000, dtype=np.float32)
                    padded_q[:384] = vector
                    return raw.execute(statement, {
                        "query": title, "limit": 10, "tags": tags, "prefilter": 100,
                        "q": vector if fusion == "rrf" else padded_q, "q_padded": padded_q},
                        prepare=True).fetchall()

                def run_store(pair, fusion=fusion):
                    return ltm.search_hybrid(query=pair[0], embedding=pair[1], limit=10,
                                             fusion=fusion)
                for pair in pairs[:10]:
                    run_raw(pair), run_store(pair)
                raw_h, store_h = interleaved([run_raw, run_store], pairs)
                print(f"  {fusion:8s}: store {p50_ms(store_h):7.2f} ms, raw SQL "
                      f"{p50_ms(raw_h):7.2f} ms, ratio {p50_ms(store_h) / p50_ms(raw_h):.2f}x")
            raw.execute("RESET hnsw.ef_search")
            print()

            # 3. full-text search -----------------------------------------------------------
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
