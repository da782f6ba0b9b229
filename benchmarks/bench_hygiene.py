"""Memory hygiene on the whole corpus: near_duplicates against brute force (recall and time),
the HNSW self-join it was chosen over, sensitive_memories (time and findings),
unreachable_memories (sampled, or every memory with --unreachable-sample 0, optionally
with --verify-reindex), and supersession_candidates' precision on the hand-labelled set
benchmarks/data/supersession_labelled.json.

Usage: python benchmarks/bench_hygiene.py [--rows N] [--threshold 0.95] [--hnsw-sample 500]
       [--unreachable-sample 2000 | 0] [--verify-reindex] [--only PART]

Uses the database ``htm_bench_corpus`` of bench_recall.py (made on first use); the labelled
set goes into a scratch database of its own.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_recall import corpus_database

import htm_analytics as ha
from htm_analytics.analysis.sensitive import _EMAIL, find_sensitive
from htm_analytics.analysis.worker_pool import available_cpus
from htm_analytics.store.connection import resolve_database_url
from htm_analytics.store.databases import scratch_database

LABELLED = Path(__file__).parent / "data" / "supersession_labelled.json"


def brute_force_pairs(ids: np.ndarray, vectors: np.ndarray, threshold: float,
                      rows: int = 2048) -> set[tuple[int, int]]:
    """Every pair at or above ``threshold``: each block of rows against the whole matrix
    (no tiling of the triangle, no row pre-filter), decided in float64."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    pairs: set[tuple[int, int]] = set()
    for start in range(0, len(ids), rows):
        sims = unit[start:start + rows] @ unit.T
        i, j = np.nonzero(sims >= threshold - 1e-3)
        i = i + start
        keep = i < j
        i, j = i[keep], j[keep]
        exact = np.einsum("ij,ij->i", unit[i].astype(np.float64), unit[j].astype(np.float64))
        pairs.update(zip(ids[i[exact >= threshold]].tolist(),
                         ids[j[exact >= threshold]].tolist()))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="corpus rows (default: all)")
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--hnsw-sample", type=int, default=500)
    parser.add_argument("--unreachable-sample", type=int, default=2000,
                        help="memories checked per index (0: every one)")
    parser.add_argument("--verify-reindex", action="store_true",
                        help="rebuild each index on a scratch copy and measure again")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, available_cpus()],
                        help="sensitive_memories' worker processes, each timed in turn "
                             "(default: 1 and every CPU)")
    parser.add_argument("--only", choices=["duplicates", "sensitive", "unreachable",
                                           "supersession"],
                        default=None, help="run one part only")
    args = parser.parse_args()
    if args.only in (None, "supersession"):
        supersession_precision(resolve_database_url())
        if args.only:
            return
    url = corpus_database(resolve_database_url(), args.rows, False)
    with ha.LongTermMemory(url, pool_size=2, cache_size=0) as store:
        counts = store.table_counts().set_index("table")["rows"]
        print(f"PostgreSQL {store.server_info['server_version']}, pgvector "
              f"{store.server_info['pgvector_version']}; {counts['nodes']:,} memories")

        if args.only in (None, "duplicates"):
            near_duplicate_recall(store, args)
        if args.only in (None, "unreachable"):
            unreachable(store, args.unreachable_sample or None, args.verify_reindex)
        if args.only in (None, "sensitive"):
            sensitive(store, args.workers)


def unreachable(store: ha.LongTermMemory, sample: int | None, verify: bool) -> None:
    started = time.perf_counter()
    lost = ha.unreachable_memories(store, sample=sample, verify_reindex=verify)
    seconds = time.perf_counter() - started
    print(f"\n## unreachable_memories(k=10, ef_search=40, sample={sample}, "
          f"verify_reindex={verify}): {seconds:.1f} s", flush=True)
    print(lost.attrs["summary"].drop(columns=["what_to_do"]).to_string(index=False))
    for row in lost.attrs["summary"].itertuples():
        print(f"{row.index}: {row.what_to_do}")


def supersession_precision(server: str) -> None:
    """Precision and recall of supersession_candidates on the hand-labelled set: every pair
    it reports is checked against the labels (a pair of two subjects is a false one)."""
    data = json.loads(LABELLED.read_text())
    memories = data["memories"]
    vectors = np.load(LABELLED.with_name("supersession_labelled-minilm.npy")).astype(np.float32)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    truth = {(p["old"], p["new"]) for p in data["pairs"] if p["supersedes"]}
    with scratch_database(server, "htm_bench_supersession") as url, \
            ha.LongTermMemory(url, init_schema=True, cache_size=0) as store:
        store.bulk_add([m["content"] for m in memories], robots="labelled",
                       embeddings=vectors, tags=[m["tags"] for m in memories],
                       remembered_at=[start + dt.timedelta(days=m["day"]) for m in memories])
        key_of = dict(zip(store.node_ids_by_content([m["content"] for m in memories]),
                          (m["key"] for m in memories)))
        started = time.perf_counter()
        found = ha.supersession_candidates(store)
        seconds = time.perf_counter() - started
    flagged = {(key_of[int(a)], key_of[int(b)])
               for a, b in zip(found["node_old"], found["node_new"])}
    hits = len(flagged & truth)
    print(f"\n## supersession_candidates on {len(memories)} labelled memories "
          f"({len(data['pairs'])} same-subject pairs, {len(truth)} supersessions): "
          f"{seconds:.2f} s")
    print(f"flagged {len(flagged)}: precision {hits / max(len(flagged), 1):.3f}, "
          f"recall {hits / len(truth):.3f}")
    roles = collections.Counter(
        (p["old"].split("/")[1], p["new"].split("/")[1]) for p in data["pairs"]
        if (p["old"], p["new"]) in flagged and (p["old"], p["new"]) not in truth)
    print("false ones by roles (older, newer):", dict(roles))


def near_duplicate_recall(store: ha.LongTermMemory, args: argparse.Namespace) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    pairs = ha.near_duplicates(store, min_similarity=args.threshold, pairs="all")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    found = set(zip(pairs.loc[pairs["basis"] == "vector", "node_a"].tolist(),
                    pairs.loc[pairs["basis"] == "vector", "node_b"].tolist()))
    print(f"\n## near_duplicates(min_similarity={args.threshold}): {seconds:.1f} s "
          f"({cpu:.1f} s of this process's CPU)")
    print(f"{len(pairs):,} pairs in {pairs['cluster'].nunique():,} clusters; "
          f"{len(found):,} by vector, {int(pairs['text_twin'].sum()):,} text twins "
          f"({int((pairs['basis'] == 'text').sum())} of them only by text)")

    started = time.perf_counter()
    batches = list(store.iter_vectors(384))
    ids = np.concatenate([b[0] for b in batches])
    vectors = np.vstack([b[1] for b in batches])
    truth = brute_force_pairs(ids, vectors, args.threshold)
    brute_seconds = time.perf_counter() - started
    recall = len(found & truth) / max(len(truth), 1)
    precision = len(found & truth) / max(len(found), 1)
    print(f"brute force (numpy, every row block against the whole matrix): "
          f"{len(truth):,} pairs in {brute_seconds:.1f} s")
    print(f"recall {recall:.4f}, precision {precision:.4f}")

    # The alternative: an HNSW self-join (each memory's own vector as the query).
    rng = np.random.default_rng(0)
    sample = rng.choice(len(ids), size=min(args.hnsw_sample, len(ids)), replace=False)
    sampled = set(ids[sample].tolist())
    truth_sampled = {p for p in truth if p[0] in sampled or p[1] in sampled}
    print(f"\n## HNSW self-join on {len(sample)} sampled memories "
          f"({len(truth_sampled)} true pairs touch them)")
    with store.tuning_session() as session:
        for k, ef in ((20, 40), (50, 100), (100, 200)):
            result = session.knn(vectors[sample], dimension=384, k=k, ef_search=ef)
            got = set()
            for position, neighbours in zip(sample, result["ids"]):
                me = int(ids[position])
                got.update((min(me, int(n)), max(me, int(n))) for n in neighbours
                           if int(n) != me)
            hit = len(truth_sampled & got) / max(len(truth_sampled), 1)
            per_query = float(result["seconds"].mean())
            print(f"k={k}, ef_search={ef}: recall {hit:.4f}, {per_query * 1000:.1f} ms "
                  f"per memory, so ~{per_query * len(ids):.0f} s for all "
                  f"{len(ids):,} (before the exact similarity check)")



def sensitive(store: ha.LongTermMemory, workers: list[int]) -> None:
    timed = {}
    for count in workers:
        started, cpu = time.perf_counter(), time.process_time()
        findings = ha.sensitive_memories(store, workers=count)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(f"\n## sensitive_memories(workers={count}): {seconds:.1f} s ({cpu:.1f} s CPU "
              f"in this process) for {findings.attrs['scanned']:,} memories", flush=True)
        if timed:  # the same findings, in the same order, however many workers
            pd.testing.assert_frame_equal(findings, next(iter(timed.values()))[1])
        timed[count] = (seconds, findings)
    first = workers[0]
    for count, (seconds, _) in timed.items():
        print(f"workers={count}: {timed[first][0] / seconds:.2f}x the speed of workers={first}")
    print(findings.groupby(["kind", "detector"]).size().to_string())
    # Distinct addresses, counted here without printing any of them.
    addresses: collections.Counter[str] = collections.Counter()
    for node in findings.loc[findings["kind"] == "email", "node_id"].unique().tolist():
        text = store.describe_nodes([int(node)])["content"].iloc[0]
        for finding in find_sensitive(text, kinds=("email",)):
            addresses[text[finding.start:finding.end].lower()] += 1
    assert all(_EMAIL.fullmatch(a) for a in addresses)
    print(f"e-mail findings: {int((findings['kind'] == 'email').sum())} in "
          f"{findings.loc[findings['kind'] == 'email', 'node_id'].nunique()} memories, "
          f"{len(addresses)} distinct addresses")
    print("credential excerpts (masked):")
    for row in findings[findings["kind"] == "credential"].itertuples():
        print(f"  {row.node_id} {row.detector}: {row.excerpt}")


if __name__ == "__main__":
    main()
