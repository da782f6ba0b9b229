"""``htm-analytics hygiene``: what is wrong with the memory itself (read-only)."""

from __future__ import annotations

from typing import Any

import click

from ._app import _open_store, _remember_db, cli
from ._output import emit, output_options, scope_options

# Spelt out so that --help imports neither pandas nor the driver (a test checks them against
# the library's HYGIENE_CHECKS and SENSITIVE_KINDS).
HYGIENE_CHECKS = ("near_duplicates", "sensitive")
SENSITIVE_KINDS = ("credential", "email", "phone", "payment_card", "iban")

__all__ = ["hygiene"]

_SIMILARITY = click.option(
    "--min-similarity", type=click.FloatRange(0, 1, min_open=True), default=0.95,
    show_default=True, help="Least cosine similarity (trigram similarity for memories without "
                            "a vector) of a near-duplicate pair.")


@cli.group(invoke_without_command=True)
@click.option("--db", metavar="URL", expose_value=False, is_eager=True, callback=_remember_db,
              help="PostgreSQL URL (the same as htm-analytics --db URL).")
@click.option("--check", "checks", multiple=True, type=click.Choice(HYGIENE_CHECKS),
              help="Only this check (repeatable); all by default.")
@_SIMILARITY
@scope_options
@output_options
@click.pass_context
def hygiene(ctx: click.Context, checks: tuple[str, ...], min_similarity: float, fmt: str,
            **scope: Any) -> None:
    """Near-duplicates, secrets and personal data: a summary, or one check's findings
    with a subcommand."""
    if ctx.invoked_subcommand is not None:
        return
    from ..analysis import memory_hygiene

    with _open_store(ctx, init_schema=False) as store:
        result = memory_hygiene(store, checks=list(checks) or None,
                                min_similarity=min_similarity, **scope)
    if fmt == "table":
        click.echo(f"{result.total:,} memories checked")
        for row in result.summary.itertuples():
            click.echo(f"\n{row.check}: {row.findings:,} findings, {row.memories:,} memories "
                       f"({row.share:.1%})\n  {row.what_it_means}\n  -> {row.what_to_do}")
        click.echo("\nMore: htm-analytics hygiene duplicates | sensitive | unreachable | stale"
                   " | growth")
        return
    emit(result.summary, fmt)


@hygiene.command("duplicates")
@_SIMILARITY
@click.option("--limit", type=int, default=None, help="Only the first N pairs (biggest "
                                                      "clusters first).")
@scope_options
@output_options
@click.pass_context
def duplicates(ctx: click.Context, min_similarity: float, limit: int | None, fmt: str,
               **scope: Any) -> None:
    """Pairs of near-duplicate memories, by cluster: ids, similarity, texts, robots."""
    from ..analysis import near_duplicates

    with _open_store(ctx, init_schema=False) as store:
        frame = near_duplicates(store, min_similarity=min_similarity, **scope)
    emit(frame.head(limit) if limit is not None else frame, fmt)


@hygiene.command("sensitive")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(SENSITIVE_KINDS),
              help="Only this kind (repeatable); all by default.")
@click.option("--phone-region", default=None, metavar="CC",
              help="Also national phone numbers of this region (e.g. US, DE).")
@scope_options
@output_options
@click.pass_context
def sensitive(ctx: click.Context, kinds: tuple[str, ...], phone_region: str | None,
              fmt: str, **scope: Any) -> None:
    """Credentials and personal data in memories: kind, detector, masked excerpt."""
    from ..analysis import sensitive_memories

    with _open_store(ctx, init_schema=False) as store:
        frame = sensitive_memories(store, kinds=list(kinds) or None,
                                   phone_region=phone_region, **scope)
    emit(frame, fmt)


@hygiene.command("unreachable")
@click.option("--k", type=int, default=10, show_default=True, help="Results per search.")
@click.option("--ef-search", type=int, default=None,
              help="hnsw.ef_search searched with [default: the store's, 40].")
@click.option("--sample", type=int, default=None,
              help="Check this many memories per index (with a 95%% interval) instead of all.")
@click.option("--summary/--memories", default=True, show_default=True,
              help="One row per index, or one per unreachable memory.")
@scope_options
@output_options
@click.pass_context
def unreachable(ctx: click.Context, k: int, ef_search: int | None, sample: int | None,
                summary: bool, fmt: str, **scope: Any) -> None:
    """Memories an HNSW index does not return for their own vector, per index, and the
    ef_search that brings them back (or the REINDEX to run)."""
    from ..analysis import unreachable_memories

    with _open_store(ctx, init_schema=False) as store:
        frame = unreachable_memories(store, k=k, ef_search=ef_search, sample=sample, **scope)
    emit(frame.attrs["summary"] if summary else frame, fmt)


@hygiene.command("stale")
@click.option("--days", type=click.FloatRange(0, min_open=True), default=90.0,
              show_default=True, help="Not recalled for this many days.")
@scope_options
@output_options
@click.pass_context
def stale(ctx: click.Context, days: float, fmt: str, **scope: Any) -> None:
    """Memories never recalled, or not for --days (access columns and the event log)."""
    from ..analysis import stale_memories

    with _open_store(ctx, init_schema=False) as store:
        emit(stale_memories(store, not_recalled_for=days, **scope), fmt)


@hygiene.command("growth")
@click.option("--horizon", type=int, default=6, show_default=True,
              help="Periods to forecast.")
@click.option("--freq", type=click.Choice(["D", "W", "M", "Q", "Y"]), default="M",
              show_default=True, help="Period length.")
@scope_options
@output_options
@click.pass_context
def growth(ctx: click.Context, horizon: int, freq: str, fmt: str, **scope: Any) -> None:
    """Memories, text bytes and HNSW index bytes per period, with a forecast and its
    interval, in total and per robot."""
    from ..analysis import memory_growth

    with _open_store(ctx, init_schema=False) as store:
        emit(memory_growth(store, horizon=horizon, freq=freq, **scope), fmt)
