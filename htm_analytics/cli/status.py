"""``htm-analytics status``: the server, what the database has, row counts and indexes, as one
table, one CSV table or one JSON document; on a database without the schema too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ._app import cli
from ._database import choose_database, say_database, store_options
from ._output import emit, emit_document, human_bytes, output_options

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["status"]

_INDEX_COLUMNS = ["table", "index", "method", "is_unique", "size_bytes"]


def _extension(installed: str | None, available: str | None) -> str:
    if installed:
        return installed
    if available:
        return f"not installed in this database ({available} available: htm-analytics init-db)"
    return "not available on this server"


def _role(standby: dict[str, Any] | None) -> str:
    """A primary, or a standby with how far its replay is behind."""
    if standby is None:
        return "primary (not in recovery)"
    lag = standby["replay_lag_seconds"]
    said = "unknown" if lag is None else f"{lag:.1f} s"
    line = (f"hot standby (in recovery, read-only): replay lag {said}, "
            f"{human_bytes(standby['replay_lag_bytes'] or 0)} received not yet replayed")
    if standby["wal_receiver"]:
        line += f", WAL receiver {standby['wal_receiver']}"
    if standby["last_replayed_at"] is not None:
        line += f"; last replayed commit {standby['last_replayed_at']:%Y-%m-%d %H:%M:%S %Z}"
    return line


def _status_document(url: str, why: str, indexes: bool,
                     options: dict[str, Any]) -> dict[str, Any]:
    """Everything ``status`` shows, as plain values and frames."""
    import pandas as pd

    from ..store import LongTermMemory, missing_schema_error, server_overview
    from ..store.connection import mask_url, resolve_database_url

    overview = server_overview(resolve_database_url(url))
    problem = missing_schema_error(overview, url)
    document: dict[str, Any] = {
        "database": mask_url(url), "database_name": overview["database"], "chosen_by": why,
        "server": {"postgresql": overview["server_version"],
                   "pgvector": overview["pgvector_version"],
                   "pgvector_available": overview["pgvector_available"],
                   "pg_trgm": overview["pg_trgm_version"],
                   "pg_trgm_available": overview["pg_trgm_available"],
                   "standby": overview["standby"]},
        "schema": None, "problem": None if problem is None else str(problem),
        "tables": pd.DataFrame({"table": pd.Series(dtype="string"),
                                "rows": pd.Series(dtype="int64")}),
        "indexes": pd.DataFrame(columns=_INDEX_COLUMNS) if indexes else None}
    if problem is None:
        with LongTermMemory(url, cache_size=0, pool_size=1, **options) as store:
            document["schema"] = {"version": store.server_info["schema_version"],
                                  "found": store.schema_info.describe(),
                                  **store.schema_info.as_dict()}
            document["tables"] = store.table_counts()
            if indexes:
                document["indexes"] = store.index_list()[_INDEX_COLUMNS]
    return document


def _one_table(document: dict[str, Any]) -> pd.DataFrame:
    """Row counts, and with indexes one line per index carrying its table's rows."""
    tables, index_frame = document["tables"], document["indexes"]
    if index_frame is None:
        return tables
    merged = tables.merge(index_frame, on="table", how="outer")
    # The toolkit's additions have indexes but no row count here: empty, not a float column.
    merged["rows"] = merged["rows"].astype("Int64")
    return merged[["table", "rows", *_INDEX_COLUMNS[1:]]]


@cli.command()
@click.option("--indexes/--no-indexes", default=True, help="Also list the indexes.")
@output_options(json_help="Print one JSON object (see above).")
@click.pass_context
def status(ctx: click.Context, indexes: bool, fmt: str) -> None:
    """Server and extension versions, what the database has, row counts and indexes.

    Works on any database: one without the memory schema gets the server's versions and
    what to run; a hot standby says so, with its replay lag. --json prints one object:
    database, database_name, chosen_by, server (postgresql, pgvector, pgvector_available,
    pg_trgm, pg_trgm_available, standby: null on a primary, else last_replayed_at,
    replay_lag_seconds, replay_lag_bytes, wal_receiver), schema (null without the HTM
    tables), problem, tables [{table, rows}] and indexes [{table, index,
    method, is_unique, size_bytes}]; --csv one table of those rows.
    """
    url, why = choose_database(ctx)
    say_database(url, why)
    document = _status_document(url, why, indexes, store_options(ctx))
    if fmt == "json":
        emit_document(document)
        return
    if fmt == "csv":
        emit(_one_table(document), "csv")
        return
    server = document["server"]
    click.echo(f"database:   {document['database']}")
    click.echo(f"postgresql: {server['postgresql']}")
    click.echo(f"pgvector:   {_extension(server['pgvector'], server['pgvector_available'])}")
    click.echo(f"pg_trgm:    {_extension(server['pg_trgm'], server['pg_trgm_available'])}")
    click.echo(f"server:     {_role(server['standby'])}")
    if document["schema"] is None:
        click.echo(f"schema:     absent: {document['problem']}")
        return
    click.echo(f"schema:     version {document['schema']['version']}")
    click.echo(f"found:      {document['schema']['found']}\n")
    emit(document["tables"], "table")
    if indexes:
        click.echo("")
        frame = document["indexes"]
        emit(frame, "table")
        total = human_bytes(frame["size_bytes"].sum()) if len(frame) else "0 bytes"
        click.echo(f"({len(frame)} indexes, {total})")
