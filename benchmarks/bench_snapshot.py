"""Where a DuckDB snapshot's time goes, and its vectors handed to DuckDB two ways side by side.

Usage:
    python benchmarks/bench_snapshot.py [--database URL] [--out DIR]

Reads every memory table of the database once, as ``export_snapshot`` does (one snapshot, the
same chunks), timing the reading alone. Each chunk of ``nodes`` is then inserted into two
DuckDB files with the snapshot's settings: once with its vectors as an object column of numpy
arrays (what ``export_snapshot`` did before), once as one Arrow list column (what it does
now, conversion included); the order alternates per chunk. Last, the whole
``export_snapshot`` is timed on its own. The database is only read.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
import pandas as pd

from htm_analytics import LongTermMemory, export_snapshot
from htm_analytics.store.connection import resolve_database_url
from htm_analytics.store.snapshot import _DUCKDB_MEMORY, _arrow_vectors, _create_tables


def _duckdb(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET memory_limit = '{_DUCKDB_MEMORY}'")
    _create_tables(con)
    return con


def _insert(con: duckdb.DuckDBPyConnection, chunk: pd.DataFrame) -> None:
    con.register("chunk", chunk)
    con.execute("INSERT INTO nodes SELECT * FROM chunk")
    con.unregister("chunk")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=None, metavar="URL",
                        help="the memory to read (default: HTM_DBURL or the embedded server)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="where the DuckDB files go (default: a temporary folder)")
    args = parser.parse_args()
    url = args.database or resolve_database_url()
    with tempfile.TemporaryDirectory(dir=args.out) as work, \
            LongTermMemory(url, query_timeout=3600) as store:
        folder = Path(work)
        seconds = {"read": 0.0, "object column": 0.0, "Arrow column": 0.0}
        vectors = 0
        with _duckdb(folder / "object.duckdb") as as_objects, \
                _duckdb(folder / "arrow.duckdb") as as_arrow:
            chunks = store.iter_tables_chunks()
            position = 0
            while True:
                started = time.perf_counter()
                table, chunk = next(chunks, (None, None))
                seconds["read"] += time.perf_counter() - started
                if table is None or chunk is None:
                    break
                if table != "nodes":
                    continue
                vectors += int(chunk["embedding"].notna().sum())
                ways = [("object column", lambda c: _insert(as_objects, c)),
                        ("Arrow column", lambda c: _insert(as_arrow, c.assign(
                            embedding=_arrow_vectors(c["embedding"]))))]
                for name, insert in ways[::-1] if position % 2 else ways:
                    started = time.perf_counter()
                    insert(chunk)
                    seconds[name] += time.perf_counter() - started
                position += 1
        print(f"{vectors:,} vectors in {position} chunks of nodes")
        for name, value in seconds.items():
            print(f"  {name:<40} {value:8.2f} s")
        print(f"  nodes into DuckDB: object / Arrow       "
              f"{seconds['object column'] / seconds['Arrow column']:8.2f}x")
        started = time.perf_counter()
        export_snapshot(store, folder / "snapshot.duckdb")
        print(f"  export_snapshot, whole                   {time.perf_counter() - started:8.2f} s")


if __name__ == "__main__":
    main()
