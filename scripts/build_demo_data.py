"""Build the demo memory bundled in the package (htm_analytics/data/) from the corpus.

Usage: python scripts/build_demo_data.py [--corpus ../shared/data/debian-memories]

3,000 rows chosen with a fixed seed (1,000 of them answer a dev query, so the demo can
measure real retrieval), descriptions under 4,000 characters, embeddings kept as float16 as in
the corpus. Re-running gives the same files.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from htm_analytics.agent.datasets import find_corpus, read_corpus, read_dev_queries

OUT = Path(__file__).resolve().parents[1] / "htm_analytics" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=None)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--with-queries", type=int, default=1000)
    args = parser.parse_args()
    corpus = find_corpus(args.corpus)
    frame, _ = read_corpus(corpus, embeddings=False)
    queries, query_vectors = read_dev_queries(corpus)
    rng = np.random.default_rng(2026)
    short = frame["content"].str.len() < 4000
    queried = queries[queries["row"].isin(frame.loc[short, "row"])]
    picked_queries = queried.iloc[rng.choice(len(queried), args.with_queries, replace=False)]
    others = frame.loc[short & ~frame["row"].isin(queries["row"]), "row"].to_numpy()
    rows = np.sort(np.concatenate([
        picked_queries["row"].to_numpy(),
        rng.choice(others, args.rows - args.with_queries, replace=False)]))
    matrix = np.load(corpus / "content-minilm.npy", mmap_mode="r")
    chosen = frame.set_index("row").loc[rows].reset_index()
    OUT.mkdir(exist_ok=True)
    with gzip.GzipFile(OUT / "demo-memories.jsonl.gz", "wb", mtime=0) as handle:
        for record in chosen[["package", "section", "tags", "content"]].to_dict("records"):
            record["tags"] = list(record["tags"])
            handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode())
    np.save(OUT / "demo-minilm.npy", np.asarray(matrix[rows], dtype=np.float16))
    position = {row: i for i, row in enumerate(rows)}
    picked_queries = picked_queries.sort_values("row")
    with gzip.GzipFile(OUT / "demo-queries.jsonl.gz", "wb", mtime=0) as handle:
        for row, title in zip(picked_queries["row"], picked_queries["title"]):
            handle.write((json.dumps({"position": position[row], "title": title}) + "\n")
                         .encode())
    index = queries.reset_index(drop=True)
    query_rows = index.index[index["row"].isin(picked_queries["row"])]
    ordered = index.loc[query_rows].sort_values("row").index
    np.save(OUT / "demo-queries-minilm.npy", query_vectors[ordered].astype(np.float16))
    print(f"wrote {len(rows)} memories and {len(picked_queries)} queries to {OUT}")


if __name__ == "__main__":
    main()
