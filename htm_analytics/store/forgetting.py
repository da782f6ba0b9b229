"""Forgetting as each HTM era does: soft (``deleted_at``, the current gem) or permanent (the
seed era), restoring a forgotten memory, and purging the ones forgotten long ago."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from psycopg import sql

from ..errors import NoSoftDeleteError, NotFoundError, ValidationError
from ..validation import validate_flag, validate_id
from ._base import StoreBase
from .schema_info import SchemaInfo

__all__ = ["ForgettingMixin", "CONFIRMATION", "set_forgotten"]

CONFIRMATION = "confirmed"
"""The value of ``confirm=`` that every permanent deletion needs (as ``HTM.forget``)."""

# The node and its robot and tag links, as the gem's forget and restore do (one transaction).
_LINKS = ("robot_nodes", "node_tags")

_PURGE = """
DELETE FROM nodes WHERE deleted_at IS NOT NULL AND deleted_at < %(cutoff)s RETURNING id"""


def _confirm(confirm: Any, what: str) -> None:
    # A str first: an array or Series compared with == is an array, whose truth is an error.
    if not isinstance(confirm, str) or confirm != CONFIRMATION:
        raise ValidationError(f'{what} deletes permanently: pass confirm="{CONFIRMATION}"',
                              field="confirm")


def _cutoff(older_than: Any) -> dt.datetime:
    """``older_than`` (an aware datetime, a date, or an age as a timedelta) as a UTC instant."""
    now = dt.datetime.now(dt.UTC)
    if isinstance(older_than, dt.timedelta):
        if older_than < dt.timedelta(0):
            raise ValidationError("must be an age >= 0", field="older_than")
        try:
            return now - older_than
        except OverflowError:
            raise ValidationError(f"an age of {older_than.days:,} days reaches before the "
                                  "year 1", field="older_than") from None
    if isinstance(older_than, dt.datetime):
        if older_than.tzinfo is None or older_than.utcoffset() is None:
            raise ValidationError("must be a datetime with a time zone (or a timedelta age)",
                                  field="older_than")
        return older_than
    if isinstance(older_than, dt.date):
        return dt.datetime.combine(older_than, dt.time(), dt.UTC)
    raise ValidationError(f"must be a datetime, a date or a timedelta, got {older_than!r}",
                          field="older_than")


def set_forgotten(cur: psycopg.Cursor[Any], info: SchemaInfo, node_id: int, *,
                  forgotten: bool) -> bool:
    """Set (or clear) ``deleted_at`` of a node and of its robot and tag links, as the gem's
    forget and restore do; whether the node changed. Also how remembering forgotten content
    restores it (:meth:`NodesMixin.add`).

    Raises
    ------
    NotFoundError
        No node with this id.
    """
    if forgotten:
        change, state = sql.SQL("CURRENT_TIMESTAMP"), sql.SQL("IS NULL")
    else:
        change, state = sql.SQL("NULL"), sql.SQL("IS NOT NULL")
    row = cur.execute(sql.SQL(
        "WITH target AS (SELECT id, deleted_at FROM nodes WHERE id = %s FOR UPDATE), "
        "changed AS (UPDATE nodes n SET deleted_at = {change}, "
        "updated_at = CURRENT_TIMESTAMP FROM target t "
        "WHERE n.id = t.id AND t.deleted_at {state} RETURNING n.id) "
        "SELECT (SELECT count(*) FROM target) AS found, "
        "(SELECT count(*) FROM changed) AS changed").format(change=change, state=state),
        (node_id,)).fetchone()
    assert row is not None
    if not row["found"]:
        raise NotFoundError(f"no memory with id {node_id}")
    if not row["changed"]:
        return False
    for table in _LINKS:
        if info.has_column(table, "deleted_at"):
            cur.execute(sql.SQL("UPDATE {} SET deleted_at = {} WHERE node_id = %s "
                                "AND deleted_at {}").format(
                sql.Identifier(table), change, state), (node_id,))
    return True


class ForgettingMixin(StoreBase):
    """:meth:`forget`, :meth:`restore` and :meth:`purge_deleted` (see
    :class:`~htm_analytics.LongTermMemory`)."""

    def forget(self, node_id: int, *, permanent: bool = False,
               confirm: str | None = None) -> bool:
        """Forget a memory, for every robot, as the database's HTM era does.

        Where the schema soft-deletes (the current gem's ``deleted_at``), the memory, its
        robot links and its tag links are marked deleted: searches, analyses and exports
        leave it out, :meth:`restore` brings it back and remembering the same content again
        restores it. With ``permanent=True`` (and ``confirm="confirmed"``) it is deleted
        instead, links included, forgotten or not. On the seed-era schema, which has no soft
        delete, forgetting is always permanent and needs the confirmation. The event log
        records it (``delete``, or ``purge`` for a forgotten memory deleted for good).

        Parameters
        ----------
        node_id : int
            The memory.
        permanent : bool
            Delete the rows instead of marking them.
        confirm : str, optional
            ``"confirmed"``, required by every permanent deletion.

        Returns
        -------
        bool
            True if the memory was forgotten now; False if it was already forgotten (soft).

        Raises
        ------
        ValidationError
            A bad id, or a permanent deletion without the confirmation.
        NotFoundError
            No memory with this id.
        """
        node_id = validate_id(node_id, field="node_id")
        permanent = validate_flag(permanent, field="permanent")
        soft = self.schema_info.soft_deletes and not permanent
        if not soft:
            _confirm(confirm, "forgetting" if self.schema_info.soft_deletes else
                     "forgetting on a schema without soft delete")
        with self._transaction(memory_operation=True) as cur:
            self._claim_event_logging(cur)
            if soft:
                forgotten = set_forgotten(cur, self.schema_info, node_id, forgotten=True)
            else:
                row = cur.execute("DELETE FROM nodes WHERE id = %s RETURNING id",
                                  (node_id,)).fetchone()
                if row is None:
                    raise NotFoundError(f"no memory with id {node_id}")
                forgotten = True
            if forgotten:
                self._log_events(cur, "delete", None, [node_id])
        self._cache.clear()
        self._forget_stored_models()
        return forgotten

    def restore(self, node_id: int) -> bool:
        """Bring back a memory forgotten softly, with its robot and tag links.

        Returns
        -------
        bool
            True if it was restored, False if it was not forgotten.

        Raises
        ------
        NoSoftDeleteError
            The schema has no soft delete (the seed era): nothing can be restored.
        NotFoundError
            No memory with this id (a permanently deleted one is gone).
        """
        node_id = validate_id(node_id, field="node_id")
        self._require_soft_deletes("restore")
        with self._transaction(memory_operation=True) as cur:
            self._claim_event_logging(cur)
            restored = set_forgotten(cur, self.schema_info, node_id, forgotten=False)
            if restored:
                self._log_events(cur, "restore", None, [node_id])
        self._cache.clear()
        self._forget_stored_models()
        return restored

    def purge_deleted(self, *, older_than: dt.datetime | dt.date | dt.timedelta,
                      confirm: str | None = None) -> int:
        """Delete for good the memories forgotten (softly) before ``older_than``.

        Parameters
        ----------
        older_than : datetime, date or timedelta
            Memories whose ``deleted_at`` is earlier than this instant (an aware datetime,
            or a date: its midnight UTC), or older than this age, are deleted with their links.
        confirm : str
            ``"confirmed"``: the deletion is permanent.

        Returns
        -------
        int
            How many memories were deleted.

        Raises
        ------
        NoSoftDeleteError
            The schema has no soft delete (the seed era): there is nothing to purge.
        ValidationError
            A bad ``older_than``, or no confirmation.
        """
        cutoff = _cutoff(older_than)
        self._require_soft_deletes("purge")
        _confirm(confirm, "purging")
        with self._transaction(memory_operation=True) as cur:
            self._claim_event_logging(cur)
            purged = [int(r["id"]) for r in cur.execute(_PURGE, {"cutoff": cutoff}).fetchall()]
            if purged:
                self._log_events(cur, "purge", None, purged)
        if purged:
            self._cache.clear()
            self._forget_stored_models()
        return len(purged)

    def _require_soft_deletes(self, what: str) -> None:
        if not self.schema_info.soft_deletes:
            raise NoSoftDeleteError(
                f"cannot {what}: this database's schema has no soft delete (no "
                f"nodes.deleted_at; {self.schema_info.era} era), so forgetting deleted "
                "memories permanently")
