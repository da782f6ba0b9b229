"""``htm-analytics eval``: search quality on labelled queries."""

from __future__ import annotations

import click

from ._app import _open_store, cli
from ._output import emit, output_options

__all__ = ["eval_group"]


@cli.group("eval")
def eval_group() -> None:
    """Measure search quality on labelled queries."""


@eval_group.command("retrieval")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--strategies", default=None,
              help="Comma-separated search strategies to compare [default: every strategy "
                   "but fuzzy].")
@click.option("--k", type=int, default=10, show_default=True,
              help="Results per search and metric cutoff.")
@click.option("--embedder", default=None,
              help="Embedding provider for queries without a vector (see get_embedder).")
@click.option("--show", type=click.Choice(["summary", "per-query", "significance"]),
              default="summary", show_default=True, help="Which result to print.")
@output_options
@click.pass_context
def eval_retrieval(ctx: click.Context, path: str, strategies: str | None, k: int,
                   embedder: str | None, show: str, fmt: str) -> None:
    """Recall@1/5/k, MRR@k, nDCG@k and p50/p95 latency per strategy for the labelled
    queries in PATH (JSON Lines or .csv: query, relevant node ids, optional vector)."""
    from ..agent.embeddings import get_embedder
    from ..tuning.evaluation import EVALUATED_STRATEGIES, evaluate_retrieval, read_labelled_queries

    names = strategies.split(",") if strategies else list(EVALUATED_STRATEGIES)
    queries = read_labelled_queries(path)
    with _open_store(ctx, init_schema=False, pool_size=1) as store:
        result = evaluate_retrieval(
            store, queries, k=k, strategies=[s.strip() for s in names],
            embedding_service=get_embedder(embedder) if embedder else None)
    emit({"summary": result.summary, "per-query": result.per_query,
          "significance": result.significance}[show], fmt)
