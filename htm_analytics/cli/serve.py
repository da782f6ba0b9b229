"""``htm-analytics mcp``: the read-only MCP server over stdio."""

from __future__ import annotations

import click

from ._app import _open_store, cli
from ._output import embedder_named

__all__ = ["mcp"]


@cli.command()
@click.option("--embedder", default=None, metavar="NAME",
              help="The embedding provider that embedded the memories (as for `eval`), for "
                   "the vector search strategies; without it only lexical ones run.")
@click.option("--max-rows", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="Rows per table in any result.")
@click.option("--max-chars", type=click.IntRange(1, 1_000_000), default=1000,
              show_default=True, help="Characters per memory text in any result.")
@click.pass_context
def mcp(ctx: click.Context, embedder: str | None, max_rows: int, max_chars: int) -> None:
    """Serve the memory's analytics to MCP clients over stdio, read-only: status, search
    (no access counted), robots, tags and tag pairs, trends, index usage and health, advice,
    the ef_search recommendation, and the report as a resource."""
    try:
        from ..mcp import build_server
    except ImportError as exc:
        raise click.ClickException(
            f"the MCP server needs the mcp package: pip install 'htm-analytics[mcp]' ({exc})"
        ) from exc
    service = embedder_named(embedder)
    with _open_store(ctx, read_only=True, pool_size=2) as store:
        click.echo(f"htm-analytics MCP server on {store.url} (read-only), over stdio",
                   err=True)
        build_server(store, embedder=service, max_rows=max_rows,
                     max_chars=max_chars).run("stdio")
