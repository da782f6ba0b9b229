"""``htm-analytics server``: see, stop and delete the embedded PostgreSQL and its data."""

from __future__ import annotations

from pathlib import Path

import click

from ._app import cli
from ._output import emit, emit_document, human_bytes, output_options

__all__ = ["server"]


def _data_dir(ctx: click.Context) -> Path:
    """The embedded server's data directory, or the one a --db URL of one points at."""
    from ..store.connection import embedded_dir_of
    from ..store.embedded import embedded_data_dir

    url = ctx.obj.get("db") if ctx.obj else None
    if not url:
        return embedded_data_dir()
    data_dir = embedded_dir_of(url)
    if data_dir is not None:
        return data_dir
    raise click.BadParameter("names no embedded server: these commands manage the embedded "
                             "PostgreSQL (its data directory: HTM_EMBEDDED_DIR)",
                             param_hint="--db")


@cli.group()
def server() -> None:
    """The embedded PostgreSQL: where its data is, who uses it, stop it, delete it."""


@server.command("status")
@output_options(json_help="Print one JSON object (see above).")
@click.pass_context
def server_status(ctx: click.Context, fmt: str) -> None:
    """Data directory and its size, the server's pid, the processes holding it and the
    sessions connected. --json prints one object: data_dir, initialized, size_bytes,
    running, pid, url, holders [{pid, command}], reclaimed [pid], sessions [{pid, database,
    user, application, client, state, since}]; --csv prints the sessions."""
    import pandas as pd

    from ..store import server_sessions
    from ..store.embedded import embedded_server_status

    status = embedded_server_status(_data_dir(ctx))
    sessions = pd.DataFrame(server_sessions(status.url) if status.url else [],
                            columns=["pid", "database", "user", "application", "client",
                                     "state", "since"])
    if fmt == "json":
        emit_document({**status.to_dict(), "sessions": sessions})
        return
    if fmt == "csv":
        emit(sessions, "csv")
        return
    click.echo(f"data directory: {status.data_dir}"
               + ("" if status.initialized else " (not created yet)"))
    click.echo(f"size:           {human_bytes(status.size_bytes)}")
    click.echo("server:         " + (f"running, pid {status.pid}" if status.running
                                      else "stopped"))
    if status.url:
        click.echo(f"url:            {status.url}")
    if status.reclaimed:
        click.echo(f"reclaimed:      {len(status.reclaimed)} dead holder(s) "
                   f"({', '.join(map(str, status.reclaimed))}), killed before they could "
                   "stop the server")
    click.echo("held by:        " + ("; ".join(f"pid {h['pid']} ({h['command']})"
                                               for h in status.holders) or "nobody"))
    if status.running:
        click.echo(f"\n{len(sessions)} session(s) connected")
        if len(sessions):
            emit(sessions, "table")


@server.command("stop")
@click.option("--force", is_flag=True, help="Stop it even while other processes use it.")
@click.pass_context
def server_stop(ctx: click.Context, force: bool) -> None:
    """Stop the embedded server (the next command starts it again)."""
    from ..store.embedded import stop_embedded_server

    data_dir = _data_dir(ctx)
    stopped = stop_embedded_server(data_dir, force=force)
    click.echo(f"stopped the embedded server in {data_dir}" if stopped
               else f"the embedded server in {data_dir} was not running")


@server.command("clean")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Stop the server even while others use it.")
@click.pass_context
def server_clean(ctx: click.Context, yes: bool, force: bool) -> None:
    """Stop the embedded server and delete its data directory, every database in it."""
    from ..store.embedded import delete_embedded_server, embedded_server_status

    data_dir = _data_dir(ctx)
    status = embedded_server_status(data_dir)
    if not data_dir.exists():
        click.echo(f"nothing to delete: {data_dir} does not exist")
        return
    if not yes:
        click.confirm(f"delete {data_dir} ({human_bytes(status.size_bytes)}), with every "
                      "database in it?", abort=True, err=True)
    freed = delete_embedded_server(data_dir, force=force)
    click.echo(f"deleted {data_dir} ({human_bytes(freed)} freed)")
