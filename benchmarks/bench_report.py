"""One report as ``htm-analytics report`` builds it, and where its time went.

Usage:
    python benchmarks/bench_report.py [--database URL] [--out FILE] [--workers N] [--top N]
                                      [--cold]

Builds the report (``build_report`` with its defaults and ``to_html()``) in this process and
prints its wall seconds, the process's peak RSS, and the statements that took longest,
summed by statement text through the store's ``tracer=``. ``--cold`` first empties the
operating system's page cache (``echo 3 > /proc/sys/vm/drop_caches``; needs root), so that
the memory is read from disk as after a restart. The database is only read.
"""

from __future__ import annotations

import argparse
import collections
import resource
import subprocess
import time
from typing import Any

from htm_analytics import LongTermMemory, build_report
from htm_analytics.store.connection import resolve_database_url


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", metavar="URL", default=None,
                        help="the memory (default: the toolkit's usual choice)")
    parser.add_argument("--out", default="/tmp/bench-report.html", help="the report's file")
    parser.add_argument("--workers", type=int, default=2,
                        help="processes for the hygiene detectors (the CLI: every CPU)")
    parser.add_argument("--top", type=int, default=12, help="statements listed")
    parser.add_argument("--cold", action="store_true", help="empty the page cache first")
    args = parser.parse_args()
    url = args.database or resolve_database_url(None)
    spent: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])

    def tracer(sql: str, params: Any, seconds: float) -> None:
        entry = spent[" ".join(str(sql).split())[:110]]
        entry[0] += 1
        entry[1] += seconds

    if args.cold:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as caches:
            caches.write("3\n")
    at_start = _peak_mib()
    started = time.perf_counter()
    with LongTermMemory(url, tracer=tracer) as store:
        html = build_report(store, workers=args.workers).to_html()
    wall = time.perf_counter() - started
    with open(args.out, "w") as out:
        out.write(html)
    print(f"build_report + to_html: {wall:.1f} s, peak RSS {_peak_mib():.0f} MiB "
          f"({at_start:.0f} MiB at start){' from a cold page cache' if args.cold else ''}")
    statements = sum(int(count) for count, _ in spent.values())
    print(f"{statements:,} statements: {sum(s for _, s in spent.values()):.1f} s")
    for text, (count, seconds) in sorted(spent.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{seconds:8.2f} s {int(count):6,}x  {text}")


if __name__ == "__main__":
    main()
