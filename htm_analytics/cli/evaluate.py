"""``htm-analytics eval``: search quality on labelled queries and conversation benchmarks."""

from __future__ import annotations

import json

import click

from ._app import _open_store, cli
from ._output import CHART_SUFFIXES, checked_output, embedder_named, emit, output_options

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
@click.option("--repeats", type=int, default=1, show_default=True,
              help="Time every query this many times: p50 is the median over the repeats, "
                   "with its spread between them (differences within it are noise).")
@click.option("--show", type=click.Choice(["summary", "per-query", "significance"]),
              default="summary", show_default=True, help="Which result to print.")
@output_options
@click.pass_context
def eval_retrieval(ctx: click.Context, path: str, strategies: str | None, k: int,
                   embedder: str | None, repeats: int, show: str, fmt: str) -> None:
    """Recall@1/5/k, MRR@k, nDCG@k and p50/p95 latency per strategy for the labelled
    queries in PATH (JSON Lines, a JSON array, .csv or .parquet: query, relevant node ids,
    optional vector)."""
    from ..tuning.evaluation import EVALUATED_STRATEGIES, evaluate_retrieval, read_labelled_queries

    # Given but empty ("" or ","): refused by the library, not read as "every strategy".
    names = list(EVALUATED_STRATEGIES) if strategies is None else \
        [s.strip() for s in strategies.split(",") if s.strip()]
    queries = read_labelled_queries(path)
    service = embedder_named(embedder)
    with _open_store(ctx, init_schema=False, pool_size=1) as store:
        result = evaluate_retrieval(store, queries, k=k, strategies=names,
                                    embedding_service=service, repeats=repeats)
    if result.missing_relevant:
        missing = result.missing_relevant
        click.echo(f"note: {len(missing):,} relevant ids name no memory here ("
                   + ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
                   + "): no search can return them, so they count as not found", err=True)
    emit({"summary": result.summary, "per-query": result.per_query,
          "significance": result.significance}[show], fmt)


# Spelt out so that --help imports neither pandas nor the driver (a test checks them against
# the library's BENCHMARK_FORMATS, EVALUATED_STRATEGIES and CONVERSATION_SCOPES).
BENCHMARK_FORMATS = ("locomo", "longmemeval", "jsonl")
EVALUATED_STRATEGIES = ("vector", "fulltext", "fulltext_any", "hybrid", "rrf", "vector_bm25")
CONVERSATION_SCOPES = ("conversation", "benchmark")


@eval_group.command("conversations")
@click.argument("path", type=click.Path(exists=True))
@click.option("--format", "benchmark_format", type=click.Choice(BENCHMARK_FORMATS),
              default=None, help="The file's layout (default: detected).")
@click.option("--strategies", default=",".join(EVALUATED_STRATEGIES), show_default=True,
              help="Comma-separated search strategies to compare.")
@click.option("--k", type=int, default=10, show_default=True,
              help="Results per search and metric cutoff.")
@click.option("--embedder", default=None,
              help="Embedding provider for turns and questions (see get_embedder; 'minilm' "
                   "for the offline semantic model; default hashing, which is lexical).")
@click.option("--scope", type=click.Choice(CONVERSATION_SCOPES), default="conversation",
              show_default=True,
              help="One scratch database per conversation, or one for the whole benchmark.")
@click.option("--conversation", "only", multiple=True,
              help="Only this conversation (repeatable), e.g. conv-26.")
@click.option("--speaker-prefix/--no-speaker-prefix", default=True, show_default=True,
              help="Remember each turn as 'speaker: text' (as a chat memory holds it) or as "
                   "the bare text.")
@click.option("--keep", is_flag=True,
              help="Keep the scratch databases (their names are printed) instead of "
                   "dropping them.")
@click.option("--show", type=click.Choice(["summary", "per-question", "abstention",
                                           "conversations"]),
              default="summary", show_default=True,
              help="Which result to print (--json prints them all as one document).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the chart of recall_any@k per question category and strategy "
                   "to this image (.png, .svg or .pdf).")
@output_options(json_help="Print one JSON document: interrupted, and the summary, "
                          "per_question, abstention and conversations frames as lists of "
                          "records.")
@click.pass_context
def eval_conversations(ctx: click.Context, path: str, benchmark_format: str | None,
                       strategies: str, k: int, embedder: str | None, scope: str,
                       only: tuple[str, ...], speaker_prefix: bool, keep: bool, show: str,
                       plot_path: str | None, fmt: str) -> None:
    """Replay a conversation benchmark (LoCoMo, LongMemEval or JSON Lines of turns and
    questions; a file, a folder of per-sample files or LoCoMo's published zip) into scratch
    databases on the server and score every strategy on the evidence turns:
    recall_any/recall_all@k, nDCG@k, MRR@k and latency per question category; abstention
    questions apart. Ctrl-C stops and drops the scratch database."""
    from ..tuning.conversations import evaluate_conversations, plot_conversations

    if plot_path:  # refused before the run, not after it
        checked_output(plot_path, "--plot", suffixes=CHART_SUFFIXES, make_folder=False)
    result = evaluate_conversations(
        path, format=benchmark_format, k=k,
        strategies=[s.strip() for s in strategies.split(",") if s.strip()],
        embedding_service=embedder_named(embedder),
        scope=scope,  # type: ignore[arg-type]
        conversations=list(only) or None, speaker_prefix=speaker_prefix,
        server_url=ctx.obj.get("db"), keep=keep)
    if keep:
        for name in result.conversations["database"].dropna():
            click.echo(f"kept scratch database {name}", err=True)
    if plot_path:
        import matplotlib.pyplot as plt

        figure = plot_conversations(result.summary).figure
        figure.savefig(plot_path)
        plt.close(figure)
        click.echo(f"chart written to {plot_path}", err=True)
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    emit({"summary": result.summary, "per-question": result.per_question,
          "abstention": result.abstention, "conversations": result.conversations}[show], fmt)
