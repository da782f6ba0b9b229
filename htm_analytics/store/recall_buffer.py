"""Write-behind for recalls: access counts, working-memory flags and events, flushed in sets.

A recall counts an access of each memory it returns and flags it in working memory. The
reference schema indexes ``access_count``, ``last_accessed`` and ``in_working_memory``, so
no such update is HOT: each rewrites the row into every index of ``nodes``, both HNSW graphs
included, and costs several times the search itself. ``LongTermMemory.buffer_working_memory``
records the step in memory instead and returns; a background thread writes everything
pending in **one set-based statement** per :data:`FLUSH_CHUNK` nodes (robots'
``last_active``, the nodes' counts, times and flags, and the event log, as data-modifying
CTEs) every ``flush_interval`` seconds, and sooner once ``flush_every`` steps are pending.
A node recalled several times between two flushes is rewritten once, with its accesses
added up.

Nothing is lost: a failed flush puts back what it did not write (and logs a warning) to be retried;
``flush_recall_writes()`` writes everything now; ``close()`` flushes,
and so does the interpreter's exit for a store left open. The buffer is bounded: a step that
finds ``max_pending`` entries waiting writes them itself before returning.

Effect on analysis: until a flush, the database's ``access_count``, ``last_accessed``,
``in_working_memory`` and the ``recall`` / ``evict`` events lag behind by at most
``flush_interval`` seconds (or ``flush_every`` steps, or the time of one flush). The times
written are those of the recalls, not of the flush. Call ``store.flush_recall_writes()``
before reading them when they must be exact.
"""

from __future__ import annotations

import atexit
import datetime as dt
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DatabaseError

__all__ = ["RecallBuffer", "FLUSH_RECALL_WRITES", "FLUSH_CHUNK"]

FLUSH_CHUNK = 25
"""Nodes per flush statement. At ~10-30 ms of index writes per node on the reference schema
(both HNSW graphs) a part stays far below the default 30 s ``query_timeout``; and where the
access indexes were dropped for HOT updates, small committed parts let PostgreSQL prune a
page between them, whereas one statement rewriting many rows of a page runs out of free
space on it and falls back to non-HOT updates (500 rows in one statement: 0.5 ms per row,
20 rows: 0.26 ms, measured on 10k memories)."""

_LOG = logging.getLogger("htm_analytics.store")

# One round trip: data-modifying CTEs all see the same snapshot and run to completion.
FLUSH_RECALL_WRITES = """
WITH robots_touched AS (
    UPDATE robots AS r SET last_active = greatest(r.last_active, c.at)
    FROM unnest(%(robot_ids)s::bigint[], %(robot_at)s::timestamptz[]) AS c(id, at)
    WHERE r.id = c.id
    RETURNING r.id),
nodes_touched AS (
    UPDATE nodes AS n
    SET access_count = n.access_count + c.recalls,
        last_accessed = CASE WHEN c.recalls > 0 THEN greatest(n.last_accessed, c.at)
                             ELSE n.last_accessed END,
        in_working_memory = coalesce(c.held, n.in_working_memory)
    FROM unnest(%(ids)s::bigint[], %(recalls)s::int[], %(at)s::timestamptz[],
                %(held)s::boolean[]) AS c(id, recalls, at, held)
    WHERE n.id = c.id AND (c.recalls > 0 OR n.in_working_memory IS DISTINCT FROM c.held)
    RETURNING n.id),
logged AS (
    INSERT INTO memory_events (occurred_at, kind, robot_id, node_id)
    SELECT * FROM unnest(%(event_at)s::timestamptz[], %(event_kind)s::text[],
                         %(event_robot)s::bigint[], %(event_node)s::bigint[])
    RETURNING id)
SELECT (SELECT count(*) FROM robots_touched) AS robots,
       (SELECT count(*) FROM nodes_touched) AS nodes,
       (SELECT count(*) FROM logged) AS events"""


@dataclass
class _NodeChange:
    recalls: int = 0
    at: dt.datetime | None = None  # time of the last recall
    held: bool | None = None  # last flag set; None leaves it


@dataclass
class _Batch:
    nodes: dict[int, _NodeChange] = field(default_factory=dict)
    robots: dict[int, dt.datetime] = field(default_factory=dict)
    events: list[tuple[dt.datetime, str, int, int]] = field(default_factory=list)
    steps: int = 0

    def __len__(self) -> int:
        return len(self.nodes) + len(self.events)

    def chunks(self, size: int) -> list[_Batch]:
        """The batch as parts of at most ``size`` nodes each, with their events; robots go
        with the first part and the step count with the last (written once all are)."""
        ids = sorted(self.nodes)
        parts = [_Batch(nodes={i: self.nodes[i] for i in ids[k:k + size]})
                 for k in range(0, len(ids), size)] or [_Batch()]
        part_of = {i: k // size for k, i in enumerate(ids)}
        for event in self.events:
            parts[part_of.get(event[3], 0)].events.append(event)
        parts[0].robots = dict(self.robots)
        parts[-1].steps = self.steps
        return parts

    def merge(self, other: _Batch) -> None:
        """Add ``other``, recorded after this batch."""
        for node, change in other.nodes.items():
            mine = self.nodes.setdefault(node, _NodeChange())
            mine.recalls += change.recalls
            mine.at = change.at or mine.at
            mine.held = mine.held if change.held is None else change.held
        for robot, at in other.robots.items():
            self.robots[robot] = max(at, self.robots.get(robot, at))
        self.events.extend(other.events)
        self.steps += other.steps

    def parameters(self) -> dict[str, Any]:
        ids = sorted(self.nodes)  # one lock order for concurrent flushes
        changes = [self.nodes[i] for i in ids]
        robots = sorted(self.robots)
        return {
            "robot_ids": robots, "robot_at": [self.robots[r] for r in robots],
            "ids": ids, "recalls": [c.recalls for c in changes],
            "at": [c.at for c in changes], "held": [c.held for c in changes],
            "event_at": [e[0] for e in self.events], "event_kind": [e[1] for e in self.events],
            "event_robot": [e[2] for e in self.events], "event_node": [e[3] for e in self.events],
        }


class RecallBuffer:
    """Pending working-memory steps of one store (thread-safe).

    Attributes
    ----------
    flush_interval : float
        Seconds between background flushes (default 1).
    flush_every : int
        Steps after which the background thread is woken before the interval ends
        (default 50).
    max_pending : int
        Entries (nodes plus events) above which a step flushes before it returns
        (default 20,000): the bound on the buffer's memory.
    """

    def __init__(self, flush_interval: float = 1.0, flush_every: int = 50,
                 max_pending: int = 20_000) -> None:
        self.flush_interval = flush_interval
        self.flush_every = flush_every
        self.max_pending = max_pending
        self._batch = _Batch()
        self._lock = threading.Lock()  # guards _batch
        self.flush_lock = threading.Lock()  # one flush at a time, in order
        self.wake = threading.Event()
        self.stopped = False
        self.flushes = 0
        self.flushed_steps = 0
        self.flush_seconds = 0.0
        self._thread: threading.Thread | None = None
        self._exit_hook: Any = None

    def __len__(self) -> int:
        return len(self._batch)

    @property
    def pending_steps(self) -> int:
        """Steps recorded and not yet written."""
        return self._batch.steps

    @property
    def pending(self) -> bool:
        """Whether anything waits to be written."""
        batch = self._batch
        return bool(batch.steps or batch.nodes or batch.events or batch.robots)

    def record(self, robot_id: int, at: dt.datetime, *, recalled: Sequence[int],
               held: Sequence[int], evicted: Sequence[int]) -> bool:
        """Add one step; returns True when the buffer is full and must be flushed now.

        Raises
        ------
        DatabaseError
            The buffer was stopped (its store closed): a step recorded now would never be
            written.
        """
        with self._lock:
            if self.stopped:
                raise DatabaseError("this LongTermMemory is closed")
            batch = self._batch
            for node in recalled:
                change = batch.nodes.setdefault(node, _NodeChange())
                change.recalls += 1
                change.at = at
                batch.events.append((at, "recall", robot_id, node))
            for node in held:
                batch.nodes.setdefault(node, _NodeChange()).held = True
            for node in evicted:
                batch.nodes.setdefault(node, _NodeChange()).held = False
                batch.events.append((at, "evict", robot_id, node))
            batch.robots[robot_id] = at
            batch.steps += 1
            if batch.steps % self.flush_every == 0:
                self.wake.set()
            return len(batch) >= self.max_pending

    def take(self) -> _Batch:
        """Everything pending, leaving the buffer empty."""
        with self._lock:
            batch, self._batch = self._batch, _Batch()
            return batch

    def put_back(self, batch: _Batch) -> None:
        """Return a batch whose write failed, before everything recorded since."""
        with self._lock:
            batch.merge(self._batch)
            self._batch = batch

    def written_undone(self, parts: Sequence[_Batch]) -> None:
        """Take back parts whose write was undone after it returned (the transaction it
        joined rolled back), written in this order: pending again, before what came since."""
        for part in reversed(parts):
            self.put_back(part)
            self.flushed_steps -= part.steps

    def flush(self, write: Callable[[_Batch], None]) -> int:
        """Write everything pending with ``write(part)``, one call per :data:`FLUSH_CHUNK`
        nodes (``part.parameters()`` are those of :data:`FLUSH_RECALL_WRITES`); returns the
        steps written. On failure the parts not written are put back and the error is
        raised."""
        with self.flush_lock:
            batch = self.take()
            if not (batch.steps or batch.nodes or batch.events or batch.robots):
                return 0
            started = time.perf_counter()
            parts = batch.chunks(FLUSH_CHUNK)
            for k, part in enumerate(parts):
                try:
                    write(part)
                except BaseException:
                    rest = _Batch()
                    for unwritten in parts[k:]:
                        rest.merge(unwritten)
                    self.put_back(rest)
                    raise
            self.flushes += 1
            self.flushed_steps += batch.steps
            self.flush_seconds += time.perf_counter() - started
            return batch.steps

    def start_flusher(self, flush: Callable[[], int]) -> None:
        """Start the background thread (once) and the flush at the interpreter's exit.

        ``flush`` is a bound method of the store: both hold it weakly, so that a store
        dropped without ``close()`` is still collected.
        """
        if self._thread is not None:
            return
        with self.flush_lock:
            if self._thread is None and not self.stopped:
                ref = weakref.WeakMethod(flush)
                self._exit_hook = functools.partial(_flush_at_exit, ref)
                atexit.register(self._exit_hook)
                self._thread = threading.Thread(target=_flush_loop, args=(ref, self),
                                                name="htm_analytics-recall-writes",
                                                daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Stop the background thread and refuse new steps (the caller flushes what is
        left: under the lock, so that a step is either refused or in what is left)."""
        with self._lock:
            self.stopped = True
        self.wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=60)
        if self._exit_hook is not None:
            atexit.unregister(self._exit_hook)


def _flush_loop(flush_ref: weakref.WeakMethod[Callable[[], int]], buffer: RecallBuffer
                ) -> None:
    while not buffer.stopped:
        buffer.wake.wait(buffer.flush_interval)
        buffer.wake.clear()
        flush = flush_ref()
        if flush is None or buffer.stopped:
            return
        try:
            flush()
        except Exception as exc:  # kept in the buffer; the next round retries
            _LOG.warning("recall writes not flushed yet (%s); retrying", exc)
        del flush


def _flush_at_exit(flush_ref: weakref.WeakMethod[Callable[[], int]]) -> None:
    flush = flush_ref()
    if flush is not None:
        try:
            flush()
        except Exception as exc:
            _LOG.error("recall writes lost at exit: %s", exc)
