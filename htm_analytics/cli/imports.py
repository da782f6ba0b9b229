"""``htm-analytics import``: other memory systems' databases into the store."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from ._app import cli
from ._database import open_target
from ._output import emit, output_options

__all__ = ["import_"]


@cli.group("import")
def import_() -> None:
    """Import another memory system's database into the store (read-only, idempotent)."""


def _import_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Options every importer takes; the summary is printed as a table (or CSV / JSON)."""

    @click.option("--chunk-rows", type=click.IntRange(1, 1_000_000), default=5_000,
                  show_default=True, help="Source rows read and written at a time (bounds memory).")
    @click.option("--source-name", default=None, metavar="NAME",
                  help="Record this source's rows under NAME: needed to import a second source "
                       "of the same system (its row ids clash with the first's); the same NAME "
                       "finds them again on the next import.")
    @output_options
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return command(*args, **kwargs)

    return wrapper


def _run_import(ctx: click.Context, importer: Callable[..., Any],
                check_source: Callable[[str], Any], source: str, fmt: str,
                **options: Any) -> None:
    # The source is read first: a file or database that is not one stops here, before the
    # target is touched. Then an empty target gets the schema; one with HTM tables but no
    # additions is refused.
    from ..peers._importing import validate_source_name

    check_source(source)
    validate_source_name(options.get("source_name"))
    with open_target(ctx) as store:
        summary = importer(source, store, progress=sys.stderr.isatty(), **options)
    emit(summary.to_frame(), fmt)
    click.echo(str(summary), err=True)


def _model_option(value: str | None) -> tuple[str, str] | None:
    if value is None:
        return None
    provider, _, model = value.partition("/")
    if not provider or not model:
        raise click.BadParameter("use PROVIDER/MODEL, e.g. openai/text-embedding-3-small")
    return provider, model


@import_.command("ghostkg")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@_import_options
@click.pass_context
def import_ghostkg_command(ctx: click.Context, source: str, fmt: str, **options: Any) -> None:
    """A GhostKG SQLite file: agents, knowledge-graph edges, entities and logs."""
    from ..peers import check_ghostkg_source, import_ghostkg

    _run_import(ctx, import_ghostkg, check_ghostkg_source, source, fmt, **options)


@import_.command("arandu")
@click.argument("source", metavar="URL")
@click.option("--embedding-model", default=None, metavar="PROVIDER/MODEL",
              help="The model that made Arandu's vectors (it does not record it).")
@_import_options
@click.pass_context
def import_arandu_command(ctx: click.Context, source: str, embedding_model: str | None,
                          fmt: str, **options: Any) -> None:
    """An Arandu PostgreSQL database: agents, events, versioned facts, entities."""
    from ..peers import check_arandu_source, import_arandu

    _run_import(ctx, import_arandu, check_arandu_source, source, fmt,
                embedding_model=_model_option(embedding_model), **options)


@import_.command("seaf")
@click.argument("source", metavar="URL")
@click.option("--embedding-model", default="openai/text-embedding-3-small",
              show_default=True, metavar="PROVIDER/MODEL",
              help="The model that made the tools' vectors.")
@_import_options
@click.pass_context
def import_seaf_command(ctx: click.Context, source: str, embedding_model: str, fmt: str,
                        **options: Any) -> None:
    """A Self-Engineering Agent Framework database: sessions, messages, tools, executions."""
    from ..peers import check_seaf_source, import_seaf

    _run_import(ctx, import_seaf, check_seaf_source, source, fmt,
                embedding_model=_model_option(embedding_model), **options)
