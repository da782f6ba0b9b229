"""``htm-analytics hygiene``: what is wrong with the memory itself (read-only)."""

from __future__ import annotations

import sys
from typing import Any

import click
from click.core import ParameterSource

from ._app import _open_store, _remember_db, cli
from ._output import NumberRange, emit, output_options, scope_options, workers_option

# Spelt out so that --help imports neither pandas nor the driver (a test checks them against
# the library's HYGIENE_CHECKS and SENSITIVE_KINDS).
HYGIENE_CHECKS = ("near_duplicates", "sensitive", "supersession")
SENSITIVE_KINDS = ("credential", "email", "phone", "payment_card", "iban")
PAIR_CHOICES = ("tree", "all")

__all__ = ["hygiene"]

_SAMPLE = click.option(
    "--sample", type=click.IntRange(min=1), default=None, metavar="N",
    help="Check a seeded sample of N memories (shares estimated with a 95% interval) instead "
         "of every memory: at a million memories the whole check takes minutes to hours.")
_SEED = click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Chooses the sample.")

_SIMILARITY = click.option(
    "--min-similarity", type=NumberRange(0, 1, min_open=True), default=0.95,
    show_default=True, help="Least cosine similarity (trigram similarity for memories without "
                            "a vector) of a near-duplicate pair.")


def _say_sample(frame: Any) -> None:
    """On stderr, what a check on a sample read and what it estimates for every memory."""
    drawn = frame.attrs.get("sample")
    if drawn:
        from ..analysis import share_text

        click.echo(f"checked a sample of {drawn['checked']:,} of {drawn['memories']:,} memories "
                   f"(--seed {drawn['seed']}): {drawn['involved']:,} involved, "
                   f"{share_text(drawn['share'], drawn['share_low'], drawn['share_high'])}",
                   err=True)


@cli.group(invoke_without_command=True)
@click.option("--db", metavar="URL", expose_value=False, is_eager=True, callback=_remember_db,
              help="PostgreSQL URL (the same as htm-analytics --db URL).")
@click.option("--check", "checks", multiple=True, type=click.Choice(HYGIENE_CHECKS),
              help="Only this check (repeatable); all by default.")
@_SIMILARITY
@_SAMPLE
@_SEED
@click.option("--pairs", type=click.Choice(PAIR_CHOICES), default="tree", show_default=True,
              help="Near-duplicate pairs counted and kept: per group the strongest joining "
                   "its members (one per extra copy), or every pair.")
@workers_option
@scope_options
@output_options
@click.pass_context
def hygiene(ctx: click.Context, checks: tuple[str, ...], min_similarity: float,
            sample: int | None, seed: int, pairs: str, workers: int, fmt: str,
            **scope: Any) -> None:
    """Near-duplicates, secrets and personal data, supersessions: a summary, or one check's
    findings with a subcommand."""
    if ctx.invoked_subcommand is not None:
        # The summary's options: given before a subcommand they were silently dropped.
        given = [p for p in ctx.command.params if p.name and p.expose_value
                 and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE]
        if given:
            option = given[0].opts[0]
            raise click.UsageError(
                f"{option} before a subcommand belongs to the summary; put it after "
                f"the subcommand: htm-analytics hygiene {ctx.invoked_subcommand} {option} ...")
        return
    from ..analysis import memory_hygiene, share_text
    from ..store.display import counted

    with _open_store(ctx, init_schema=False) as store:
        result = memory_hygiene(store, checks=list(checks) or None,
                                min_similarity=min_similarity, sample=sample, seed=seed,
                                pairs=pairs, progress=sys.stderr.isatty(),
                                workers=workers, **scope)
    if fmt == "table":
        click.echo(result.describe_sample())
        for row in result.summary.to_dict("records"):
            share = ("" if not row["checked"] else
                     ", " + share_text(row["share"], row["share_low"], row["share_high"])
                     if result.sampled else f", {row['share']:.1%}")
            click.echo(f"\n{row['check']}: {counted(row['findings'], 'finding')}, "
                       f"{counted(row['memories'], 'memory', 'memories')}{share}\n"
                       f"  {row['what_it_means']}\n  -> {row['what_to_do']}")
        click.echo("\nMore: htm-analytics hygiene duplicates | sensitive | supersession | "
                   "unreachable | stale | retention | growth")
        return
    emit(result.summary, fmt)


@hygiene.command("duplicates")
@_SIMILARITY
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the first N pairs (biggest clusters first) [default: all].")
@click.option("--pairs", type=click.Choice(PAIR_CHOICES), default="tree", show_default=True,
              help="Per cluster the strongest pairs joining its members (cluster size - 1: "
                   "memory in proportion to the memories), or every pair.")
@_SAMPLE
@_SEED
@scope_options
@output_options
@click.pass_context
def duplicates(ctx: click.Context, min_similarity: float, limit: int | None, pairs: str,
               sample: int | None, seed: int, fmt: str, **scope: Any) -> None:
    """Pairs of near-duplicate memories, by cluster: ids, similarity, texts, robots."""
    from ..analysis import near_duplicates

    with _open_store(ctx, init_schema=False) as store:
        frame = near_duplicates(store, min_similarity=min_similarity, pairs=pairs,
                                sample=sample, seed=seed, progress=sys.stderr.isatty(),
                                **scope)
    _say_sample(frame)
    emit(frame.head(limit) if limit is not None else frame, fmt)


@hygiene.command("sensitive")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(SENSITIVE_KINDS),
              help="Only this kind (repeatable); all by default.")
@click.option("--phone-region", default=None, metavar="CC",
              help="Also national phone numbers of this region (e.g. US, DE).")
@_SAMPLE
@_SEED
@workers_option
@scope_options
@output_options
@click.pass_context
def sensitive(ctx: click.Context, kinds: tuple[str, ...], phone_region: str | None,
              sample: int | None, seed: int, workers: int, fmt: str,
              **scope: Any) -> None:
    """Credentials and personal data in memories: kind, detector, masked excerpt."""
    from ..analysis import sensitive_memories

    with _open_store(ctx, init_schema=False) as store:
        frame = sensitive_memories(store, kinds=list(kinds) or None,
                                   phone_region=phone_region, sample=sample, seed=seed,
                                   progress=sys.stderr.isatty(),
                                   workers=workers, **scope)
    _say_sample(frame)
    emit(frame, fmt)


@hygiene.command("unreachable")
@click.option("--k", type=int, default=10, show_default=True, help="Results per search.")
@click.option("--ef-search", type=int, default=None,
              help="hnsw.ef_search searched with [default: the store's, 40].")
@click.option("--sample", type=click.IntRange(min=1), default=None, metavar="N",
              help="Check a seeded sample of N memories per index (the share with a 95% "
                   "interval) instead of every memory: at a million memories the whole check "
                   "takes hours, a sample of 2,000 minutes.")
@_SEED
@click.option("--summary/--memories", default=True, show_default=True,
              help="One row per index, or one per unreachable memory.")
@click.option("--verify-reindex", is_flag=True,
              help="Rebuild each index with unreachable memories on a scratch copy (a "
                   "scratch database on the same server; needs CREATEDB) and search again.")
@scope_options
@output_options
@click.pass_context
def unreachable(ctx: click.Context, k: int, ef_search: int | None, sample: int | None,
                seed: int, summary: bool, verify_reindex: bool, fmt: str,
                **scope: Any) -> None:
    """Memories an HNSW index does not return for their own vector, per index, and the
    ef_search that brings them back (or the REINDEX to run, verified on request)."""
    from ..analysis import unreachable_memories

    with _open_store(ctx, init_schema=False) as store:
        frame = unreachable_memories(store, k=k, ef_search=ef_search, sample=sample,
                                     seed=seed, verify_reindex=verify_reindex,
                                     progress=sys.stderr.isatty(), **scope)
    emit(frame.attrs["summary"] if summary else frame, fmt)


@hygiene.command("stale")
@click.option("--days", type=NumberRange(0, min_open=True), default=90.0,
              show_default=True, help="Not recalled for this many days.")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the first N (least recently recalled first) [default: all].")
@scope_options
@output_options
@click.pass_context
def stale(ctx: click.Context, days: float, limit: int | None, fmt: str, **scope: Any) -> None:
    """Memories never recalled, or not for --days (access columns and the event log)."""
    from ..analysis import stale_memories

    with _open_store(ctx, init_schema=False) as store:
        frame = stale_memories(store, not_recalled_for=days, limit=limit, **scope)
    left_out = frame.attrs["stale_total"] - len(frame)
    if left_out:
        noun = "memory" if left_out == 1 else "memories"
        click.echo(f"{left_out:,} more stale {noun} left out by --limit {limit} "
                   f"({frame.attrs['stale_total']:,} in all)", err=True)
    emit(frame, fmt)


@hygiene.command("supersession")
@click.option("--min-similarity", type=NumberRange(0, 1, min_open=True), default=0.5,
              show_default=True, help="Least cosine similarity of the two memories.")
@click.option("--max-similarity", type=NumberRange(0, 1, min_open=True), default=0.95,
              show_default=True, help="Cosine similarity from which a pair is a "
                                      "near-duplicate instead.")
@click.option("--max-tag-memories", type=int, default=100, show_default=True,
              help="A shared tag names a subject when at most this many memories hold it.")
@_SAMPLE
@_SEED
@scope_options
@output_options
@click.pass_context
def supersession(ctx: click.Context, min_similarity: float, max_similarity: float,
                 max_tag_memories: int, sample: int | None, seed: int, fmt: str,
                 **scope: Any) -> None:
    """Pairs where a newer memory on the same subject says something different from an
    older one: ids, created_at, shared tags, similarity, words dropped and added."""
    from ..analysis import supersession_candidates

    with _open_store(ctx, init_schema=False) as store:
        frame = supersession_candidates(store, min_similarity=min_similarity,
                                        max_similarity=max_similarity,
                                        max_tag_memories=max_tag_memories, sample=sample,
                                        seed=seed, **scope)
    _say_sample(frame)
    emit(frame, fmt)


@hygiene.command("retention")
@click.option("--expire-after", "expire_after", type=float, default=None, metavar="DAYS",
              help="Expiry: hide memories older than DAYS that were never recalled.")
@click.option("--half-life", type=float, default=None, metavar="DAYS",
              help="Decay: weight (1 + recalls) * 0.5 ** (idle days / DAYS).")
@click.option("--min-weight", type=float, default=0.5, show_default=True,
              help="Decay: hidden below this weight.")
@click.option("--summary/--memories", default=True, show_default=True,
              help="The policy's counts, or one row per memory it would hide.")
@scope_options
@output_options
@click.pass_context
def retention(ctx: click.Context, expire_after: float | None, half_life: float | None,
              min_weight: float, summary: bool, fmt: str, **scope: Any) -> None:
    """What an expiry or decay policy would hide now, and how many logged recalls returned
    memories it would have hidden (nothing is hidden)."""
    from ..analysis import DecayPolicy, ExpiryPolicy, retention_what_if

    if (expire_after is None) == (half_life is None):
        raise click.UsageError("give one policy: --expire-after DAYS or --half-life DAYS")
    policy: ExpiryPolicy | DecayPolicy = ExpiryPolicy(expire_after) \
        if expire_after is not None else DecayPolicy(half_life or 0.0, min_weight=min_weight)
    with _open_store(ctx, init_schema=False) as store:
        frame = retention_what_if(store, policy, **scope)
    emit(frame.attrs["summary"] if summary else frame, fmt)


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
