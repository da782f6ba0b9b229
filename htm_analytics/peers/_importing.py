"""What every peer importer shares: source rows mapped to memories, written in chunks.

An importer describes each source table as a query and a function that turns one source row
into a :class:`SourceRow` (a memory to remember, an event about an imported memory, or a
record to keep). :func:`import_tables` streams the rows chunk by chunk, skips rows an earlier
import recorded (so importing twice changes nothing), remembers the new ones with
:meth:`LongTermMemory.bulk_add` and keeps every source row whole in ``import_records``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._progress import progress_bar
from ..agent.tokens import count_tokens
from ..errors import HTMError, ValidationError
from ..store import LongTermMemory, content_hash
from ..store.sources import count_rows, stream_rows, table_columns, table_exists
from ..validation import (
    validate_content,
    validate_embedding_model,
    validate_name,
    validate_positive_int,
    validate_tag,
)
from ._values import (
    as_utc,
    embedding_problem,
    jsonable,
    robot_name,
    slug_tag,
    storable_key,
    storable_record,
    vector_or_none,
)

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "ImportSummary",
    "SourceRow",
    "TableSpec",
    "TableSummary",
    "as_utc",
    "import_tables",
    "missing_tables",
    "jsonable",
    "slug_tag",
    "validate_source_name",
    "vector_or_none",
]

DEFAULT_CHUNK_ROWS = 5_000


@dataclass
class SourceRow:
    """One source row, mapped.

    ``content`` set: a memory remembered by ``robot`` at ``remembered_at`` with ``tags`` and
    ``embedding``. ``event`` set (``(kind, table, key)``): a ``memory_events`` row of that kind
    for the node another imported row became. Neither: the row is only kept as a record.
    ``reject`` names why a row could not be mapped (it is still kept as a record).

    ``content``, ``robot`` and ``embedding`` are the source's values as read: the import
    checks them (:func:`_prepare`) and rejects the row, with a reason naming the source
    column that ``columns`` gives for each (``{"robot": "agent_id"}``; by default the
    field's own name), when the store would refuse one.
    """

    key: str
    record: dict[str, Any]
    content: Any = None
    robot: Any = None
    remembered_at: dt.datetime | None = None
    tags: list[str] = field(default_factory=list)
    embedding: Any = None
    event: tuple[str, str, str] | None = None
    reject: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)

    def column(self, name: str) -> str:
        """The source column of the field ``name`` (for reasons and errors)."""
        return self.columns.get(name, name)


@dataclass(frozen=True)
class TableSpec:
    """A source table: its query (ordered by its key), how a row maps, and the columns
    the import reads (a table of that name without them is another system's)."""

    table: str
    query: Any  # str or psycopg.sql.Composed
    mapper: Callable[[dict[str, Any]], SourceRow]
    optional: bool = False
    # Rows never change once written and are keyed by the source's own row ids (logs,
    # messages, executions): a recorded key with another record is another source's row.
    append_only: bool = False
    columns: tuple[str, ...] = ()


@dataclass
class TableSummary:
    """Counts of one source table's import."""

    table: str
    read: int = 0
    imported: int = 0
    already_imported: int = 0
    duplicates: int = 0
    rejected: int = 0
    chunks: int = 0
    reasons: Counter[str] = field(default_factory=Counter)


@dataclass
class ImportSummary:
    """What an import read and did, per source table.

    ``imported`` counts new records (each source row is recorded once); ``duplicates`` the
    memories whose content was already stored (they reinforce the existing node, which is
    the store's deduplication); ``already_imported`` rows an earlier import brought in;
    ``rejected`` rows that could not become a memory, with ``reasons`` (they are recorded
    all the same, so no source column is lost).
    """

    system: str
    source: str
    tables: dict[str, TableSummary] = field(default_factory=dict)
    missing_tables: list[str] = field(default_factory=list)

    def table(self, name: str) -> TableSummary:
        """The counts of one table (created empty on first use)."""
        return self.tables.setdefault(name, TableSummary(name))

    @property
    def total(self) -> TableSummary:
        """Counts over every table."""
        total = TableSummary("(total)")
        for part in self.tables.values():
            for name in ("read", "imported", "already_imported", "duplicates", "rejected",
                         "chunks"):
                setattr(total, name, getattr(total, name) + getattr(part, name))
            total.reasons.update(part.reasons)
        return total

    def to_frame(self) -> pd.DataFrame:
        """One row per table and a total.

        Returns
        -------
        pandas.DataFrame
            ``table`` (string), ``read``, ``imported``, ``already_imported``, ``duplicates``,
            ``rejected``, ``chunks`` (int64) and ``reasons`` (string: ``reason: count`` joined
            by ``; ``).
        """
        rows = [*self.tables.values(), self.total]
        frame = pd.DataFrame([{
            "table": r.table, "read": r.read, "imported": r.imported,
            "already_imported": r.already_imported, "duplicates": r.duplicates,
            "rejected": r.rejected, "chunks": r.chunks,
            "reasons": "; ".join(f"{k}: {v}" for k, v in sorted(r.reasons.items())),
        } for r in rows])
        return frame.astype({"table": "string", "read": "int64", "imported": "int64",
                             "already_imported": "int64", "duplicates": "int64",
                             "rejected": "int64", "chunks": "int64", "reasons": "string"})

    def __str__(self) -> str:
        total = self.total
        text = (f"{self.system} import from {self.source}: {total.read} rows read, "
                f"{total.imported} imported, {total.already_imported} already imported, "
                f"{total.duplicates} duplicates, {total.rejected} rejected")
        if total.reasons:
            text += " (" + "; ".join(f"{k}: {v}" for k, v in sorted(total.reasons.items())) + ")"
        if self.missing_tables:
            text += f"; tables not in the source: {', '.join(self.missing_tables)}"
        return text


# -- the import loop -------------------------------------------------------------------------

def _ensure_robots(store: LongTermMemory, names: Iterable[str],
                   metadata: Callable[[str], Mapping[str, Any]]) -> dict[str, int]:
    wanted = sorted(set(names))
    known = store.robot_ids(wanted)
    for name in wanted:
        if name not in known:
            known[name] = store.register_robot(name, metadata=metadata(name))
    return known


def _prepare(row: SourceRow) -> SourceRow:
    """Check what the store would refuse, so that one bad row never fails its chunk: the
    row is rejected with the reason, naming its source column, and kept as a record (with
    its vector when that became no node's embedding)."""
    if row.robot is not None:
        try:
            row.robot = robot_name(row.robot, field=row.column("robot"))
        except ValidationError as exc:
            row.robot = None
            row.reject = row.reject or str(exc)
    if row.content is not None and not row.reject:
        try:
            row.content = validate_content(row.content, field=row.column("content"))
        except ValidationError as exc:
            row.reject = str(exc)
        if row.robot is None and not row.reject:
            row.reject = f"no {row.column('robot')}"
    vector, problem = embedding_problem(row.embedding, field=row.column("embedding"))
    if row.content is not None and not row.reject:
        row.reject = problem
    _keep_record(row)
    if row.embedding is not None and (row.reject or row.content is None):
        row.record[row.column("embedding")] = jsonable(row.embedding)  # lose nothing
        _keep_record(row)
        vector = None
    row.embedding = vector
    row.tags = [tag for tag in row.tags if _is_tag(tag)]
    return row


def _keep_record(row: SourceRow) -> None:
    """Reject ``row``, naming the column, when ``import_records`` could not keep its record
    as it is (a ``jsonb`` nested too deep): that column is kept as its JSON text instead."""
    reason = storable_record(row.record)
    if reason:
        row.reject = row.reject or reason


def _is_tag(tag: str) -> bool:
    try:
        validate_tag(tag)
    except ValidationError:
        return False
    return True


def _named(row: SourceRow, source_name: str | None) -> SourceRow:
    """``row`` with its key, and the key its event points at, under ``source_name`` (or as
    ``import_records`` keeps it: :func:`storable_key`)."""

    def named(key: str) -> str:
        return storable_key(key) if source_name is None else f"{source_name}:{key}"

    row.key = named(row.key)
    if row.event is not None:
        kind, tables, key = row.event
        row.event = (kind, tables, named(key))
    return row


def _source_rows(spec: TableSpec, chunk: list[dict[str, Any]],
                 source_name: str | None) -> list[SourceRow]:
    """A chunk of ``spec``'s table as the import reads it: mapped, prepared, keyed under
    ``source_name``. A mapper's surprise is a :class:`ValidationError` naming the table,
    raised before anything of the chunk is written."""
    rows = []
    for raw in chunk:
        try:
            mapped = spec.mapper(raw)
        except HTMError:
            raise
        except Exception as exc:
            raise ValidationError(f"could not read a {spec.table} row: {exc}",
                                  field="source") from exc
        rows.append(_named(_prepare(mapped), source_name))
    return rows


def _refuse_another_source(store: LongTermMemory, conn: Any, specs: Sequence[TableSpec], *,
                           system: str, chunk_rows: int, source_name: str | None) -> None:
    """Read the source once before anything is written, where an earlier import of its
    system recorded rows, and refuse it if a key it recorded holds another row here: the
    source is another one (two agents' files both count their rows from 1), and skipping its
    rows as already imported would lose them."""
    if not store.has_imported(system):
        return
    for spec in specs:
        for chunk in stream_rows(conn, spec.query, chunk_rows):
            rows = _source_rows(spec, chunk, source_name)
            if spec.append_only:  # the whole row, whatever it became
                records = {r.key: _compared(r.record) for r in rows}
                stored = store.imported_records(system, spec.table, list(records))
                other = [key for key, record in stored.items()
                         if _compared(record) != records[key]]
            else:  # rows that change (FSRS state, versions) compare by their memory's text
                memories = {r.key: r.content for r in rows
                            if r.content is not None and not r.reject}
                hashes = store.imported_content_hashes(system, spec.table, list(memories)) \
                    if memories else {}
                other = [key for key, stored_hash in hashes.items()
                         if stored_hash != content_hash(memories[key] or "")]
            if other:
                shown = ", ".join(other[:3]) + (", ..." if len(other) > 3 else "")
                raise ValidationError(
                    f"{len(other):,} {spec.table} rows have keys ({shown}) that an earlier "
                    "import recorded for other rows: this is another source. Import it "
                    "under a name of its own (source_name=..., --source-name) to keep its "
                    "keys apart; nothing was written", field="source_name")


def _compared(record: Mapping[str, Any]) -> dict[str, Any]:
    """A source row's record as an import compares it: without the import's own notes
    (``_rejected``), through JSON as the store keeps it."""
    return json.loads(json.dumps({k: v for k, v in record.items() if not k.startswith("_")},
                                 default=str))


def _remember(store: LongTermMemory, rows: list[SourceRow], robot_ids: Mapping[str, int],
              embedding_model: tuple[str, str] | None, summary: TableSummary,
              now: dt.datetime) -> list[dict[str, Any]]:
    """bulk_add the memories, one call per embedding dimension; return their records."""
    groups: dict[int | None, list[SourceRow]] = {}
    for row in rows:
        dimension = None if row.embedding is None else int(row.embedding.size)
        groups.setdefault(dimension, []).append(row)
    records = []
    for dimension, group in groups.items():
        added = store.bulk_add(
            [r.content or "" for r in group], robots=[r.robot or "" for r in group],
            embeddings=None if dimension is None else np.vstack([r.embedding for r in group
                                                               if r.embedding is not None]),
            tags=[r.tags for r in group], token_counts=[count_tokens(r.content or "")
                                                        for r in group],
            remembered_at=[r.remembered_at or now for r in group],
            embedding_model=embedding_model if dimension is not None else None,
            check_models=False)  # a faithful copy: the advisor reports a mix of models
        summary.duplicates += int((~added["is_new"]).sum())
        for row, node_id in zip(group, added["node_id"].tolist()):
            records.append({"key": row.key, "record": row.record,
                            "robot_id": robot_ids[row.robot or ""], "node_id": int(node_id)})
    return records


def _sorted_rows(rows: Iterable[SourceRow], robot_ids: Mapping[str, int],
                 summary: TableSummary) -> tuple[list[SourceRow], list[SourceRow],
                                                 list[dict[str, Any]]]:
    """The memories and the events among ``rows``, and the records of the others (rejected
    rows counted, with their reason)."""
    memories, events, records = [], [], []
    for row in rows:
        if row.reject:
            summary.rejected += 1
            summary.reasons[row.reject] += 1
            records.append({"key": row.key, "robot_id": robot_ids.get(row.robot or ""),
                            "record": {**row.record, "_rejected": row.reject}})
        elif row.content is not None:
            memories.append(row)
        elif row.event is not None:
            events.append(row)
        else:
            records.append({"key": row.key, "record": row.record,
                            "robot_id": robot_ids.get(row.robot or "")})
    return memories, events, records


def _events(store: LongTermMemory, system: str, rows: list[SourceRow],
            robot_ids: Mapping[str, int], summary: TableSummary) -> list[dict[str, Any]]:
    """Records for event rows, each with the node its target row became.

    An event's table may name several tables joined by ``|``: the first that imported the
    key gives the node (a SEAF execution runs a tool or a composite tool).
    """
    records = []
    targets: dict[str, set[str]] = {}
    for row in rows:
        assert row.event is not None
        for table in row.event[1].split("|"):
            targets.setdefault(table, set()).add(row.event[2])
    nodes = {table: store.imported_keys(system, table, sorted(keys))
             for table, keys in targets.items()}
    for row in rows:
        kind, tables, key = row.event  # type: ignore[misc]
        node_id = next((nodes[t][key] for t in tables.split("|") if nodes[t].get(key)), None)
        item: dict[str, Any] = {"key": row.key, "record": row.record,
                                "robot_id": robot_ids.get(row.robot or "")}
        if node_id is None:
            reason = f"no imported {tables.replace('|', ' or ')} row"
            summary.rejected += 1
            summary.reasons[reason] += 1
            item["record"] = {**row.record, "_rejected": f"{reason} {key!r}"}
        else:
            item.update(node_id=node_id, event=(row.remembered_at or None, kind))
        records.append(item)
    return records


def missing_tables(conn: Any, specs: Sequence[TableSpec], *, system: str) -> list[str]:
    """The optional tables of ``specs`` the source lacks; a :class:`ValidationError` naming
    ``source`` when it lacks a required one (it is then not that system's database)."""
    missing = [spec for spec in specs if not table_exists(conn, spec.table)]
    for spec in missing:
        if not spec.optional:
            raise ValidationError(f"the source has no {spec.table} table: is it {system}'s "
                                  "database?", field="source")
    for spec in specs:
        if spec not in missing and spec.columns:
            lacking = sorted(set(spec.columns) - table_columns(conn, spec.table))
            if lacking:
                raise ValidationError(
                    f"the source's {spec.table} table has no {', '.join(lacking)} column"
                    f"{'s' if len(lacking) > 1 else ''}: is it {system}'s database?",
                    field="source")
    return [spec.table for spec in missing]


MAX_CHUNK_ROWS = 1_000_000  # a chunk is held in memory; SQLite's fetchmany takes a C int


def validate_source_name(value: Any) -> str | None:
    """None, or a name to keep a source's keys apart from another's of the same system."""
    if value is None:
        return None
    name = validate_name(value, field="source_name", max_length=100)
    if ":" in name:  # it ends the prefix of every key
        raise ValidationError("must not contain ':'", field="source_name")
    return name


def import_tables(store: LongTermMemory, conn: Any, specs: Sequence[TableSpec], *,
                  system: str, source: str, chunk_rows: int, progress: bool,
                  embedding_model: tuple[str, str] | None,
                  robot_metadata: Callable[[str], Mapping[str, Any]],
                  source_name: str | None = None) -> ImportSummary:
    """Stream each table of ``specs`` from ``conn`` into ``store``; see the module docstring."""
    if not isinstance(store, LongTermMemory):
        raise ValidationError("must be a LongTermMemory", field="store")
    chunk_rows = validate_positive_int(chunk_rows, field="chunk_rows", maximum=MAX_CHUNK_ROWS)
    source_name = validate_source_name(source_name)
    embedding_model = validate_embedding_model(embedding_model)  # before any table is read
    summary = ImportSummary(system, source)
    summary.missing_tables += missing_tables(conn, specs, system=system)
    present = [spec for spec in specs if spec.table not in summary.missing_tables]
    _refuse_another_source(store, conn, present, system=system, chunk_rows=chunk_rows,
                           source_name=source_name)
    total = sum(count_rows(conn, s.table) for s in present) if progress else None
    now = dt.datetime.now(dt.UTC)
    with progress_bar(bool(progress), total, f"importing {system}", "row") as bar:
        for spec in present:
            part = summary.table(spec.table)
            for chunk in stream_rows(conn, spec.query, chunk_rows):
                _import_chunk(store, system, spec, chunk, part, now, embedding_model,
                              robot_metadata, source_name)
                bar.update(len(chunk))
    return summary


def _import_chunk(store: LongTermMemory, system: str, spec: TableSpec,
                  chunk: list[dict[str, Any]], part: TableSummary, now: dt.datetime,
                  embedding_model: tuple[str, str] | None,
                  robot_metadata: Callable[[str], Mapping[str, Any]],
                  source_name: str | None) -> None:
    part.read += len(chunk)
    part.chunks += 1
    rows = _source_rows(spec, chunk, source_name)
    done = store.imported_keys(system, spec.table, [r.key for r in rows])
    fresh: dict[str, SourceRow] = {}
    for row in rows:
        if row.key in done or row.key in fresh:
            part.already_imported += 1
        else:
            fresh[row.key] = row
    if not fresh:
        return
    rejected_before = part.rejected
    try:
        # One transaction: an import killed midway leaves no memory without its record (nor
        # a robot of no row), so the next run neither skips it nor remembers it twice.
        with store.atomic():
            robot_ids = _ensure_robots(store, [r.robot for r in fresh.values() if r.robot],
                                       robot_metadata)
            memories, events, records = _sorted_rows(fresh.values(), robot_ids, part)
            if memories:
                records.extend(_remember(store, memories, robot_ids, embedding_model, part,
                                         now))
            if events:
                records.extend(_events(store, system, events, robot_ids, part))
            recorded = store.record_imports(system, spec.table, records)
        part.imported += recorded - (part.rejected - rejected_before)
    except HTMError:
        raise
    except Exception as exc:  # a mapper's surprise, named with its table
        raise ValidationError(f"could not import {spec.table}: {exc}", field="source") from exc
