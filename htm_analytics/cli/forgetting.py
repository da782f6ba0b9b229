"""``htm-analytics forget``, ``restore`` and ``purge``: as the database's HTM era does, each
asking for confirmation unless ``--yes``."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import click

from ._app import _open_store, cli

__all__ = ["forget", "restore", "purge"]

_AGE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _older_than(_ctx: click.Context, _param: click.Parameter,
                value: str) -> dt.datetime | dt.timedelta:
    """An age (``30d``, ``12h``, ``2w``) or an ISO date or time (UTC when it has no zone)."""
    if match := _AGE.match(value):
        try:
            return dt.timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        except OverflowError:
            raise click.BadParameter(f"{value.strip()} is longer than a timedelta holds "
                                     "(about 2.7 million years)") from None
    try:
        moment = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter("use an age (30d, 12h, 2w) or an ISO date or time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _when(older_than: dt.datetime | dt.timedelta) -> str:
    """``older_than`` as the prompt says it: an age counts back from now."""
    moment = dt.datetime.now(dt.UTC) - older_than if isinstance(older_than, dt.timedelta) \
        else older_than
    return f"before {moment.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"


def _must_exist(store: Any, node_id: int) -> None:
    from ..errors import NotFoundError

    if not store.exists(node_id, forgotten=True):
        raise NotFoundError(f"no memory with id {node_id}")


@cli.command()
@click.argument("node_id", type=int)
@click.option("--permanent", is_flag=True,
              help="Delete the memory instead of marking it deleted (where the schema "
                   "soft-deletes; on the seed-era schema every forget is permanent).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def forget(ctx: click.Context, node_id: int, permanent: bool, yes: bool) -> None:
    """Forget memory NODE_ID for every robot: softly where the schema soft-deletes (the
    current gem; `restore` brings it back), else, or with --permanent, for good."""
    with _open_store(ctx) as store:
        permanent = permanent or not store.schema_info.soft_deletes
        how = "delete permanently" if permanent else "forget (restorable)"
        _must_exist(store, node_id)  # before asking: a yes would be for nothing
        if not yes:
            click.confirm(f"{how} memory {node_id} in {store.url}?", abort=True)
        from ..store import CONFIRMATION

        changed = store.forget(node_id, permanent=permanent, confirm=CONFIRMATION)
    click.echo(f"memory {node_id} " + ("deleted" if permanent else
                                       "forgotten" if changed else "was already forgotten"))


@cli.command()
@click.argument("node_id", type=int)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def restore(ctx: click.Context, node_id: int, yes: bool) -> None:
    """Bring back memory NODE_ID, forgotten softly, with its robot and tag links."""
    with _open_store(ctx) as store:
        _must_exist(store, node_id)
        if not yes:
            click.confirm(f"restore memory {node_id} in {store.url}?", abort=True)
        restored = store.restore(node_id)
    click.echo(f"memory {node_id} " + ("restored" if restored else "was not forgotten"))


@cli.command()
@click.option("--older-than", required=True, callback=_older_than, metavar="AGE|DATE",
              help="Memories forgotten before this: an age (30d, 12h, 2w) or an ISO date or "
                   "time (UTC unless it says).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def purge(ctx: click.Context, older_than: dt.datetime | dt.timedelta, yes: bool) -> None:
    """Delete for good the memories forgotten (softly) before --older-than."""
    with _open_store(ctx) as store:
        if not yes:
            click.confirm(f"permanently delete the memories forgotten {_when(older_than)} "
                          f"in {store.url}?", abort=True)
        from ..store import CONFIRMATION

        purged = store.purge_deleted(older_than=older_than, confirm=CONFIRMATION)
    from ..store.display import counted  # here: --help loads no store

    click.echo(f"{counted(purged, 'forgotten memory', 'forgotten memories')} deleted for good")
