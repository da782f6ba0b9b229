"""The sensitive-data detectors before and after, side by side on the corpus's texts.

Usage: HTM_CORPUS_DIR=... python benchmarks/bench_sensitive.py [--rows 20000]
       [--before REVISION] [--repeat 5]

Runs ``find_sensitive`` of ``--before`` (imported from git beside this checkout) and of this
checkout on the same texts, alternately, ``--repeat`` times each; prints the median time per
text and the ratio, and checks that both find the same spans in every text. No database is
used: this is the per-text work of ``sensitive_memories`` (one CPU), which at a million
memories is most of its time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench_versions import import_revision

from htm_analytics.agent.datasets import read_corpus
from htm_analytics.analysis.sensitive import find_sensitive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="corpus texts scanned")
    parser.add_argument("--before", default="81c268b", help="the earlier revision")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each version")
    args = parser.parse_args()
    texts = read_corpus(rows=args.rows)[0]["content"].tolist()
    with tempfile.TemporaryDirectory() as folder:
        import_revision(args.before, Path(folder))  # as htm_before
        from htm_before.analysis.sensitive import find_sensitive as find_before

        versions = {"before": find_before, "after": find_sensitive}
        found = {name: [[(f.kind, f.detector, f.start, f.end) for f in find(text)]
                        for text in texts] for name, find in versions.items()}
        if found["before"] != found["after"]:
            raise SystemExit("the two versions found different spans")
        seconds: dict[str, list[float]] = {name: [] for name in versions}
        for _ in range(args.repeat):
            for name, find in versions.items():
                started = time.perf_counter()
                for text in texts:
                    find(text)
                seconds[name].append(time.perf_counter() - started)
    per_text = {name: statistics.median(s) / len(texts) * 1e6 for name, s in seconds.items()}
    findings = sum(map(len, found["after"]))
    print(f"{len(texts):,} texts ({sum(map(len, texts)) / len(texts):.0f} characters on "
          f"average), {findings:,} findings, the same in both versions")
    print(f"before ({args.before}): {per_text['before']:.0f} µs a text; "
          f"after: {per_text['after']:.0f} µs a text; "
          f"{per_text['before'] / per_text['after']:.2f}x")


if __name__ == "__main__":
    main()
