"""The anchors ``bench_scale.py`` times ``bulk_add`` against: hand-written loads of the same
memory with raw binary COPY and the same index builds.

- :func:`raw_copy_anchor`: the distinct memories into one plain table. The issue's anchor;
  it writes no robots, tags, links or event log, so a load of HTM's tables does more.
- :func:`htm_tables_anchor`: the memory into HTM's own tables, as a hand-written loader
  would write them, leaving the state ``bulk_add`` leaves. What ``bulk_add`` costs above
  it is the cost of the toolkit itself.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

Measure = Callable[..., Any]  # bench_scale.measure
MODEL = ("sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2")
PADDED = 2000


def raw_copy_anchor(url: str, memory: dict[str, Any], results: dict[str, dict[str, float]],
                    measure: Measure, *, logged: bool = True,
                    cpu: Callable[[], float] | None = None, build_memory: str = "1GB") -> None:
    """The same distinct rows into a plain table with one binary COPY, then the indexes a
    deferred ``bulk_add`` rebuilds: HNSW on the padded vector, the full-text expression
    index, trigram, and GIN on a stored tsvector (``node_search_vectors``'s, here a
    generated column filled during the COPY). The builds get the settings the store's get:
    ``build_memory`` of ``maintenance_work_mem`` and as many workers as the server allows.

    ``logged``: a table written through the WAL, as ``nodes`` is (every user's table is);
    else an UNLOGGED table, which writes no WAL for its rows and indexes (the anchor of the
    earlier figures, a lower bound no durable load reaches).
    """
    seen: set[str] = set()
    label = "anchor" if logged else "unlogged anchor"
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.add_notice_handler(lambda notice: print(f"    {notice.message_primary}"))
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(build_memory)))
        # the build workers the store's builds get (create_index): vectors live in TOAST, so
        # the heap alone would leave a 10k-row build without one
        conn.execute("SET min_parallel_table_scan_size = 0")
        conn.execute(sql.SQL("""CREATE {} TABLE anchor (id bigserial PRIMARY KEY, content text,
                        content_hash varchar(64) UNIQUE, embedding vector(2000),
                        created_at timestamptz, content_tsv tsvector
                        GENERATED ALWAYS AS (to_tsvector('english', content)) STORED)""").format(
            sql.SQL("" if logged else "UNLOGGED")))
        padding = np.zeros(PADDED - memory["vectors"].shape[1], dtype=np.float32)

        def copy() -> None:
            with conn.cursor() as cur, cur.copy(
                    "COPY anchor (content, content_hash, embedding, created_at) FROM STDIN "
                    "WITH (FORMAT BINARY)") as out:
                out.set_types(["text", "varchar", "vector", "timestamptz"])
                for text, vector, at in zip(memory["contents"], memory["vectors"],
                                            memory["remembered_at"]):
                    if text in seen:
                        continue
                    seen.add(text)
                    out.write_row((text, hashlib.sha256(text.encode()).hexdigest(),
                                   np.concatenate([vector, padding]), at))

        measure(f"{label}: binary COPY", copy, results, cpu)
        measure(f"{label}: HNSW build (padded)", lambda: conn.execute(
            "CREATE INDEX ON anchor USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = 16, ef_construction = 64)"), results, cpu)
        measure(f"{label}: full-text + trigram GIN", lambda: (
            conn.execute("CREATE INDEX ON anchor USING gin "
                         "(to_tsvector('english', content))"),
            conn.execute("CREATE INDEX ON anchor USING gin (content gin_trgm_ops)"),
            conn.execute("CREATE INDEX ON anchor USING gin (content_tsv)")), results, cpu)
        conn.execute("DROP TABLE anchor")


# The indexes a deferred bulk_add drops and builds again (a hand-written loader knows them).
_SEARCH_INDEXES = ["idx_nodes_embedding", "idx_nodes_content_gin", "idx_nodes_content_trgm",
                   "idx_node_search_vectors_content_tsv"]


def _links(memory: dict[str, Any]) -> dict[str, Any]:
    """The rows of each table, in time order (of equal times, the first given): the
    distinct contents (each at its first remember), every remember, and each (memory, tag)
    pair at its first remember, with the tags' ancestors, as ``bulk_add`` attaches them.
    Contents and tags become integer codes first, so that the pairs are found in arrays."""
    remembers = pd.DataFrame({"content": memory["contents"], "robot": memory["robots"],
                              "at": pd.to_datetime(memory["remembered_at"], utc=True)})
    remembers = remembers.sort_values("at", kind="stable")
    node = pd.factorize(remembers["content"])[0]  # numbered in order of first remember
    remembers["node"] = node
    firsts = remembers.iloc[np.unique(node, return_index=True)[1]].copy()
    lists = [memory["tags"][row] for row in remembers.index]
    tag, given = pd.factorize(pd.Series(list(itertools.chain.from_iterable(lists)),
                                        dtype=object))
    code: dict[str, int] = {}
    lineage = []  # each given tag's ancestors and itself, as codes into names
    for name in given:
        parts = name.split(":")
        lineage.append([code.setdefault(":".join(parts[:depth]), len(code))
                        for depth in range(1, len(parts) + 1)])
    names = list(code)
    sizes = np.array([len(chain) for chain in lineage], dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    flat = np.fromiter(itertools.chain.from_iterable(lineage), dtype=np.int64)
    position = np.repeat(np.arange(len(lists)), [len(row) for row in lists])
    repeats = sizes[tag]
    position = np.repeat(position, repeats)
    offset = np.arange(repeats.sum()) - np.repeat(np.cumsum(repeats) - repeats, repeats)
    linked = flat[np.repeat(starts[tag], repeats) + offset]
    # np.unique gives each pair's first occurrence: its earliest remember
    first = np.sort(np.unique(node[position] * len(names) + linked, return_index=True)[1])
    tags = pd.DataFrame({"node": node[position[first]], "tag": linked[first],
                         "at": remembers["at"].array[position[first]]})
    return {"firsts": firsts, "remembers": remembers, "tags": tags, "tag_names": names}


def htm_tables_anchor(url: str, memory: dict[str, Any],
                      results: dict[str, dict[str, float]], measure: Measure, *,
                      cpu: Callable[[], float] | None = None,
                      build_memory: str = "1GB") -> None:
    """The memory into HTM's tables of ``url`` (a new database with the toolkit's schema,
    as ``bulk_add``'s), by a hand-written loader with the same result: in one transaction,
    the search indexes dropped; the rows prepared with pandas; robots, tags, the distinct
    memories (at their first remember, vectors padded, ids reserved from the sequence),
    their model, the robot links (counts, first and last times), every remember in the event
    log and the tag links with their ancestors, each with one binary COPY; the indexes
    built again with the same settings; ANALYZE. The node triggers run as for every writer.
    """
    label = "tables anchor"
    with psycopg.connect(url) as conn:
        register_vector(conn)  # before the cursor, which copies the connection's types
        cur = conn.cursor()
        cur.execute("SELECT set_config('maintenance_work_mem', %s, true), "
                    "set_config('min_parallel_table_scan_size', '0', true), "
                    "set_config('htm_analytics.events_written', 'on', true)",
                    (build_memory,))
        rows: dict[str, Any] = {}
        definitions: list[str] = []

        def drop_indexes() -> None:
            definitions.extend(row[0] for row in cur.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' "
                "AND indexname = ANY(%s)", (_SEARCH_INDEXES,)))
            cur.execute(sql.SQL("DROP INDEX {}").format(sql.SQL(", ").join(
                map(sql.Identifier, _SEARCH_INDEXES))))

        def build() -> None:
            for definition in definitions:
                cur.execute(definition)
            for table in ("nodes", "node_search_vectors", "node_lexicon"):
                cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))

        measure(f"{label}: drop search indexes", drop_indexes, results, cpu)
        measure(f"{label}: prepare rows (pandas)",
                lambda: rows.update(_links(memory)), results, cpu)
        measure(f"{label}: COPY nodes (triggers)",
                lambda: _copy_nodes(cur, memory, rows), results, cpu)
        measure(f"{label}: COPY robots, tags, links, events",
                lambda: _copy_links(cur, rows), results, cpu)
        measure(f"{label}: index builds, ANALYZE", build, results, cpu)
        measure(f"{label}: commit", conn.commit, results, cpu)


def _copy_nodes(cur: psycopg.Cursor[Any], memory: dict[str, Any],
                rows: dict[str, Any]) -> None:
    firsts = rows["firsts"]
    ids = [row[0] for row in cur.execute(
        "SELECT nextval(pg_get_serial_sequence('public.nodes', 'id')) "
        "FROM generate_series(1, %s)", (len(firsts),))]
    firsts["id"] = ids
    vectors = memory["vectors"]
    dimension = vectors.shape[1]
    padded = np.zeros(PADDED, dtype=np.float32)
    with cur.copy("COPY nodes (id, content, content_hash, token_count, embedding, "
                  "embedding_dimension, created_at, updated_at, last_accessed) "
                  "FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "text", "varchar", "int4", "vector", "int4", "timestamptz",
                        "timestamptz", "timestamptz"])
        for node, text, row, at in zip(ids, firsts["content"].tolist(),
                                       firsts.index.tolist(), firsts["at"].tolist()):
            padded[:dimension] = vectors[row]
            copy.write_row((node, text, hashlib.sha256(text.encode()).hexdigest(), 0,
                            padded, dimension, at, at, at))
    with cur.copy("COPY node_embedding_models (node_id, provider, model, dimension) "
                  "FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "text", "text", "int4"])
        for node in ids:
            copy.write_row((node, *MODEL, dimension))


def _copy_links(cur: psycopg.Cursor[Any], rows: dict[str, Any]) -> None:
    remembers, tags = rows["remembers"], rows["tags"]
    node_ids = rows["firsts"]["id"].to_numpy()
    remembers["node_id"] = node_ids[remembers["node"].to_numpy()]
    robots = remembers.groupby("robot")["at"].agg(["min", "max"])
    with cur.copy("COPY robots (name, created_at, last_active) FROM STDIN "
                  "(FORMAT BINARY)") as copy:
        copy.set_types(["text", "timestamptz", "timestamptz"])
        for record in robots.itertuples():
            copy.write_row(record)
    robot_id = dict(cur.execute("SELECT name, id FROM robots"))
    remembers["robot_id"] = remembers["robot"].map(robot_id)
    links = remembers.groupby(["robot_id", "node_id"])["at"].agg(["min", "max", "size"])
    with cur.copy("COPY robot_nodes (robot_id, node_id, first_remembered_at, "
                  "last_remembered_at, remember_count, created_at, updated_at) FROM STDIN "
                  "(FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int8", "timestamptz", "timestamptz", "int4", "timestamptz",
                        "timestamptz"])
        for (robot, node), first, last, count in links.itertuples():
            copy.write_row((robot, node, first, last, count, first, last))
    with cur.copy("COPY memory_events (occurred_at, kind, robot_id, node_id) FROM STDIN "
                  "(FORMAT BINARY)") as copy:
        copy.set_types(["timestamptz", "text", "int8", "int8"])
        for at, robot, node in zip(remembers["at"].tolist(), remembers["robot_id"].tolist(),
                                   remembers["node_id"].tolist()):
            copy.write_row((at, "remember", robot, node))
    with cur.copy("COPY tags (name) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["text"])
        for name in sorted(rows["tag_names"]):
            copy.write_row((name,))
    tag_id = dict(cur.execute("SELECT name, id FROM tags"))
    tag_ids = np.array([tag_id[name] for name in rows["tag_names"]], dtype=np.int64)
    with cur.copy("COPY node_tags (node_id, tag_id, created_at) FROM STDIN "
                  "(FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int8", "timestamptz"])
        for node, tag, at in zip(node_ids[tags["node"].to_numpy()].tolist(),
                                 tag_ids[tags["tag"].to_numpy()].tolist(),
                                 tags["at"].tolist()):
            copy.write_row((node, tag, at))
