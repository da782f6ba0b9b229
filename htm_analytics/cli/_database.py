"""Which database a command reads or writes, said on stderr every time, and opening it.

The rule (README, "Command line"): ``--db URL``; else ``HTM_DBURL``, ``HTM_DATABASE__URL``,
``DATABASE_URL`` in that order; else the embedded server's ``htm`` database, the one
``LongTermMemory()`` and ``HTM()`` use, except that a command that only reads takes the demo's
``htm_demo`` while ``htm`` holds no memory and the demo has been loaded.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from ._output import ROBOTS_KEY, note_unknown_robots

if TYPE_CHECKING:
    from ..store import LongTermMemory

__all__ = ["choose_database", "open_store", "open_target", "say_database"]

DEMO_DATABASE = "htm_demo"  # demo.DEMO_DATABASE (that module loads pandas)
# The additions an import writes into (import_records is migration 5's).
_IMPORT_NEEDS = ("import_records",)
# The variables the library reads, in order (connection.URL_ENVIRONMENT_VARIABLES; not
# imported from there so that `--help` loads no database driver).
URL_ENVIRONMENT_VARIABLES = ("HTM_DBURL", "HTM_DATABASE__URL", "DATABASE_URL")


def choose_database(ctx: click.Context, *, write: bool = False) -> tuple[str, str]:
    """``(url, why)``: the database this command uses, by the rule above."""
    from ..errors import HTMError
    from ..store import database_exists, server_overview, with_database
    from ..store.connection import resolve_database_url

    chosen = ctx.obj.get("db") if ctx.obj else None
    if chosen:
        return chosen, "--db"
    for name in URL_ENVIRONMENT_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            return value, name
    default = resolve_database_url(None)
    if write:
        return default, "the default: the embedded server's htm"
    demo = DEMO_DATABASE
    try:
        overview = server_overview(default)
        holds_memory = bool(overview["has_memory"])
        demo_loaded = not holds_memory and database_exists(default, demo)
    except HTMError:
        return default, "the default: the embedded server's htm"
    if demo_loaded:
        return with_database(default, demo), (
            f"the default: the embedded server's htm holds no memory yet, so the demo's "
            f"{demo}; choose with --db or HTM_DBURL")
    return default, "the default: the embedded server's htm"


def say_database(url: str, why: str) -> None:
    """One line on stderr, so that --json and --csv output stays clean; a malformed URL is
    refused first (masking cannot be trusted on it)."""
    from ..store.connection import check_database_url, mask_url

    check_database_url(url, "--db" if why == "--db" else why)
    click.echo(f"database: {mask_url(url)} ({why})", err=True)


def store_options(ctx: click.Context) -> dict[str, Any]:
    """The store settings of the command line's own options (``--writer-timezone``,
    ``--query-timeout``)."""
    given = ctx.obj or {}
    options: dict[str, Any] = {"writer_timezone": given.get("writer_timezone")}
    if given.get("query_timeout") is not None:
        options["query_timeout"] = max(1, round(given["query_timeout"] * 1000))
    return options


def open_store(ctx: click.Context, **options: Any) -> LongTermMemory:
    """The store of the database this (reading) command uses, named on stderr."""
    from ..store import LongTermMemory

    url, why = choose_database(ctx)
    say_database(url, why)
    store = LongTermMemory(url, cache_size=0, **store_options(ctx), **options)
    note_unknown_robots(store, ctx.meta.get(ROBOTS_KEY))
    return store


def open_target(ctx: click.Context, *, needs: tuple[str, ...] = _IMPORT_NEEDS,
                **options: Any) -> LongTermMemory:
    """The store a writing command writes into: an empty database gets the schema; one with
    HTM tables but without the additions ``needs`` is refused, saying how to add them."""
    from ..errors import SchemaError
    from ..store import LongTermMemory, database_name, server_overview
    from ..store.connection import mask_url, resolve_database_url

    url, why = choose_database(ctx, write=True)
    say_database(url, why)
    overview = server_overview(resolve_database_url(url))
    if not overview["has_schema"]:
        click.echo(f"setting up the memory schema in {database_name(url) or 'it'} "
                   "(an empty database)", err=True)
        return LongTermMemory(url, cache_size=0, init_schema=True, **store_options(ctx),
                              **options)
    store = LongTermMemory(url, cache_size=0, **store_options(ctx), **options)
    missing = [table for table in needs if table not in store.schema_info.additions]
    if missing:
        memories = overview["has_memory"]
        store.close()
        raise SchemaError(
            f"{mask_url(url)} holds HTM tables ({store.schema_info.era} schema"
            f"{', with memories' if memories else ''}) but not htm_analytics's additions "
            f"this command writes into ({', '.join(missing)}); nothing was written. Run "
            f"`htm-analytics init-db --db URL` to add them (docs/production.md lists what it "
            "installs and how to remove it), then run this command again")
    return store
