"""What a bulk load's insert into ``nodes`` spends on the toolkit's triggers, and whether
doing their work set-based instead would pay.

Usage:
    python benchmarks/bench_node_insert.py --database URL [--rounds 2]

``URL``: a memory kept by ``bench_scale.py --keep``. Each variant runs in a transaction that
is rolled back: the memory's distinct contents are staged as ``bulk_add`` stages them (the
vector at its own dimension), ``nodes`` is emptied and its search indexes dropped (a load
larger than the table defers them), then ``bulk_add``'s insert runs and is timed, with:

- ``as loaded``: the row trigger filling ``node_search_vectors`` and the statement trigger
  filling ``node_lexicon`` (``sql/004``, ``sql/009``), as every writer has them;
- ``set-based``: both triggers disabled in the transaction, their rows then written by one
  statement each (the same ``to_tsvector`` and word lists), timed with the insert;
- ``no triggers``: both disabled and nothing written for them (a floor, not a load: search
  vectors and lexicon missing).

Variants run alternately, ``--rounds`` times; the medians are printed with their ratio to
``as loaded``. Nothing is kept.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

STAGE = """
CREATE TEMP TABLE stage ON COMMIT DROP AS
SELECT content, content_hash, token_count,
       subvector(embedding, 1, embedding_dimension) AS embedding,
       embedding_dimension AS dimension, created_at AS remembered_at
FROM nodes ORDER BY id"""

EMPTY = """
TRUNCATE nodes, node_tags, robot_nodes, node_search_vectors, node_lexicon, memory_events,
         node_embedding_models CASCADE;
DROP INDEX idx_nodes_embedding, idx_nodes_content_gin, idx_nodes_content_trgm,
           idx_node_search_vectors_content_tsv"""

OFF = """
ALTER TABLE nodes DISABLE TRIGGER htm_analytics_search_vector;
ALTER TABLE nodes DISABLE TRIGGER htm_analytics_lexicon"""

INSERT = """
INSERT INTO nodes (content, content_hash, token_count, embedding, embedding_dimension,
                   created_at, updated_at, last_accessed)
SELECT content, content_hash, token_count,
       (embedding::real[] || array_fill(0::real, ARRAY[2000 - dimension]))::vector,
       dimension, remembered_at, remembered_at, remembered_at
FROM stage ON CONFLICT (content_hash) DO NOTHING RETURNING id, content_hash"""

SET_BASED = (
    "INSERT INTO node_search_vectors (node_id, content_tsv) "
    "SELECT id, to_tsvector('english', content) FROM nodes",
    "INSERT INTO node_lexicon (word) SELECT DISTINCT w FROM stage, "
    "htm_analytics_lexicon_words(stage.content) w ORDER BY w ON CONFLICT (word) DO NOTHING",
)

VARIANTS = {
    "as loaded": ((), ()),
    "set-based": ((OFF,), SET_BASED),
    "no triggers": ((OFF,), ()),
}


def timed_insert(url: str, setup: tuple[str, ...], after: tuple[str, ...]) -> tuple[float, int]:
    """Seconds of the insert and ``after``, and the rows inserted; rolled back."""
    with psycopg.connect(url) as conn:
        conn.execute(STAGE)
        conn.execute(EMPTY)
        for statement in setup:
            conn.execute(statement)
        started = time.perf_counter()
        rows = len(conn.execute(INSERT).fetchall())
        for statement in after:
            conn.execute(statement)
        seconds = time.perf_counter() - started
        conn.rollback()
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="a memory kept by bench_scale.py")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for round_number in range(args.rounds):
        names = list(VARIANTS) if round_number % 2 == 0 else list(reversed(VARIANTS))
        for name in names:
            took, rows = timed_insert(args.database, *VARIANTS[name])
            seconds[name].append(took)
            print(f"  round {round_number + 1}, {name}: {took:.2f} s ({rows:,} nodes)",
                  flush=True)
    base = statistics.median(seconds["as loaded"])
    print("\n| the insert into nodes | seconds (each round) | median | vs as loaded |")
    print("|---|---|---:|---:|")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"| {name} | {', '.join(f'{v:.2f}' for v in values)} | {median:.2f} | "
              f"{median / base:.2f}x |")


if __name__ == "__main__":
    main()
