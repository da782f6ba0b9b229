"""How long ``htm-analytics --help`` (or another command) takes: this checkout against
another one.

Runs ``python -m htm_analytics --help`` alternately from this checkout and from ``--baseline``
(another checkout, e.g. ``git worktree add /tmp/before <commit>``), so that both see the same
load, and prints each time and the medians. ``--command "tags --limit 5"`` times that command
instead (on the memory the toolkit would choose: ``HTM_DBURL``, else the embedded demo).

    python benchmarks/bench_cli_startup.py --baseline /tmp/before --repeats 7
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _time_command(checkout: Path, arguments: list[str]) -> float:
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "htm_analytics", *arguments], env=environment,
                   cwd=tempfile.gettempdir(), check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout to compare with")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--command", default="--help",
                        help="the command line after htm-analytics (default: --help)")
    args = parser.parse_args()
    arguments = shlex.split(args.command)
    checkouts = {"this": ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    times: dict[str, list[float]] = {name: [] for name in checkouts}
    for _ in range(args.repeats):
        for name, checkout in checkouts.items():
            times[name].append(_time_command(checkout, arguments))
    for name, values in times.items():
        shown = " ".join(f"{v:.2f}" for v in values)
        print(f"{name:>8}: median {statistics.median(values):.2f} s  ({shown})")
    if args.baseline:
        ratio = statistics.median(times["baseline"]) / statistics.median(times["this"])
        print(f"   ratio: {ratio:.1f}x faster")


if __name__ == "__main__":
    main()
