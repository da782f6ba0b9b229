"""Bytes per memory and HNSW cost of each way to store a 384-d MiniLM vector: the seed
schema's zero-padded vector(2000), vector(384) at the native dimension, and halfvec(384).

Usage:
    HTM_CORPUS_DIR=/work/shared/data/debian-memories python benchmarks/bench_storage.py \
        [--rows 10000] [--maintenance-work-mem 1GB]

The first ``--rows`` corpus vectors go into three unlogged tables of a scratch database (one
binary COPY each); for each: the average ``pg_column_size`` of a vector, the heap and TOAST
bytes per row, then an HNSW index (m=16, ef_construction=64, cosine) built and timed, with its
size per row. The figures per million rows in docs/scaling.md are these, times 1e6 / rows.
pgvector's notice that a graph no longer fits ``--maintenance-work-mem`` is printed with the
number of vectors it held (PostgreSQL's default, 64MB, shows what a build costs past it).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector

from htm_analytics.agent.datasets import read_corpus
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url

LAYOUTS = {
    "vector(2000) padded": ("vector(2000)", 2000),
    "vector(384) native": ("vector(384)", 384),
    "halfvec(384)": ("halfvec(384)", 384),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--maintenance-work-mem", default="1GB", metavar="SIZE")
    args = parser.parse_args()
    _, vectors = read_corpus(rows=args.rows)
    assert vectors is not None
    print(f"{len(vectors):,} MiniLM vectors; HNSW m=16, ef_construction=64, cosine")
    print(f"{'layout':22} {'vector B':>9} {'heap+toast B/row':>17} {'HNSW B/row':>11} "
          f"{'build s':>8} {'s per 1M (linear)':>18}")
    with scratch_database(resolve_database_url(), "htm_bench_storage") as url, \
            psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.add_notice_handler(lambda notice: print(f"  ({notice.message_primary})"))
        conn.execute("SELECT set_config('maintenance_work_mem', %s, false)",
                     (args.maintenance_work_mem,))
        conn.execute("SET max_parallel_maintenance_workers = 0")  # one core: comparable
        for number, (label, (column_type, width)) in enumerate(LAYOUTS.items()):
            table = f"layout_{number}"
            conn.execute(f"CREATE UNLOGGED TABLE {table} (id bigint, embedding {column_type})")
            with conn.cursor() as cur, cur.copy(
                    f"COPY {table} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as out:
                half = column_type.startswith("halfvec")
                out.set_types(["int8", "halfvec" if half else "vector"])
                for i, vector in enumerate(vectors):
                    padded = np.zeros(width, dtype=np.float32)
                    padded[:len(vector)] = vector
                    out.write_row((i, HalfVector(padded) if half else padded))
            conn.execute(f"VACUUM ANALYZE {table}")
            row = conn.execute(
                f"SELECT avg(pg_column_size(embedding)), pg_table_size('{table}') "
                f"FROM {table}").fetchone()
            assert row is not None
            started = time.perf_counter()
            ops = "halfvec_cosine_ops" if column_type.startswith("halfvec") else \
                "vector_cosine_ops"
            conn.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding {ops}) "
                         "WITH (m = 16, ef_construction = 64)")
            seconds = time.perf_counter() - started
            size = conn.execute(f"SELECT pg_relation_size('{table}_hnsw')").fetchone()
            assert size is not None
            n = len(vectors)
            print(f"{label:22} {float(row[0]):9.0f} {row[1] / n:17.0f} {size[0] / n:11.0f} "
                  f"{seconds:8.1f} {seconds * 1e6 / n:18.0f}", flush=True)


if __name__ == "__main__":
    main()
