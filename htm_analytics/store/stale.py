"""The read behind :func:`htm_analytics.stale_memories`: the stale memories, as listed.

A memory is stale when it was created before the cutoff and not recalled since: by the access
columns (whose ``last_accessed`` counts only with ``access_count > 0``: the schema sets it at
creation) or the event log's ``recall`` events, whichever is later. The list is ordered least
recently recalled (or, never recalled, created) first, then by id.

One statement returns the rows as the list shows them: the first characters of each text
(cut on the server; :func:`~htm_analytics.store.display.shorten_beginning` makes the shown
text of them) and the names of the robots that remember it, aggregated on the server. Rows
stream in chunks and are shortened chunk by chunk: no text of a memory left out of the list
is read, and of a listed one only ``width`` + 80 characters (more, in the same transaction,
only when those are mostly whitespace). Without a limit, the robots' names are aggregated
once for all memories (for those in scope when a scope is given) and joined in one pass;
with one, only the stale memories' keys are sorted, and the text and names read for the
rows kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import psycopg

from ..validation import validate_moment, validate_positive_int
from ._base import StoreBase
from .hygiene import scope_condition, scope_parameters
from .text_previews import SPARE, shown_texts
from .vector_stream import one_snapshot

__all__ = ["STALE_ROW_COLUMNS", "StaleMixin"]

STALE_ROW_COLUMNS = {"node_id": "int64", "created_at": "datetime64[us, UTC]",
                     "last_recalled": "datetime64[us, UTC]", "access_count": "int64",
                     "recalls_logged": "int64", "content": "string", "robots": "string"}

_RECALLS = """
recalls AS (
    SELECT e.node_id, max(e.occurred_at) AS last_event, count(*) AS events
    FROM memory_events e WHERE e.kind = 'recall' GROUP BY e.node_id)"""

_LAST_RECALLED = ("greatest(CASE WHEN n.access_count > 0 THEN n.last_accessed END, "
                  "r.last_event)")

_ROBOT_NAMES = "string_agg(r.name, ', ' ORDER BY r.name)"

# Every stale memory, in one pass over the memories in scope. Without a scope (the three
# parameters NULL, folded to true when the statement is planned with its values) the names
# are aggregated for every memory; with one, for the memories in scope only.
_ALL = f"""
WITH {_RECALLS},
names AS (
    SELECT rn.node_id, {_ROBOT_NAMES} AS robots
    FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
    WHERE (%(start)s::timestamptz IS NULL AND %(end)s::timestamptz IS NULL
           AND %(robots)s::text[] IS NULL)
       OR EXISTS (SELECT 1 FROM nodes n WHERE n.id = rn.node_id AND {scope_condition()})
    GROUP BY rn.node_id),
accessed AS (
    SELECT n.id, n.created_at, n.access_count, coalesce(r.events, 0) AS events,
           {_LAST_RECALLED} AS last_recalled, left(n.content, %(head)s::int) AS content
    FROM nodes n LEFT JOIN recalls r ON r.node_id = n.id
    WHERE {scope_condition()} AND n.created_at < %(cutoff)s)
SELECT a.id AS node_id, a.created_at, a.last_recalled, a.access_count,
       a.events AS recalls_logged, a.content, coalesce(m.robots, '') AS robots
FROM accessed a LEFT JOIN names m ON m.node_id = a.id
WHERE coalesce(a.last_recalled, '-infinity') < %(cutoff)s
ORDER BY coalesce(a.last_recalled, a.created_at), a.id"""

# The first %(limit)s stale memories, and how many there are: the keys of all of them
# sorted (top-N), the text and names read for the rows kept only.
_FIRST = f"""
WITH {_RECALLS},
stale AS MATERIALIZED (
    SELECT n.id, n.created_at, n.access_count, coalesce(r.events, 0) AS events,
           {_LAST_RECALLED} AS last_recalled
    FROM nodes n LEFT JOIN recalls r ON r.node_id = n.id
    WHERE {scope_condition()} AND n.created_at < %(cutoff)s
      AND coalesce({_LAST_RECALLED}, '-infinity') < %(cutoff)s)
SELECT k.id AS node_id, k.created_at, k.last_recalled, k.access_count,
       k.events AS recalls_logged,
       (SELECT left(n.content, %(head)s::int) FROM nodes n WHERE n.id = k.id) AS content,
       coalesce((SELECT {_ROBOT_NAMES} FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
                 WHERE rn.node_id = k.id), '') AS robots,
       (SELECT count(*) FROM stale) AS stale_total
FROM (SELECT * FROM stale ORDER BY coalesce(last_recalled, created_at), id
      LIMIT %(limit)s::bigint) k
ORDER BY coalesce(k.last_recalled, k.created_at), k.id"""

_CHUNK_ROWS = 10_000


class StaleMixin(StoreBase):
    """The stale-memory list (see :class:`~htm_analytics.LongTermMemory`)."""

    def stale_rows(self, cutoff: Any, *, scope: Mapping[str, Any] | None = None,
                   limit: int | None = None, width: int = 120) -> tuple[pd.DataFrame, int]:
        """The memories in scope created before ``cutoff`` and not recalled since, least
        recently recalled (or created) first, then by id; the first ``limit`` (None: all).

        Returns the rows and how many memories in scope are stale (``limit`` aside), read in
        one repeatable-read transaction. Columns: ``node_id`` (int64), ``created_at`` and
        ``last_recalled`` (datetime64[us, UTC]: the later of ``nodes.last_accessed``, counted
        when ``access_count > 0``, and the event log's last ``recall``; NaT when never),
        ``access_count`` and ``recalls_logged`` (int64), ``content`` (string: the text as
        :func:`~htm_analytics.store.display.shorten_text` shows it at ``width``, made of its
        first characters only) and ``robots`` (string: the names that remember it, sorted,
        comma-separated).

        Raises
        ------
        ValidationError
            Before any query: ``cutoff`` no datetime or date, a bad ``scope``
            (:func:`~htm_analytics.frames.validate_scope`), ``limit`` or ``width``.
        """
        cutoff = validate_moment(cutoff, field="cutoff")
        bound = scope_parameters(scope)
        limit = None if limit is None else validate_positive_int(limit, field="limit")
        width = validate_positive_int(width, field="width", maximum=100_000)
        with self._transaction() as cur:
            one_snapshot(cur)
            # Planned to fetch every row, as it will be (a cursor's plan by default favours
            # the first tenth).
            cur.execute("SELECT set_config('cursor_tuple_fraction', '1', true)")
            return _read_rows(cur, self._read, bound, cutoff, limit, width)


def _read_rows(cur: psycopg.Cursor[Any], read: Callable[[str], Any],
               scope: Mapping[str, Any], cutoff: Any, limit: int | None,
               width: int) -> tuple[pd.DataFrame, int]:
    """:meth:`StaleMixin.stale_rows` in ``cur``'s transaction; ``read`` prepares a statement
    for this database (:meth:`StoreBase._read`). Rows arrive a chunk at a time, their texts
    shortened as they come, so that only the shown texts are kept."""
    head = width + SPARE
    params = {**scope, "cutoff": cutoff, "head": head, "limit": limit}
    frames = [_typed({name: [] for name in STALE_ROW_COLUMNS})]
    rows_read = total = 0
    with cur.connection.cursor(name="stale_rows", binary=True) as rows:
        rows.execute(read(_ALL if limit is None else _FIRST), params)
        while chunk := rows.fetchmany(_CHUNK_ROWS):
            values = list(zip(*chunk))
            values[5] = tuple(shown_texts(cur, read, values[0], values[5], width, head))
            frames.append(_typed(dict(zip(STALE_ROW_COLUMNS, values))))
            rows_read += len(chunk)
            total = rows_read if limit is None else int(chunk[0][7])
    return pd.concat(frames, ignore_index=True), total


def _typed(columns: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """One chunk of rows as a typed frame (its Python objects freed as it is made)."""
    frame = pd.DataFrame(columns)
    for name in ("created_at", "last_recalled"):
        frame[name] = pd.to_datetime(frame[name], utc=True)
    return frame.astype(STALE_ROW_COLUMNS)
