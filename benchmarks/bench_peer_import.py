"""GhostKG import throughput and memory by chunk size, side by side, into fresh databases.

Usage: python benchmarks/bench_peer_import.py [ROWS]   (default 50,000 log rows; uses the
server of HTM_DBURL or the embedded one, creating and dropping one database per run)
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from htm_analytics import LongTermMemory
from htm_analytics.peers import import_ghostkg
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url

DDL = (Path(__file__).resolve().parents[1] / "tests" / "peer_schemas" / "ghostkg.sql")


def make_source(path: Path, rows: int) -> None:
    start = dt.datetime(2025, 1, 1)
    conn = sqlite3.connect(path)
    conn.executescript(DDL.read_text())
    conn.executemany(
        "INSERT INTO logs (agent_name, action_type, content, annotations, timestamp) "
        "VALUES (?, ?, ?, ?, ?)",
        ((f"agent-{i % 5}", "READ" if i % 2 else "WRITE", f"message {i} on topic {i % 977}",
          '{"triplets_count": 1, "entities": ["economy"]}',
          (start + dt.timedelta(seconds=37 * i)).isoformat(sep=" "))
         for i in range(rows)))
    conn.commit()
    conn.close()


def run(server: str, path: Path, chunk: int) -> tuple[float, float, float]:
    with scratch_database(server, "htm_bench_import") as url, \
            LongTermMemory(url, init_schema=True) as store:
        tracemalloc.start()
        started = time.perf_counter()
        import_ghostkg(path, store, chunk_rows=chunk)
        first = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        started = time.perf_counter()
        import_ghostkg(path, store, chunk_rows=chunk)  # idempotent: reads and skips
        second = time.perf_counter() - started
    return first, second, peak


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    server = resolve_database_url(None)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ghostkg.db"
        make_source(path, rows)
        print(f"{rows} GhostKG log rows; import, then the same import again (a no-op)")
        print(f"{'chunk_rows':>10} {'import s':>9} {'rows/s':>8} {'again s':>8} "
              f"{'peak MiB':>9}")
        for chunk in (1_000, 5_000, 25_000):
            first, second, peak = run(server, path, chunk)
            print(f"{chunk:>10} {first:>9.1f} {rows / first:>8.0f} {second:>8.1f} "
                  f"{peak:>9.1f}")


if __name__ == "__main__":
    main()
