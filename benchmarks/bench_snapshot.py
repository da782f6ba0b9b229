"""Where a DuckDB snapshot's time goes, and its nodes written three ways side by side.

Usage:
    python benchmarks/bench_snapshot.py [--database URL] [--out DIR]

Reads every memory table of the database once, as ``export_snapshot`` does (one snapshot, the
same chunks), timing the reading alone. Each chunk of ``nodes`` is then inserted into three
DuckDB files with the snapshot's settings, the order rotating per chunk:
- before: the vectors as an object column of numpy arrays, each chunk committed;
- the vectors as one Arrow list column (conversion included), each chunk committed;
- Arrow, and every chunk in one transaction (``export_snapshot`` commits every 100,000 rows,
  which bounds its memory).
The time of each file includes its final commit and close. Last, the whole
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


def _insert(con: duckdb.DuckDBPyConnection, chunk: pd.DataFrame, *, arrow: bool) -> None:
    if arrow:
        chunk = chunk.assign(embedding=_arrow_vectors(chunk["embedding"]))
    con.register("chunk", chunk)
    con.execute("INSERT INTO nodes SELECT * FROM chunk")
    con.unregister("chunk")


WAYS = {"before: object column, commit per chunk": (False, False),
        "Arrow column, commit per chunk": (True, False),
        "Arrow column, one transaction": (True, True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=None, metavar="URL",
                        help="the memory to read (default: HTM_DBURL or the embedded server)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="where the DuckDB files go (default: a temporary folder)")
    args = parser.parse_args()
    url = args.database or resolve_database_url()
    with tempfile.TemporaryDirectory(dir=args.out) as work, \
            LongTermMemory(url, query_timeout=3_600_000) as store:
        folder = Path(work)
        seconds = dict.fromkeys(["read", *WAYS], 0.0)
        files = {name: _duckdb(folder / f"{i}.duckdb") for i, name in enumerate(WAYS)}
        for name, (_, one_transaction) in WAYS.items():
            if one_transaction:
                files[name].begin()
        names, vectors, position = list(WAYS), 0, 0
        chunks = store.iter_tables_chunks()
        while True:
            started = time.perf_counter()
            table, chunk = next(chunks, (None, None))
            seconds["read"] += time.perf_counter() - started
            if table is None or chunk is None:
                break
            if table != "nodes":
                continue
            vectors += int(chunk["embedding"].notna().sum())
            turn = position % len(names)
            for name in names[turn:] + names[:turn]:
                started = time.perf_counter()
                _insert(files[name], chunk, arrow=WAYS[name][0])
                seconds[name] += time.perf_counter() - started
            position += 1
        for name, (_, one_transaction) in WAYS.items():
            started = time.perf_counter()
            if one_transaction:
                files[name].commit()
            files[name].close()
            seconds[name] += time.perf_counter() - started
        print(f"{vectors:,} vectors in {position} chunks of nodes")
        for name, value in seconds.items():
            print(f"  {name:<42} {value:8.2f} s")
        before, after = (seconds[name] for name in (names[0], names[-1]))
        print(f"  nodes into DuckDB, first way / last way    {before / after:8.2f}x")
        started = time.perf_counter()
        export_snapshot(store, folder / "snapshot.duckdb")
        whole = time.perf_counter() - started
        print(f"  {'export_snapshot, whole':<42} {whole:8.2f} s")


if __name__ == "__main__":
    main()
