"""The tag statements before and after, side by side on one fleet memory, with their plans
(EXPLAIN ANALYZE, BUFFERS).

Usage:
    HTM_CORPUS_DIR=/work/shared/data/debian-memories python benchmarks/bench_tag_sql.py \
        [--rows 30000 | --database URL] [--before REVISION] [--statement tag_hierarchy]

The earlier statements are read from ``--before`` (git show), so both run on the same data in
the same process, alternately, best of three each; each with the ``work_mem`` its file asks
for (the store sets it per statement), the earlier ones with the server's. Their answers are
compared row by row, then both plans are printed at level None. ``--database`` reads a memory
``bench_scale.py --keep`` built instead of loading one. The tag co-occurrence, no longer one
statement, is compared by bench_cooccurrence.py.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
from bench_scale import fleet_memory

import htm_analytics as ha
from htm_analytics.frames import analytics_work_mem, load_analytics_query, scope_params
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url

ROOT = Path(__file__).resolve().parents[1]
# tag_cooccurrence is no longer one statement: bench_cooccurrence.py compares it.
STATEMENTS = ("tag_hierarchy", "tag_sizes", "tagged_nodes")
CASES: dict[str, list[dict[str, Any]]] = {
    "tag_hierarchy": [{}],
    "tag_sizes": [{"level": None}, {"level": 2}, {"level": None, "unit": "month"}],
    "tagged_nodes": [{}],
}


def earlier_statement(revision: str, name: str) -> str:
    def show(path: str) -> str:
        return subprocess.run(["git", "show", f"{revision}:htm_analytics/sql/analytics/{path}"],
                              cwd=ROOT, check=True, capture_output=True, text=True).stdout

    fragment = "\n".join(line for line in show("_scoped_nodes.sql").splitlines()
                         if not line.lstrip().startswith("--"))
    return show(f"{name}.sql").replace("{scoped}", fragment.strip())


def answers(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows comparable across revisions: floats rounded."""
    return sorted(tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in rows)


def run(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any],
        work_mem: str | None, explain: bool = False) -> tuple[float, list[Any]]:
    with conn.transaction():
        if work_mem:
            conn.execute("SELECT set_config('work_mem', %s, true)", (work_mem,))
        started = time.perf_counter()
        rows = conn.execute(("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " if explain else "")
                            + statement, params).fetchall()
        return time.perf_counter() - started, rows


def compare(url: str, revision: str, names: list[str]) -> None:
    with psycopg.connect(url) as conn:
        counts = conn.execute("SELECT (SELECT count(*) FROM nodes), "
                              "(SELECT count(*) FROM node_tags), current_setting('work_mem')"
                              ).fetchone()
        assert counts is not None
        print(f"{counts[0]:,} nodes, {counts[1]:,} node-tag links; server work_mem "
              f"{counts[2]}")
        for name in names:
            versions = {f"before ({revision})": (earlier_statement(revision, name), None),
                        "after": (load_analytics_query(name), analytics_work_mem(name))}
            for case in CASES[name]:
                params = {**scope_params(level=case.get("level")), "min_shared": 2,
                          "unit": case.get("unit")}
                best = {label: float("inf") for label in versions}
                results = {}
                for _ in range(3):
                    for label, (statement, work_mem) in versions.items():
                        seconds, rows = run(conn, statement, params, work_mem)
                        best[label] = min(best[label], seconds)
                        results[label] = answers(rows)
                first, second = results.values()
                assert first == second, f"{name} {case}: the answers differ"
                ratio = best[f"before ({revision})"] / best["after"]
                print(f"{name} {case}: " + ", ".join(f"{label} {s * 1000:,.0f} ms"
                                                      for label, s in best.items())
                      + f" ({ratio:.2f}x; {len(first):,} rows, the same)", flush=True)
            params = {**scope_params(), "min_shared": 2, "unit": None}
            for label, (statement, work_mem) in versions.items():
                _, plan = run(conn, statement, params, work_mem, explain=True)
                print(f"\n-- {name}, {label}, level None, work_mem "
                      f"{work_mem or counts[2]}\n" + "\n".join(r[0] for r in plan) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--database", default=None, metavar="URL",
                        help="a memory bench_scale.py --keep built (instead of --rows)")
    parser.add_argument("--before", default="24b921d", help="the earlier revision")
    parser.add_argument("--statement", action="append", choices=STATEMENTS,
                        help="only this statement (repeatable; all by default)")
    args = parser.parse_args()
    names = args.statement or list(STATEMENTS)
    if args.database:
        compare(args.database, args.before, names)
        return
    memory = fleet_memory(args.rows)
    with scratch_database(resolve_database_url(), "htm_bench_tags") as url:
        with ha.LongTermMemory(url, init_schema=True, cache_size=0) as store:
            store.bulk_add(memory["contents"], robots=memory["robots"],  # no vectors: tags
                           tags=memory["tags"], remembered_at=memory["remembered_at"])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        compare(url, args.before, names)


if __name__ == "__main__":
    main()
