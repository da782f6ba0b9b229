"""The co-occurrence statement before and after counting pairs on integer topic ids, side by
side on one fleet memory, with both plans (EXPLAIN ANALYZE, BUFFERS).

Usage:
    HTM_CORPUS_DIR=/work/shared/data/debian-memories python benchmarks/bench_tag_sql.py \
        [--rows 30000] [--work-mem 32MB]

The earlier statement is read from the revision before the change (git show), so both run on
the same data in the same process: best of three each, then the plans.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import psycopg
from bench_scale import fleet_memory

import htm_analytics as ha
from htm_analytics.frames import load_analytics_query, scope_params
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url

BEFORE = "09d90ad"  # main before issue 25
ROOT = Path(__file__).resolve().parents[1]


def earlier_statement() -> str:
    fragment = subprocess.run(
        ["git", "show", f"{BEFORE}:htm_analytics/sql/analytics/_scoped_nodes.sql"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    body = subprocess.run(
        ["git", "show", f"{BEFORE}:htm_analytics/sql/analytics/tag_cooccurrence.sql"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    fragment = "\n".join(line for line in fragment.splitlines()
                         if not line.lstrip().startswith("--"))
    return body.replace("{scoped}", fragment.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--work-mem", default=None, help="SET work_mem for both (default: "
                                                         "the server's)")
    args = parser.parse_args()
    memory = fleet_memory(args.rows)
    statements = {"before (text topics)": earlier_statement(),
                  "after (integer topic ids)": load_analytics_query("tag_cooccurrence")}
    with scratch_database(resolve_database_url(), "htm_bench_tags") as url:
        with ha.LongTermMemory(url, init_schema=True, cache_size=0) as store:
            store.bulk_add(memory["contents"], robots=memory["robots"],  # no vectors: tags
                           tags=memory["tags"], remembered_at=memory["remembered_at"])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            if args.work_mem:
                conn.execute("SELECT set_config('work_mem', %s, false)", (args.work_mem,))
            setting = conn.execute("SHOW work_mem").fetchone()
            counts = conn.execute("SELECT (SELECT count(*) FROM nodes), "
                                  "(SELECT count(*) FROM node_tags)").fetchone()
            assert setting is not None and counts is not None
            print(f"{args.rows:,} rows: {counts[0]:,} nodes, {counts[1]:,} node-tag links; "
                  f"work_mem {setting[0]}")
            for level in (None, 1):
                params = {**scope_params(level=level), "min_shared": 2}
                results = {}
                for label, statement in statements.items():
                    times = []
                    for _ in range(3):
                        started = time.perf_counter()
                        rows = conn.execute(statement, params).fetchall()
                        times.append(time.perf_counter() - started)
                    results[label] = sorted(rows)
                    print(f"level={level}: {label:28} {min(times) * 1000:8.0f} ms "
                          f"({len(rows):,} pairs)", flush=True)
                first, second = results.values()
                assert [r[:6] for r in first] == [r[:6] for r in second], "answers differ"
            for label, statement in statements.items():
                plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement,
                                    {**scope_params(), "min_shared": 2}).fetchall()
                print(f"\n-- {label}, level=None\n" + "\n".join(r[0] for r in plan))


if __name__ == "__main__":
    main()
