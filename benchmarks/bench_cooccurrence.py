"""tag_cooccurrence and tag_graph before and after, side by side on kept fleet memories.

Usage:
    python benchmarks/bench_cooccurrence.py --database URL [--database URL ...] \
        [--before REVISION] [--repeat 3] [--case "tag_cooccurrence robots"]

``--database``: memories ``bench_scale.py --keep`` built (10k, 100k, 1M rows...). The helpers
of ``--before`` (default 4a51623: the co-occurrence as one SQL statement, a self-join of the
node-topic pairs grouped on the server) are imported from git beside this revision's (the
incidence read a page of memories at a time and multiplied in SciPy). Each case runs
alternately, ``--repeat`` times each; the median, the spread (max - min) and the peak RSS
of this process during the calls (``/proc/self/clear_refs``) are printed, and both answers
are compared (the same frame, the same graph).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from bench_scale import _rss, _rss_peak_reset
from bench_versions import import_revision

import htm_analytics as ha

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("tag_cooccurrence", "tag_cooccurrence", {}),
    ("tag_cooccurrence level=1", "tag_cooccurrence", {"level": 1}),
    ("tag_cooccurrence level=2", "tag_cooccurrence", {"level": 2, "min_shared": 3}),
    ("tag_cooccurrence prefix", "tag_cooccurrence", {"prefix": "devel", "min_shared": 1}),
    ("tag_cooccurrence robots", "tag_cooccurrence", {"robots": ["robot-00000"]}),
    ("tag_graph", "tag_graph", {}),
    ("tag_graph level=2 (the report's)", "tag_graph",
     {"level": 2, "min_shared": 3, "weight": "npmi"}),
]


def same(name: str, first: Any, second: Any) -> bool:
    if name == "tag_graph":
        return bool(sorted(first.nodes(data="nodes")) == sorted(second.nodes(data="nodes"))
                    and sorted(first.edges(data="shared_nodes"))
                    == sorted(second.edges(data="shared_nodes")))
    keys = ["topic1", "topic2"]
    a, b = (f.sort_values(keys).reset_index(drop=True) for f in (first, second))
    try:
        pd.testing.assert_frame_equal(a, b, check_exact=False)
    except AssertionError:
        return False
    return True


def timed(call: Callable[..., Any], *args: Any, **options: Any) -> tuple[float, float, Any]:
    _rss_peak_reset()
    before = _rss("VmRSS")
    started = time.perf_counter()
    value = call(*args, **options)
    return time.perf_counter() - started, max(_rss("VmHWM") - before, 0) / 2**20, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", action="append", required=True, metavar="URL")
    parser.add_argument("--before", default="4a51623", help="the earlier revision")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", action="append", choices=[c[0] for c in CASES],
                        help="only this case (repeatable; all by default)")
    args = parser.parse_args()
    cases = [c for c in CASES if args.case is None or c[0] in args.case]
    with tempfile.TemporaryDirectory(prefix="bench-cooccurrence-") as folder:
        before = import_revision(args.before, Path(folder))
        print("| memories | case | before s (spread) | after s (spread) | ratio | "
              "+MiB before / after |\n|---:|---|---:|---:|---:|---:|")
        for url in args.database:
            with ha.LongTermMemory(url, cache_size=0, query_timeout=600_000) as now, \
                    before.LongTermMemory(url, cache_size=0, query_timeout=600_000) as old:
                memories = now.count_in_scope()
                for label, helper, options in cases:
                    runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
                    answers: dict[str, Any] = {}
                    for _ in range(args.repeat):
                        for version, module, store in (("before", before, old),
                                                       ("after", ha, now)):
                            seconds, peak, answers[version] = timed(
                                getattr(module, helper), store, **options)
                            runs[version].append((seconds, peak))
                    if not same(helper, answers["before"], answers["after"]):
                        raise SystemExit(f"{label} at {memories:,}: the answers differ")
                    cells = {}
                    for version, found in runs.items():
                        seconds = [s for s, _ in found]
                        cells[version] = (statistics.median(seconds),
                                          max(seconds) - min(seconds),
                                          max(p for _, p in found))
                    (b, bs, bp), (a, as_, ap) = cells["before"], cells["after"]
                    print(f"| {memories:,} | {label} | {b:.2f} ({bs:.2f}) | {a:.2f} ({as_:.2f}) "
                          f"| {b / a:.2f}x | {bp:.0f} / {ap:.0f} |", flush=True)


if __name__ == "__main__":
    main()
