"""How every analysis costs as the memory grows: 10k, 100k, 1M memories built from the corpus.

Usage:
    HTM_CORPUS_DIR=/work/shared/data/debian-memories \
        python benchmarks/bench_scale.py --rows 10000 --rows 100000 [--rows 1000000]
    ... --only load [--repeat 3] [--trace-load] [--unlogged-anchor] [--maintenance-work-mem 11GB]
    ... --database URL (per --rows) [--step robot_activity ...] [--repeat 3]

Each size gets a scratch database on the embedded server (or HTM_DBURL's server), dropped at
the end unless ``--keep`` (then its URL is printed, for EXPLAIN runs on the same memory).
The memory is the real corpus (63,666 Debian package descriptions with their MiniLM vectors)
multiplied with seeded variations, documented in :func:`scale_data.fleet_memory`. It is
loaded with ``bulk_add`` and, in the same run, by two hand-written loaders with raw binary
COPY and the same index builds and settings (:mod:`scale_anchors`): the distinct rows into
one plain logged table (``anchor``), and the whole memory into HTM's own tables of a new
database (``tables anchor``: robots, tags, links, event log, the same end state as
``bulk_add``'s); ``--only load`` stops there. Then every analysis helper, ``advise``, the
agent's searches (200 dev queries per strategy), ``build_report``, ``export_snapshot``,
``recommend_ef_search`` and the recall sweep (exact ground truth included) run once, each
with its wall time and the peak RSS of this process during the call (reset before each step
through /proc/self/clear_refs; the server's memory is not included). With two sizes or more
the growth exponent of each step is printed: the slope of log(seconds) over log(rows).

``--database URL`` (once per ``--rows``, in the same order) runs the analysis steps on a
memory kept by an earlier ``--keep`` run instead of building one: no generation, load or
anchor, and each step runs at every size in turn (sizes of one step minutes apart, under the
same load of the machine). The hygiene checks that read every memory (near-duplicates,
sensitive data, the whole of ``memory_hygiene``) run up to 100,000 rows; the sampled ones,
as the report runs them, at every size. ``unreachable_memories`` checks a sample of 2,000
(all of them is a search per memory: hours at a million).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
from scale_anchors import htm_tables_anchor, raw_copy_anchor
from scale_clocks import StatementTimes, cpu_clock
from scale_data import fleet_memory

import htm_analytics as ha
from htm_analytics.agent.datasets import read_dev_queries
from htm_analytics.report import REPORT_DUPLICATES_SAMPLE, REPORT_HYGIENE_SAMPLE
from htm_analytics.store import scratch_database
from htm_analytics.store.connection import resolve_database_url


def _rss_peak_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def measure(name: str, function: Callable[[], Any], results: dict[str, dict[str, float]],
            cpu: Callable[[], float] | None = None, label: str | None = None) -> Any:
    """Run ``function`` once; record its seconds, this process's peak RSS above the RSS it
    started with and, given a ``cpu`` clock (:func:`cpu_clock`), the CPU seconds (printed as
    ``label``, ``name`` by default)."""
    _rss_peak_reset()
    before = _rss("VmRSS")
    cpu_before = cpu() if cpu else 0.0
    started = time.perf_counter()
    value = function()
    seconds = time.perf_counter() - started
    peak = max(_rss("VmHWM") - before, 0)
    results[name] = {"seconds": seconds, "peak_mib": peak / 2**20}
    server = ""
    if cpu:
        results[name]["cpu"] = cpu() - cpu_before
        server = f"  CPU {results[name]['cpu']:8.2f} s"
    print(f"  {label or name:34} {seconds:9.2f} s  +{peak / 2**20:8.0f} MiB{server}",
          flush=True)
    return value


FULL_HYGIENE_ROWS = 100_000  # above: only the sampled hygiene checks (see the docstring)
SEARCHES = 200  # dev queries searched by each strategy (a package title and its vector)
SEARCH_STRATEGIES = ("vector", "fulltext_any", "vector_bm25", "hybrid", "rrf")


@cache
def dev_queries() -> list[tuple[str, np.ndarray]]:
    """The first ``SEARCHES`` dev queries: a package title and its vector."""
    queries, vectors = read_dev_queries()
    return list(zip(queries["title"][:SEARCHES], vectors[:SEARCHES]))


def prepare_searches(store: ha.LongTermMemory) -> None:
    """One untimed search: a store's first reads which models made the stored vectors (a
    scan of every memory), which the search steps should not be timed with."""
    text, vector = dev_queries()[0]
    store.search(query=text, embedding=vector, limit=10)


def search_cases(store: ha.LongTermMemory) -> list[tuple[str, Callable[[], Any]]]:
    """The agent's searches: the dev queries per strategy, 10 results each (the store has
    no query cache here); :func:`prepare_searches` first."""
    def search_all(strategy: str) -> None:
        for text, vector in dev_queries():
            store.search_by_strategy(strategy, query=text, embedding=vector, limit=10)
    return [(f"search {strategy} x{SEARCHES}", partial(search_all, strategy))
            for strategy in SEARCH_STRATEGIES]


def analysis_cases(store: ha.LongTermMemory, rows: int) -> list[tuple[str, Callable[[], Any]]]:
    """Every analysis step timed at ``rows``, in order."""
    sample, searched = REPORT_HYGIENE_SAMPLE, REPORT_DUPLICATES_SAMPLE
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("tag_cooccurrence", lambda: ha.tag_cooccurrence(store)),
        ("tag_cooccurrence level=1", lambda: ha.tag_cooccurrence(store, level=1)),
        ("tag_graph", lambda: ha.tag_graph(store)),
        ("tag_graph level=2 (the report's)",
         lambda: ha.tag_graph(store, level=2, min_shared=3, weight="npmi")),
        ("tag_hierarchy", lambda: ha.tag_hierarchy(store)),
        ("popular_tags", lambda: ha.popular_tags(store)),
        ("popular_tags M", lambda: ha.popular_tags(store, freq="M")),
        ("remember_trends W", lambda: ha.remember_trends(store, freq="W")),
        ("remember_trends W by robot",
         lambda: ha.remember_trends(store, freq="W", by="robot")),
        # every day of every robot: 7.3 million rows for 20,000 robots over a year
        ("remember_trends D by robot",
         lambda: ha.remember_trends(store, freq="D", by="robot")),
        ("remember_count_distribution", lambda: ha.remember_count_distribution(store)),
        ("most_reinforced", lambda: ha.most_reinforced(store)),
        ("robot_overlap top=1000", lambda: ha.robot_overlap(store, top=1000)),
        ("robot_activity", lambda: ha.robot_activity(store)),
        ("index_usage", lambda: ha.index_usage(store)),
        ("table_health", lambda: ha.table_health(store)),
        ("memory_growth", lambda: ha.memory_growth(store)),
        ("stale_memories", lambda: ha.stale_memories(store)),
        ("unreachable_memories sample=2000",
         lambda: ha.unreachable_memories(store, sample=2000)),
        (f"near_duplicates sample={sample}", lambda: ha.near_duplicates(store, sample=sample)),
        (f"sensitive_memories sample={sample}",
         lambda: ha.sensitive_memories(store, sample=sample)),
        (f"supersession_candidates sample={sample}",
         lambda: ha.supersession_candidates(store, sample=sample)),
        (f"memory_hygiene sample={sample} (near-duplicates {searched}: the report's)",
         lambda: ha.memory_hygiene(store, sample=sample, duplicates_sample=searched)),
        ("advise", lambda: ha.advise(store)),
        *search_cases(store),
        ("recommend_ef_search", lambda: ha.recommend_ef_search(store)),
        ("benchmark_recall (200 q, exact truth)",
         lambda: ha.benchmark_recall(store, queries=200, progress=False)),
    ]
    if rows <= 100_000:  # the full matrix: robots squared rows
        at = next(i for i, (name, _) in enumerate(cases) if name.startswith("robot_overlap"))
        cases.insert(at, ("robot_overlap (full matrix)", lambda: ha.robot_overlap(store)))
    if rows <= FULL_HYGIENE_ROWS:  # every memory read, or every pair compared
        at = next(i for i, (name, _) in enumerate(cases) if name.startswith("near_dup"))
        cases[at:at] = [
            ("near_duplicates", lambda: ha.near_duplicates(store, pairs="all")),
            ("sensitive_memories", lambda: ha.sensitive_memories(store)),
            ("supersession_candidates", lambda: ha.supersession_candidates(store)),
            ("memory_hygiene", lambda: ha.memory_hygiene(store, pairs="all")),
        ]
    return cases


def analyse(store: ha.LongTermMemory, rows: int, with_report: bool,
            results: dict[str, dict[str, float]]) -> None:
    """Time every analysis step, the snapshot and the report on ``store``."""
    prepare_searches(store)
    for name, function in analysis_cases(store, rows):
        measure(name, function, results)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
        measure("export_snapshot (DuckDB)", lambda: ha.export_snapshot(
            store, Path(folder) / "memory.duckdb"), results)
        measure("collect_sample (DuckDB history)", lambda: ha.collect_sample(
            store, Path(folder) / "history.duckdb"), results)
    if with_report:
        measure("build_report", lambda: ha.build_report(store), results)


def run_kept(kept: dict[int, str], with_report: bool, steps: list[str] | None = None,
             repeat: int = 1) -> dict[int, dict[str, dict[str, float]]]:
    """The analysis steps on memories earlier ``--keep`` runs built, step by step: each step
    runs at every size in turn, so that the sizes of one step are measured minutes apart
    under the same load of the machine (the growth exponent compares them). ``steps``: only
    the steps whose name contains one of these strings. ``repeat``: each step runs that many
    rounds over the sizes; the median seconds and the largest peak are kept."""
    measured: dict[int, dict[str, dict[str, float]]] = {rows: {} for rows in kept}

    def chosen(name: str) -> bool:
        return not steps or any(step in name for step in steps)

    def rounds(name: str, calls: dict[int, Callable[[], Any]]) -> None:
        runs: dict[int, list[dict[str, float]]] = {rows: [] for rows in calls}
        for _ in range(repeat):
            for rows, call in calls.items():
                once: dict[str, dict[str, float]] = {}
                measure(name, call, once, label=f"{name} [{rows:,}]")
                runs[rows].append(once[name])
        for rows, entries in runs.items():
            measured[rows][name] = {
                "seconds": float(np.median([e["seconds"] for e in entries])),
                "peak_mib": max(e["peak_mib"] for e in entries)}

    with ExitStack() as stack:
        stores = {rows: stack.enter_context(ha.LongTermMemory(url, cache_size=0))
                  for rows, url in sorted(kept.items())}
        cases_at = {rows: analysis_cases(store, rows) for rows, store in stores.items()}
        if any(chosen(name) for name, _ in next(iter(cases_at.values()))
               if name.startswith("search ")):
            for store in stores.values():
                prepare_searches(store)
        for rows, store in stores.items():
            print(f"{rows:,} rows: the kept memory at {store.url}: "
                  f"{store.count_in_scope():,} distinct memories", flush=True)
        for name in dict.fromkeys(name for cases in cases_at.values() for name, _ in cases):
            if chosen(name):
                rounds(name, {rows: function for rows, cases in cases_at.items()
                              for n, function in cases if n == name})
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scale-")))
        finals: list[tuple[str, Callable[[ha.LongTermMemory, int], Any]]] = [
            ("export_snapshot (DuckDB)",
             lambda store, rows: ha.export_snapshot(store, folder / f"memory-{rows}.duckdb")),
            ("collect_sample (DuckDB history)",
             lambda store, rows: ha.collect_sample(store, folder / f"history-{rows}.duckdb"))]
        if with_report:
            finals.append(("build_report", lambda store, rows: ha.build_report(store)))
        for name, final in finals:
            if chosen(name):
                rounds(name, {rows: partial(final, store, rows) for rows, store in stores.items()})
    return measured


def load_steps(server_url: str, url: str, store: ha.LongTermMemory, memory: dict[str, Any],
               results: dict[str, dict[str, float]], unlogged_anchor: bool,
               build_memory: str | None, repeat: int = 1,
               statements: StatementTimes | None = None) -> None:
    """``bulk_add`` of the whole memory into ``store``, then the anchor (and the unlogged
    one) on the same server, each with its total (and CPU seconds where the server runs
    here). ``build_memory``: ``bulk_add``'s ``maintenance_work_mem``, also the anchor's
    (default: bulk_add's own choice, which is the embedded server's 1GB up to 100k rows).
    With ``repeat``, the loads run again into fresh databases, the anchor first every other
    time, and each step's medians are kept. ``statements``: ``store``'s tracer, to print the
    first load's statements by time."""
    cpu = cpu_clock(url)
    option: dict[str, Any] = {} if build_memory is None else {
        "maintenance_work_mem": build_memory}
    def load(target: ha.LongTermMemory, into: dict[str, dict[str, float]]) -> None:
        measure("bulk_add (with index rebuild)", lambda: target.bulk_add(
            memory["contents"], robots=memory["robots"], embeddings=memory["vectors"],
            tags=memory["tags"], remembered_at=memory["remembered_at"],
            embedding_model=("sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2"),
            **option), into, cpu)

    def anchors(into: dict[str, dict[str, float]]) -> None:
        raw_copy_anchor(url, memory, into, measure, cpu=cpu, build_memory=build_memory or "1GB")
        if unlogged_anchor:
            raw_copy_anchor(url, memory, into, measure, logged=False, cpu=cpu,
                            build_memory=build_memory or "1GB")
        with scratch_database(server_url, "htm_bench_anchor") as fresh:
            ha.LongTermMemory(fresh, init_schema=True, cache_size=0).close()
            htm_tables_anchor(fresh, memory, into, measure, cpu=cpu_clock(fresh),
                              build_memory=build_memory or "1GB")
        for label in ("anchor", "unlogged anchor", "tables anchor"):
            if not any(k.startswith(f"{label}:") for k in into):
                continue
            steps = [into[k] for k in into if k.startswith(f"{label}:")]
            into[f"{label}: total"] = {key: sum(r[key] for r in steps) for key in steps[0]}
            into[f"{label}: total"]["peak_mib"] = max(r["peak_mib"] for r in steps)

    runs: list[dict[str, dict[str, float]]] = []
    for run in range(repeat):
        measured: dict[str, dict[str, float]] = {}
        if repeat > 1:
            print(f"  run {run + 1} of {repeat}", flush=True)
        if run == 0:  # into the database the helpers read afterwards
            if statements:
                statements.on = True
            load(store, measured)
            if statements:
                statements.on = False
                statements.report()
            anchors(measured)
        else:
            with scratch_database(server_url, "htm_bench_load") as again, \
                    ha.LongTermMemory(again, init_schema=True, cache_size=0) as other:
                if run % 2:
                    anchors(measured)
                load(other, measured)
                if not run % 2:
                    anchors(measured)
        runs.append(measured)
    for name, first in runs[0].items():
        results[name] = {key: float(np.median([r[name][key] for r in runs])) for key in first}
        results[name]["peak_mib"] = max(r[name]["peak_mib"] for r in runs)


def run_size(server_url: str, rows: int, with_report: bool, keep: bool = False,
             only_load: bool = False, unlogged_anchor: bool = False,
             build_memory: str | None = None, repeat: int = 1, trace_load: bool = False
             ) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    statements = StatementTimes() if trace_load else None
    memory = measure("generate the memory", lambda: fleet_memory(rows), results)
    print(f"{rows:,} rows: {memory['distinct']:,} distinct memories, "
          f"{memory['robot_count']:,} robots", flush=True)
    with scratch_database(server_url, "htm_bench_scale", keep=keep) as url, \
            ha.LongTermMemory(url, init_schema=True, cache_size=0, tracer=statements) as store:
            if keep:  # to look at one helper's plans again without a new load
                print(f"keeping the database: {url}", flush=True)
            load_steps(server_url, url, store, memory, results, unlogged_anchor, build_memory,
                       repeat, statements)
            memory.clear()  # the server has it now
            if only_load:
                return results
            measure("create_native_index(384)", lambda: store.create_native_index(
                384, maintenance_work_mem=build_memory), results)
            analyse(store, rows, with_report, results)
    return results


def growth_table(sizes: list[int], measured: dict[int, dict[str, dict[str, float]]]) -> str:
    """A Markdown table: seconds and peak MiB per size, the log-log slope of seconds over
    every size, and over the two largest (where fixed costs of a small memory, a first call
    or a timer's resolution no longer weigh: the better guide to the next size)."""
    names = list(dict.fromkeys(name for size in sizes for name in measured[size]))
    head = " | ".join(f"{s:,} rows: s / +MiB" for s in sizes)
    lines = [f"| step | {head} | growth exponent | last step |",
             "|---|" + "---:|" * (len(sizes) + 2)]
    for name in names:
        cells, xs, ys = [], [], []
        for size in sizes:
            entry = measured[size].get(name)
            if entry is None:
                cells.append("")
                continue
            cells.append(f"{entry['seconds']:.2f} / {entry['peak_mib']:.0f}")
            if entry["seconds"] > 0:
                xs.append(np.log(size))
                ys.append(np.log(entry["seconds"]))
        slope = f"{np.polyfit(xs, ys, 1)[0]:.2f}" if len(xs) >= 2 else ""
        last = f"{(ys[-1] - ys[-2]) / (xs[-1] - xs[-2]):.2f}" if len(xs) >= 3 else ""
        lines.append(f"| {name} | {' | '.join(cells)} | {slope} | {last} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, action="append", required=True,
                        help="memories to build (repeat for several sizes)")
    parser.add_argument("--no-report", action="store_true", help="skip build_report")
    parser.add_argument("--only", choices=["load"],
                        help="run only these steps (load: bulk_add and the anchor)")
    parser.add_argument("--unlogged-anchor", action="store_true",
                        help="also time the anchor on an UNLOGGED table (no WAL)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="load N times (bulk_add and the anchor alternately first), or "
                             "with --database run each step N times, and keep the medians")
    parser.add_argument("--trace-load", action="store_true",
                        help="print the first bulk_add's statements, slowest first")
    parser.add_argument("--maintenance-work-mem", metavar="SIZE",
                        help="bulk_add's maintenance_work_mem, the anchor's and "
                             "create_native_index's (e.g. 11GB for the padded HNSW graph at "
                             "1M rows)")
    parser.add_argument("--keep", action="store_true",
                        help="keep each size's database (its URL is printed) instead of "
                             "dropping it")
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write every measurement to this JSON file")
    parser.add_argument("--database", action="append", default=[], metavar="URL",
                        help="analyse this kept memory instead of building one (once per "
                             "--rows, in the same order)")
    parser.add_argument("--step", action="append", default=[], metavar="TEXT",
                        help="with --database: only the steps whose name contains TEXT "
                             "(repeat for several); --repeat N runs each N times")
    args = parser.parse_args()
    if args.database and len(args.database) != len(args.rows):
        parser.error("give one --database per --rows")
    if args.step and not args.database:
        parser.error("--step picks among the steps of kept memories: give --database")
    measured: dict[int, dict[str, dict[str, float]]] = {}
    if args.database:
        measured = run_kept(dict(zip(args.rows, args.database)), not args.no_report,
                            args.step, args.repeat)
    server = resolve_database_url()
    for rows in sorted(set(args.rows) - set(measured)):
        print(f"\n== {rows:,} rows", flush=True)
        measured[rows] = run_size(server, rows, not args.no_report, args.keep,
                                  only_load=args.only == "load",
                                  unlogged_anchor=args.unlogged_anchor,
                                  build_memory=args.maintenance_work_mem,
                                  repeat=args.repeat, trace_load=args.trace_load)
    sizes = sorted(measured)
    for size in sizes:
        if "anchor: total" not in measured[size]:
            continue
        bulk = measured[size]["bulk_add (with index rebuild)"]["seconds"]
        for label, what in (("anchor", "raw COPY into one table"),
                            ("unlogged anchor", "raw COPY into one unlogged table"),
                            ("tables anchor", "a hand-written COPY into HTM's tables")):
            anchor = measured[size].get(f"{label}: total")
            if anchor is None:
                continue
            cpu = ""
            if "cpu" in anchor:
                bulk_cpu = measured[size]["bulk_add (with index rebuild)"]["cpu"]
                cpu = f", {anchor['cpu'] / bulk_cpu:.2f}x in CPU seconds"
            print(f"{size:,} rows: bulk_add loads at {anchor['seconds'] / bulk:.2f}x the "
                  f"{label}'s rate ({what} + the same indexes){cpu}")
    print("\n" + growth_table(sizes, measured))
    if args.json:
        Path(args.json).write_text(json.dumps(measured, indent=1))


if __name__ == "__main__":
    main()
