"""Imports from other memory systems: source rows kept whole, and their events, once each."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..errors import ValidationError
from ..validation import (
    validate_datetime,
    validate_id,
    validate_json,
    validate_key,
    validate_list,
    validate_name,
)
from ._base import StoreBase
from ._common import EVENT_KINDS, lift_statement_timeout

__all__ = ["ImportsMixin", "MAX_IMPORT_KEY_BYTES"]

MAX_IMPORT_KEY_BYTES = 2600
"""The UTF-8 bytes a record's key may take with its ``source_system`` and ``source_table``: the
three make one entry of ``import_records``' primary key, and a B-tree entry holds about 2,700
(PostgreSQL's limit, 2704 bytes, with the entry's own headers). Names take at most 255
characters; a key takes what they leave."""


def _import_row(item: Any, number: int, key_bytes: int) -> tuple[Any, ...]:
    """One record of :meth:`ImportsMixin.record_imports`, validated, as a staging row; its key
    may take ``key_bytes`` bytes of UTF-8."""
    field = f"records[{number}]"
    if not isinstance(item, Mapping) or "key" not in item or "record" not in item:
        raise ValidationError("must be a mapping with 'key' and 'record'", field=field)
    robot_id, node_id = (None if item.get(name) is None else
                         validate_id(item[name], field=field) for name in ("robot_id", "node_id"))
    event = item.get("event")
    occurred_at, kind = None, None
    if event is not None:
        if not isinstance(event, (tuple, list)) or len(event) != 2:
            raise ValidationError("event must be an (occurred_at, kind) pair", field=field)
        occurred_at = None if event[0] is None else validate_datetime(event[0], field=field)
        kind = validate_name(event[1], field=field)
        if kind not in EVENT_KINDS:
            raise ValidationError(f"event kind must be one of {', '.join(EVENT_KINDS)}, got "
                                  f"{kind!r:.40}", field=field)
    record = item["record"]
    if not isinstance(record, Mapping):
        raise ValidationError("record must be a mapping", field=field)
    key = validate_key(item["key"], field=field)
    if len(key.encode("utf-8")) > key_bytes:
        raise ValidationError(f"key is {len(key.encode('utf-8'))} bytes of UTF-8; with "
                              f"source_system and source_table it may take {key_bytes} "
                              f"({MAX_IMPORT_KEY_BYTES} for the three)", field=field)
    return (key, robot_id, node_id, occurred_at, kind,
            Jsonb(validate_json(dict(record), field=field)))


class ImportsMixin(StoreBase):
    """``import_records`` and read-only access for the importers of
    :mod:`htm_analytics.peers` (see :class:`~htm_analytics.LongTermMemory`)."""


    def _recorded(self, columns: str, source_system: str, source_table: str,
                  keys: Sequence[str], *, live_node: bool = False) -> list[dict[str, Any]]:
        """``columns`` of ``import_records r`` (and ``nodes n`` with ``live_node``: the live
        memory each became) for the recorded ``keys`` of one source table."""
        params = (validate_name(source_system, field="source_system"),
                  validate_name(source_table, field="source_table"),
                  [validate_key(k, field="keys") for k in validate_list(keys, field="keys")])
        return self._fetch(f"""SELECT r.source_key, {columns} FROM import_records r
                               {"JOIN nodes n ON n.id = r.node_id" if live_node else ""}
                               WHERE r.source_system = %s AND r.source_table = %s
                                 AND r.source_key = ANY(%s::text[])""", params)

    def imported_keys(self, source_system: str, source_table: str,
                      keys: Sequence[str]) -> dict[str, int | None]:
        """Which of ``keys`` an earlier import already recorded, with the node each became.

        Returns
        -------
        dict
            ``{source_key: node_id or None}`` for the keys found in ``import_records``.
        """
        rows = self._recorded("r.node_id", source_system, source_table, keys)
        return {r["source_key"]: (None if r["node_id"] is None else int(r["node_id"]))
                for r in rows}

    def has_imported(self, source_system: str) -> bool:
        """Whether an earlier import of ``source_system`` recorded anything here."""
        source_system = validate_name(source_system, field="source_system")
        return bool(self._fetch("SELECT EXISTS (SELECT 1 FROM import_records "
                                "WHERE source_system = %s) AS found",
                                (source_system,))[0]["found"])

    def imported_records(self, source_system: str, source_table: str,
                         keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The source rows an earlier import kept for ``keys`` (those it recorded)."""
        rows = self._recorded("r.record", source_system, source_table, keys)
        return {r["source_key"]: dict(r["record"]) for r in rows}

    def imported_content_hashes(self, source_system: str, source_table: str,
                                keys: Sequence[str]) -> dict[str, str]:
        """The content hash of the live memory each of ``keys`` became in an earlier import
        (keys whose row became no memory, or whose memory is gone, are left out): a source
        row under a recorded key with other content comes from another source."""
        rows = self._recorded("n.content_hash", source_system, source_table, keys,
                              live_node=True)
        return {r["source_key"]: r["content_hash"] for r in rows}

    def record_imports(self, source_system: str, source_table: str,
                       records: Sequence[Mapping[str, Any]]) -> int:
        """Keep imported source rows whole in ``import_records``; log their events.

        Each record has ``key`` (str), ``record`` (JSON-able mapping) and optionally
        ``robot_id``, ``node_id`` and ``event`` (``(occurred_at, kind)``: a row of
        ``memory_events`` for that robot and node, written in the same transaction). Keys
        already recorded are left alone, so recording twice changes nothing. Returns the
        number of new records.

        Raises
        ------
        ValidationError
            Before anything is written: a bad name (``source_system``, ``source_table``), or
            a bad record (``records[i]``): not a mapping with ``key`` and ``record``, a bad
            id, an event kind the event log does not take (``remember``, ``retrieve``,
            ``recall``, ``evict``, ``delete``, ``restore``, ``purge``), or a key longer than
            the index holds (:data:`MAX_IMPORT_KEY_BYTES` of UTF-8 with the two names).
        """
        source_system = validate_name(source_system, field="source_system")
        source_table = validate_name(source_table, field="source_table")
        key_bytes = MAX_IMPORT_KEY_BYTES - len(source_system.encode("utf-8")) \
            - len(source_table.encode("utf-8"))
        rows = [_import_row(item, i, key_bytes)
                for i, item in enumerate(validate_list(records, field="records"))]
        if not rows:
            return 0
        with self._transaction() as cur:
            lift_statement_timeout(cur)
            cur.execute("""CREATE TEMP TABLE htm_import_staging (
                               source_key text, robot_id bigint, node_id bigint,
                               occurred_at timestamptz, kind text, record jsonb)
                           ON COMMIT DROP""")
            with cur.copy("COPY htm_import_staging FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cur.execute("""
                WITH fresh AS MATERIALIZED (
                    SELECT DISTINCT ON (s.source_key) s.*,
                           CASE WHEN s.kind IS NOT NULL THEN nextval(pg_get_serial_sequence(
                               'public.memory_events', 'id')) END AS event_id
                    FROM htm_import_staging s
                    WHERE NOT EXISTS (SELECT 1 FROM import_records r
                                      WHERE r.source_system = %(system)s
                                        AND r.source_table = %(table)s
                                        AND r.source_key = s.source_key)
                    ORDER BY s.source_key),
                events AS (
                    INSERT INTO memory_events (id, occurred_at, kind, robot_id, node_id)
                    SELECT event_id, coalesce(occurred_at, CURRENT_TIMESTAMP), kind, robot_id,
                           node_id
                    FROM fresh WHERE kind IS NOT NULL)
                INSERT INTO import_records (source_system, source_table, source_key,
                                            robot_id, node_id, event_id, record)
                SELECT %(system)s, %(table)s, source_key, robot_id, node_id, event_id, record
                FROM fresh
                ON CONFLICT (source_system, source_table, source_key) DO NOTHING""",
                        {"system": source_system, "table": source_table})
            inserted = cur.rowcount
            # Dropped now, not at commit: ``atomic`` may hold several calls.
            cur.execute("DROP TABLE pg_temp.htm_import_staging")
        self._cache.clear()
        return int(inserted)

    def robot_ids(self, names: Sequence[str], *, field: str = "names") -> dict[str, int]:
        """``{name: id}`` of the robots among ``names`` that exist (the oldest of a name);
        ``field``: the argument a bad name is blamed on."""
        wanted = [validate_name(n, field=field) for n in validate_list(names, field=field)]
        rows = self._fetch("""SELECT name, min(id) AS id FROM robots
                              WHERE name = ANY(%s::text[]) GROUP BY name""", (wanted,))
        return {r["name"]: int(r["id"]) for r in rows}

    def robot_names(self) -> list[str]:
        """Every robot's name, in order."""
        return [r["name"] for r in self._fetch("SELECT DISTINCT name FROM robots ORDER BY name")]

    @contextmanager
    def read_only_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one read-only transaction, for analyses of other
        tables in the store's database (driver errors come out as :class:`HTMError`)."""
        self._check_open()
        with self._translated_errors(), self._pool.connection() as conn:
            conn.execute("SET TRANSACTION READ ONLY")
            yield conn
            conn.rollback()
