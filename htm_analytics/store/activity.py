"""Robots and what they do: registering, accesses, working-memory flags and evictions."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb

from ..errors import NotFoundError, ValidationError
from ..validation import validate_id, validate_ids, validate_json, validate_name
from ._base import StoreBase

__all__ = ["ActivityMixin", "ROBOT_LOCKS", "lock_robot_names", "validate_step"]

# Counts recalls and sets working-memory flags in one rewrite per node, skipping rows that
# would not change (a NULL held flag leaves the flag as it is).
_UPDATE_WORKING_MEMORY = """
UPDATE nodes AS n
SET access_count = n.access_count + c.recalled::int,
    last_accessed = CASE WHEN c.recalled THEN CURRENT_TIMESTAMP ELSE n.last_accessed END,
    in_working_memory = coalesce(c.held, n.in_working_memory)
FROM unnest(%(ids)s::bigint[], %(recalled)s::boolean[], %(held)s::boolean[])
     AS c(id, recalled, held)
WHERE n.id = c.id AND (c.recalled OR n.in_working_memory IS DISTINCT FROM c.held)"""

# The current gem keeps the flag per robot, on robot_nodes: accesses go to nodes, flags there.
_COUNT_RECALLS = """
UPDATE nodes SET access_count = access_count + 1, last_accessed = CURRENT_TIMESTAMP
WHERE id = ANY(%(ids)s::bigint[])"""

_SET_ROBOT_WORKING_MEMORY = """
UPDATE robot_nodes AS rn SET working_memory = c.held
FROM unnest(%(ids)s::bigint[], %(held)s::boolean[]) AS c(id, held)
WHERE rn.node_id = c.id AND (rn.robot_id = %(robot_id)s OR %(robot_id)s::bigint IS NULL)
  AND c.held IS NOT NULL AND rn.working_memory IS DISTINCT FROM c.held"""


ROBOT_LOCKS = 256
"""Advisory locks that serialise find-or-create of robots: a name takes the lock of its hash's
bucket, so that a load of thousands of robots holds at most this many."""


def lock_robot_names(cur: psycopg.Cursor[Any], names: Sequence[str]) -> None:
    """Serialise find-or-create of these robot names until the transaction ends."""
    # robots.name has no unique index in the reference schema; an advisory lock per name
    # bucket makes find-or-create safe under concurrency. Buckets are locked in one order,
    # so that two loads never wait for each other in a cycle.
    cur.execute("""SELECT count(pg_advisory_xact_lock(hashtext('htm_robot'), bucket))
                   FROM (SELECT DISTINCT hashtext(n) & %s AS bucket
                         FROM unnest(%s::text[]) AS n ORDER BY bucket) AS buckets""",
                (ROBOT_LOCKS - 1, list(names)))


def validate_step(robot_id: Any, held: Any, evicted: Any, recalled: Any
                  ) -> tuple[int, set[int], set[int], set[int]]:
    """A working-memory step's robot and node ids, checked; a node both held and evicted is
    refused."""
    robot_id = validate_id(robot_id, field="robot_id")
    held_ids = set(validate_ids(held, field="held"))
    evicted_ids = set(validate_ids(evicted, field="evicted"))
    recalled_ids = set(validate_ids(recalled, field="recalled"))
    if both := sorted(held_ids & evicted_ids):
        raise ValidationError(f"nodes both held and evicted: {both}", field="evicted")
    return robot_id, held_ids, evicted_ids, recalled_ids

class ActivityMixin(StoreBase):
    """Robots, accesses and working memory (see :class:`~htm_analytics.LongTermMemory`)."""

    def register_robot(self, robot_name: str, *, metadata: Mapping[str, Any] | None = None) -> int:
        """Find or create the robot of this name, mark it active, and return its id.

        Concurrent registrations of one name give one robot (an advisory lock on the name).
        """
        name = validate_name(robot_name, field="robot_name")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValidationError("must be a mapping", field="metadata")
        if metadata is not None:
            metadata = validate_json(dict(metadata), field="metadata")
        with self._transaction(memory_operation=True) as cur:
            lock_robot_names(cur, [name])
            row = cur.execute("""UPDATE robots SET last_active = CURRENT_TIMESTAMP
                                 WHERE id = (SELECT min(id) FROM robots WHERE name = %s)
                                 RETURNING id""", (name,)).fetchone()
            if row is None and not self.schema_info.has_column("robots", "metadata"):
                if metadata:
                    raise ValidationError("this database's robots table has no metadata "
                                          "column (current HTM gem schema)", field="metadata")
                row = cur.execute("INSERT INTO robots (name) VALUES (%s) RETURNING id",
                                  (name,)).fetchone()
            if row is None:
                row = cur.execute(
                    "INSERT INTO robots (name, metadata) VALUES (%s, %s) RETURNING id",
                    (name, Jsonb(dict(metadata)) if metadata else None),
                ).fetchone()
            assert row is not None
            return int(row["id"])

    def update_robot_activity(self, robot_id: int) -> None:
        """Set a robot's ``last_active`` to now (NotFoundError for an unknown robot)."""
        robot_id = validate_id(robot_id, field="robot_id")
        with self._transaction(memory_operation=True) as cur:
            cur.execute("UPDATE robots SET last_active = CURRENT_TIMESTAMP WHERE id = %s",
                        (robot_id,))
            if cur.rowcount == 0:
                raise NotFoundError(f"no robot with id {robot_id}")

    def track_access(self, node_ids: Sequence[int], *, robot_id: int | None = None,
                     event: Literal["retrieve", "recall"] = "retrieve") -> int:
        """Count one access for each node (bulk ``access_count + 1``, ``last_accessed = now``).

        With ``robot_id``, the accesses also go to the event log as ``event``. Returns the
        number of nodes updated; unknown ids are ignored (and not logged).

        Raises
        ------
        NotFoundError
            An unknown ``robot_id`` (nothing is written).
        """
        ids = sorted(set(validate_ids(node_ids, field="node_ids")))
        if event not in ("retrieve", "recall"):
            raise ValidationError("must be 'retrieve' or 'recall'", field="event")
        if not ids:
            return 0
        with self._transaction(memory_operation=True) as cur:
            cur.execute("""UPDATE nodes SET access_count = access_count + 1,
                                            last_accessed = CURRENT_TIMESTAMP
                           WHERE id = ANY(%s::bigint[])""", (ids,))
            updated = cur.rowcount
            if robot_id is not None:
                robot = validate_id(robot_id, field="robot_id")
                self._log_events(cur, event, robot, _stored_of(cur, robot, ids))
            return updated

    def mark_evicted(self, node_ids: Sequence[int], *, robot_id: int | None = None) -> int:
        """Flag nodes as no longer in working memory (``in_working_memory = false``).

        ``robot_id``, when given, is recorded in the event log. Where the schema keeps the flag
        per robot (the current gem's ``robot_nodes.working_memory``), that robot's rows are
        updated (every robot's without ``robot_id``). Returns the rows updated; unknown node
        ids are ignored (and not logged), an unknown ``robot_id`` is a NotFoundError
        (nothing is written).
        """
        return self._set_working_memory(node_ids, False, robot_id, "evict")

    def mark_in_working_memory(self, node_ids: Sequence[int], *,
                               robot_id: int | None = None) -> int:
        """Flag nodes as held in working memory (``in_working_memory = true``; on the current
        gem's schema, ``robot_nodes.working_memory`` of ``robot_id``'s rows)."""
        return self._set_working_memory(node_ids, True, robot_id, None)

    def update_working_memory(self, robot_id: int, *, held: Sequence[int] = (),
                              evicted: Sequence[int] = (),
                              recalled: Sequence[int] = ()) -> None:
        """One robot's working-memory step, in one transaction.

        ``recalled`` nodes count an access (as :meth:`track_access` with ``event="recall"``),
        ``held`` nodes are flagged in working memory, ``evicted`` ones out (logged as
        ``evict`` events), and the robot's ``last_active`` is set. On the current gem's schema
        the flags are this robot's ``robot_nodes.working_memory``. Each node row is rewritten
        at most once and only if a value changes: the reference schema indexes every column
        touched here, so each rewrite adds entries to every index of ``nodes``, the HNSW
        index included.

        Raises
        ------
        ValidationError
            Bad ids, or a node both held and evicted.
        NotFoundError
            Unknown robot (nothing is written).
        """
        robot_id, held_ids, evicted_ids, recalled_ids = validate_step(
            robot_id, held, evicted, recalled)
        self._flush_before_direct_write()
        ids = sorted(held_ids | evicted_ids | recalled_ids)
        flags = [True if i in held_ids else False if i in evicted_ids else None for i in ids]
        with self._transaction(memory_operation=True) as cur:
            cur.execute("UPDATE robots SET last_active = CURRENT_TIMESTAMP WHERE id = %s",
                        (robot_id,))
            if cur.rowcount == 0:
                raise NotFoundError(f"no robot with id {robot_id}")
            if ids and self._flags_on_robot_nodes:
                if recalled_ids:
                    cur.execute(_COUNT_RECALLS, {"ids": sorted(recalled_ids)})
                cur.execute(_SET_ROBOT_WORKING_MEMORY, {"ids": ids, "held": flags,
                                                        "robot_id": robot_id})
            elif ids:
                cur.execute(_UPDATE_WORKING_MEMORY, {
                    "ids": ids, "recalled": [i in recalled_ids for i in ids], "held": flags})
            for kind, node_ids in (("recall", recalled_ids), ("evict", evicted_ids)):
                if node_ids:
                    self._log_events(cur, kind, robot_id, sorted(node_ids))

    def buffer_working_memory(self, robot_id: int, *, held: Sequence[int] = (),
                              evicted: Sequence[int] = (), recalled: Sequence[int] = ()) -> None:
        """:meth:`update_working_memory`, written behind: recorded now, flushed in sets.

        The step is validated as by :meth:`update_working_memory` and recorded with the
        current time; see :mod:`htm_analytics.store.recall_buffer` for when it reaches the
        database (:meth:`flush_recall_writes` writes it now). The robot is not looked up (an
        unknown robot's step updates no robot). Where the schema keeps working memory per
        robot (the current gem's ``robot_nodes.working_memory``) or has no event log, the
        step is written directly instead: the buffer's set-based statement is the reference
        schema's.

        Raises
        ------
        ValidationError
            Bad ids, or a node both held and evicted (nothing is recorded).
        """
        info = self.schema_info
        if info.working_memory_column != "nodes.in_working_memory" or not info.has_event_log:
            self.update_working_memory(robot_id, held=held, evicted=evicted, recalled=recalled)
            return
        robot_id, held_ids, evicted_ids, recalled_ids = validate_step(
            robot_id, held, evicted, recalled)
        buffer = self._recall_buffer
        buffer.start_flusher(self.flush_recall_writes)
        full = buffer.record(robot_id, dt.datetime.now(dt.UTC), recalled=sorted(recalled_ids),
                             held=sorted(held_ids), evicted=sorted(evicted_ids))
        if full:
            self.flush_recall_writes()

    @property
    def _flags_on_robot_nodes(self) -> bool:
        """Whether working memory is kept per robot (``robot_nodes.working_memory``)."""
        return self.schema_info.working_memory_column == "robot_nodes.working_memory"

    def _set_working_memory(self, node_ids: Sequence[int], flag: bool, robot_id: int | None,
                            event: str | None) -> int:
        ids = sorted(set(validate_ids(node_ids, field="node_ids")))
        if robot_id is not None:
            robot_id = validate_id(robot_id, field="robot_id")
        if not ids:
            return 0
        self._flush_before_direct_write()
        with self._transaction(memory_operation=True) as cur:
            if self._flags_on_robot_nodes:
                cur.execute(_SET_ROBOT_WORKING_MEMORY, {"ids": ids, "held": [flag] * len(ids),
                                                        "robot_id": robot_id})
            else:
                cur.execute("UPDATE nodes SET in_working_memory = %s "
                            "WHERE id = ANY(%s::bigint[])", (flag, ids))
            updated = cur.rowcount
            if event:
                self._log_events(cur, event, robot_id, _stored_of(cur, robot_id, ids))
            return updated


def _stored_of(cur: Any, robot_id: int | None, node_ids: list[int]) -> list[int]:
    """Which of ``node_ids`` are stored, for the event log (it has no foreign keys: an
    event of an unknown node or robot would point at nothing). An unknown ``robot_id`` is
    a NotFoundError, which rolls the caller's transaction back."""
    row = cur.execute("""SELECT %(robot)s::bigint IS NULL
                                OR EXISTS (SELECT 1 FROM robots WHERE id = %(robot)s) AS known,
                                ARRAY(SELECT id FROM nodes WHERE id = ANY(%(ids)s::bigint[])
                                      ORDER BY id) AS ids""",
                      {"robot": robot_id, "ids": node_ids}).fetchone()
    if not row["known"]:
        raise NotFoundError(f"no robot with id {robot_id}")
    return list(row["ids"])
