"""The ``htm-analytics`` command line: thin wrappers over the store and analysis helpers."""

from __future__ import annotations

import datetime as dt
import functools
import os
import shutil
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import click
import pandas as pd

from .advisor import advise as advise_store
from .connection import URL_ENVIRONMENT_VARIABLES, mask_url, resolve_database_url
from .demo import DEMO_DATABASE, run_demo
from .embeddings import get_embedder
from .errors import HTMError, SchemaError
from .evaluation import EVALUATED_STRATEGIES, evaluate_retrieval, read_labelled_queries
from .indexes import index_usage, table_health
from .report import build_report
from .robots import robot_activity, robot_overlap
from .snapshot import Snapshot, export_snapshot
from .store import LongTermMemory, database_exists, database_name, with_database
from .tags import tag_cooccurrence, tag_hierarchy
from .trends import remember_trends
from .tuning import DEFAULT_EF_SEARCH_SWEEP, benchmark_index_build, benchmark_recall
from .tuning_advice import recommend_ef_search

__all__ = ["main", "cli"]



def output_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Shared ``--table/--csv/--json`` options: how a command prints its DataFrame."""

    @click.option("--table", "fmt", flag_value="table", default=True,
                  help="Print an aligned table (default).")
    @click.option("--csv", "fmt", flag_value="csv", help="Print CSV.")
    @click.option("--json", "fmt", flag_value="json", help="Print a JSON array of objects.")
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return command(*args, **kwargs)

    return wrapper


def scope_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Shared ``--since/--until/--robot`` options, passed on as ``timeframe`` and ``robots``."""

    @click.option("--since", type=click.DateTime(), default=None,
                  help="Only from this date or time (UTC).")
    @click.option("--until", type=click.DateTime(), default=None,
                  help="Only up to this date or time (UTC, inclusive).")
    @click.option("--robot", "robots", multiple=True, help="Only this robot (repeatable).")
    @functools.wraps(command)
    def wrapper(*args: Any, since: Any, until: Any, robots: tuple[str, ...],
                **kwargs: Any) -> Any:
        timeframe = None
        if since or until:
            timeframe = (since or dt.datetime(1, 1, 2), until or dt.datetime(9999, 12, 30))
        return command(*args, timeframe=timeframe, robots=list(robots) or None, **kwargs)

    return wrapper


def emit(frame: pd.DataFrame, fmt: str) -> None:
    """Print ``frame`` as a table, CSV or JSON."""
    if fmt == "csv":
        click.echo(frame.to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(frame.to_json(orient="records", date_format="iso", indent=2))
    else:
        click.echo(_readable(frame).to_string(index=False, line_width=_terminal_width())
                   if len(frame) else "(no rows)")


def _terminal_width() -> int:
    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))


def _readable(frame: pd.DataFrame, text_width: int = 40) -> pd.DataFrame:
    """A copy for the terminal: times to the minute, floats to 3 decimals, long text cut,
    and blanks instead of NaN/NaT/<NA>."""
    shown = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_datetime64_any_dtype(values):
            text = values.dt.strftime("%Y-%m-%d %H:%M")
        elif pd.api.types.is_float_dtype(values):
            text = values.map(lambda v: f"{v:,.3f}" if pd.notna(v) else "")
        else:
            text = values.map(lambda v: "" if v is None or (not isinstance(v, (list, tuple))
                                                            and pd.isna(v)) else str(v))
            text = text.map(lambda t: t if len(t) <= text_width else t[:text_width - 1] + "…")
        shown[column] = text.fillna("").astype(object)
    return shown


def _open_store(ctx: click.Context, **options: Any) -> LongTermMemory:
    try:
        return LongTermMemory(ctx.obj["db"], cache_size=0, **options)
    except SchemaError:
        demo_url = _demo_instead(ctx)
        if demo_url is None:
            raise
        click.echo(f"note: the default database has no memory; using the demo's, "
                   f"{mask_url(demo_url)} (pass --db or set HTM_DBURL to choose)", err=True)
        return LongTermMemory(demo_url, cache_size=0, **options)


def _demo_instead(ctx: click.Context) -> str | None:
    """The demo database's URL when no database was chosen (no --db, no environment variable)
    and the server has a loaded demo database: right after ``htm-analytics demo``, the next
    command finds its memory."""
    if ctx.obj.get("db") or any(os.environ.get(v) for v in URL_ENVIRONMENT_VARIABLES):
        return None
    server = resolve_database_url(None)
    if database_name(server) == DEMO_DATABASE:
        return None
    try:
        if not database_exists(server, DEMO_DATABASE):
            return None
    except HTMError:
        return None
    return with_database(server, DEMO_DATABASE)


def _remember_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(dict)["db"] = value


class _Command(click.Command):
    """Every subcommand also takes ``--db`` after its name: ``htm-analytics report --db URL``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(click.Option(
            ["--db"], metavar="URL", expose_value=False, is_eager=True, callback=_remember_db,
            help="PostgreSQL URL (the same as htm-analytics --db URL)."))


class _Group(click.Group):
    command_class = _Command
    group_class = type  # subgroups (bench) are _Group too


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar=None, default=None, metavar="URL",
              help="PostgreSQL URL. Default: HTM_DBURL, HTM_DATABASE__URL or DATABASE_URL, "
                   "else the embedded server.")
@click.version_option(package_name="htm-analytics")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """Explore, tune and report on the long-term memory of HTM robots."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


@cli.command()
@click.option("--out", default="report.html", show_default=True, type=click.Path(),
              help="Where to write the HTML report.")
@click.pass_context
def demo(ctx: click.Context, out: str) -> None:
    """Load the bundled demo memory into a fresh database and write its report.

    Uses the embedded PostgreSQL unless --db or HTM_DBURL names a server; the demo gets a
    database of its own (htm_demo) there.
    """
    run_demo(out, server_url=ctx.obj["db"], echo=click.echo)


@cli.command()
@click.option("--out", default=None, type=click.Path(),
              help="Report file [default: report.html, or report.md with --format md].")
@click.option("--format", "report_format", type=click.Choice(["html", "md"]), default="html",
              show_default=True, help="A self-contained HTML file, or Markdown with a folder "
                                      "of figures.")
@click.option("--data-dir", type=click.Path(), default=None,
              help="Also write every table behind the report to this folder.")
@click.option("--data-format", type=click.Choice(["csv", "parquet"]), default="csv",
              show_default=True)
@click.option("--snapshot", "snapshot_path", type=click.Path(exists=True), default=None,
              help="Report on a snapshot (DuckDB file or Parquet folder) instead of a server.")
@click.option("--benchmark/--no-benchmark", default=True, show_default=True,
              help="Include the ef_search recall/latency sweep.")
@click.option("--title", default="Memory report", show_default=True)
@click.pass_context
def report(ctx: click.Context, out: str | None, report_format: str, data_dir: str | None,
           data_format: str, snapshot_path: str | None, benchmark: bool, title: str) -> None:
    """Write a report: advice, stats, tags, trends, robots, indexes, HNSW recall curve."""
    expected = {"html": (".html", ".htm"), "md": (".md", ".markdown")}[report_format]
    if out is None:
        out = f"report.{report_format}"
    elif any(out.lower().endswith(s) for s in (".html", ".htm", ".md", ".markdown")) \
            and not out.lower().endswith(expected):
        raise click.BadParameter(f"{out} does not match --format {report_format}; use a "
                                 f"{expected[0]} name", param_hint="--out")
    if snapshot_path:
        with Snapshot(snapshot_path) as source:
            built = build_report(source, title=title, benchmark=False)
    else:
        with _open_store(ctx, init_schema=False, pool_size=1) as store:
            built = build_report(store, title=title, benchmark=benchmark)
    path = built.write_html(out) if report_format == "html" else built.write_markdown(out)
    click.echo(f"report written to {path}")
    if data_dir:
        written = built.write_data(data_dir, format=data_format)
        click.echo(f"{len(written)} tables written to {data_dir}")


@cli.command("init-db")
@click.pass_context
def init_db(ctx: click.Context) -> None:
    """Create the extensions and the memory schema (safe to run again)."""
    with _open_store(ctx, init_schema=True) as store:
        applied = store.server_info["migrations_applied"]
        click.echo(f"database: {store.url}")
        click.echo(f"PostgreSQL {store.server_info['server_version']}, "
                   f"pgvector {store.server_info['pgvector_version']}, "
                   f"pg_trgm {store.server_info['pg_trgm_version']}")
        click.echo(f"schema version {store.server_info['schema_version']}: "
                   + (f"applied migrations {applied}" if applied else "already up to date"))


@cli.command()
@click.option("--sweep/--no-sweep", default=True, show_default=True,
              help="Run a quick ef_search sweep (200 held-out vectors) to check the setting.")
@click.option("--target-recall", type=click.FloatRange(0, 1, min_open=True), default=0.95,
              show_default=True, help="Recall@10 the ef_search advice aims for.")
@output_options
@click.pass_context
def advise(ctx: click.Context, sweep: bool, target_recall: float, fmt: str) -> None:
    """Health and tuning findings, most severe first, each with the SQL that fixes it."""
    with _open_store(ctx, init_schema=False) as store:
        ef_advice = None
        if sweep:
            with store.tuning_session() as session:
                has_vectors = bool(session.vector_dimensions())
            if has_vectors:
                ef_advice = recommend_ef_search(store, target_recall=target_recall,
                                                progress=sys.stderr.isatty())
        findings = advise_store(store, ef_search_advice=ef_advice)
    if fmt != "table":
        emit(findings, fmt)
        return
    click.echo(f"database: {store.url}\nstatistics since {findings.attrs['statistics_note']}")
    if ef_advice is not None:
        click.echo(f"ef_search sweep: {ef_advice.evidence}")
    for number, row in enumerate(findings.to_dict("records"), start=1):
        click.echo(f"\n{number}. {str(row['severity']).upper()} {row['check']}: {row['object']}")
        for label, text in (("", row["evidence"]), ("-> ", row["recommendation"])):
            click.echo(textwrap.fill(f"{label}{text}", width=100, initial_indent="   ",
                                     subsequent_indent="   "))
        click.echo(textwrap.indent(str(row["sql"]), "   | "))
    if findings.empty:
        click.echo("no findings")


@cli.command()
@click.option("--indexes/--no-indexes", default=True, help="Also list the indexes.")
@output_options
@click.pass_context
def status(ctx: click.Context, indexes: bool, fmt: str) -> None:
    """Server and extension versions, table row counts and indexes."""
    with _open_store(ctx, init_schema=False) as store:
        info = store.server_info
        if fmt == "table":
            click.echo(f"database:   {store.url}")
            click.echo(f"postgresql: {info['server_version']}")
            click.echo(f"pgvector:   {info['pgvector_version']}")
            click.echo(f"pg_trgm:    {info['pg_trgm_version']}")
            click.echo(f"schema:     version {info['schema_version']}")
            click.echo(f"found:      {store.schema_info.describe()}\n")
        emit(store.table_counts(), fmt)
        if indexes:
            if fmt == "table":
                click.echo("")
            columns = ["table", "index", "method", "is_unique", "size_bytes"]
            emit(store.index_list()[columns], fmt)


@cli.command()
@click.option("--never-used", is_flag=True, help="Only indexes never scanned (not keys).")
@output_options
@click.pass_context
def indexes(ctx: click.Context, never_used: bool, fmt: str) -> None:
    """Index usage from pg_stat_user_indexes: scans, tuples, size, never-used flag."""
    with _open_store(ctx, init_schema=False) as store:
        frame = index_usage(store)
    if never_used:
        frame = frame[frame["never_used"]]
    emit(frame.drop(columns=["definition"]), fmt)


@cli.command()
@output_options
@click.pass_context
def health(ctx: click.Context, fmt: str) -> None:
    """Live and dead rows, sequential vs index scans, last vacuum and analyze per table."""
    with _open_store(ctx, init_schema=False) as store:
        emit(table_health(store), fmt)


@cli.command()
@click.option("--level", type=int, default=None, help="Roll tags up to this many segments.")
@click.option("--prefix", default=None, help="Only tags under this one.")
@click.option("--min-shared", type=int, default=2, show_default=True,
              help="Least nodes a pair shares.")
@click.option("--sort-by", type=click.Choice(["shared_nodes", "jaccard", "lift", "pmi", "npmi"]),
              default="npmi", show_default=True,
              help="npmi ranks pairs by how much more often they meet than chance; "
                   "shared_nodes favours big tags.")
@click.option("--limit", type=int, default=30, show_default=True)
@scope_options
@output_options
@click.pass_context
def tags(ctx: click.Context, fmt: str, **options: Any) -> None:
    """Pairs of tags found together, with Jaccard, lift and PMI."""
    with _open_store(ctx, init_schema=False) as store:
        emit(tag_cooccurrence(store, **options), fmt)


@cli.command("tag-tree")
@click.option("--prefix", default=None, help="Only this subtree.")
@click.option("--max-depth", type=int, default=None, help="Only tags down to this depth.")
@scope_options
@output_options
@click.pass_context
def tag_tree(ctx: click.Context, fmt: str, max_depth: int | None, **options: Any) -> None:
    """Tags and the ancestors they imply, with direct and cumulative node counts."""
    with _open_store(ctx, init_schema=False) as store:
        frame = tag_hierarchy(store, **options)
    if max_depth is not None:
        frame = frame[frame["depth"] <= max_depth]
    emit(frame, fmt)


@cli.command()
@click.option("--freq", type=click.Choice(["h", "D", "W", "M", "Q", "Y"]), default="W",
              show_default=True, help="Period length.")
@click.option("--by", type=click.Choice(["robot", "tag"]), default=None,
              help="Split by robot or tag.")
@click.option("--level", type=int, default=None, help="With --by tag: tag segments kept.")
@click.option("--prefix", default=None, help="With --by tag: only tags under this one.")
@scope_options
@output_options
@click.pass_context
def trends(ctx: click.Context, fmt: str, **options: Any) -> None:
    """Remembers per period: new, shared from another robot, repeated."""
    with _open_store(ctx, init_schema=False) as store:
        frame = remember_trends(store, **options)
    if not frame.attrs.get("exact", True):
        click.echo("note: " + frame.attrs.get("reason", "history approximated from "
                                              "first/last remember times"), err=True)
    emit(frame, fmt)


@cli.command()
@click.option("--overlap", is_flag=True, help="Robot x robot shared memories instead.")
@scope_options
@output_options
@click.pass_context
def robots(ctx: click.Context, fmt: str, overlap: bool, **options: Any) -> None:
    """Per robot: memories, remembers, share of memories other robots have too."""
    with _open_store(ctx, init_schema=False) as store:
        emit((robot_overlap if overlap else robot_activity)(store, **options), fmt)


@cli.command()
@click.argument("path", type=click.Path())
@click.option("--overwrite", is_flag=True, help="Replace an existing snapshot.")
@click.pass_context
def snapshot(ctx: click.Context, path: str, overwrite: bool) -> None:
    """Copy the memory into a DuckDB file (PATH.duckdb) or a folder of Parquet files."""
    with _open_store(ctx, init_schema=False) as store:
        target = export_snapshot(store, path, overwrite=overwrite)
        emit(store.table_counts(), "table")
    click.echo(f"snapshot written to {target}")


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}") from None


_SUMMARY = ["variant", "filter", "iterative_scan", "ef_search", "recall_mean", "recall_p5",
            "latency_p50_ms", "latency_p95_ms", "qps", "returned_mean", "used_index",
            "build_seconds", "index_bytes"]


def _emit_benchmark(frame: pd.DataFrame, fmt: str, out: str) -> None:
    shown = frame if fmt != "table" else frame[[c for c in _SUMMARY if c in frame]]
    emit(shown, fmt)
    if len(frame):
        first = frame.iloc[0]
        click.echo(f"{first['queries']} queries x {first['repeats']} repeats over "
                   f"{first['rows']} vectors of {first['dimension']} dimensions; "
                   f"PostgreSQL {first['postgresql']}, pgvector {first['pgvector']}; "
                   f"saved to {out}", err=True)


@cli.group()
def bench() -> None:
    """HNSW tuning experiments: ef_search recall sweeps and index builds."""


@bench.command("recall")
@click.option("--queries", type=int, default=500, show_default=True,
              help="Held-out stored vectors used as queries.")
@click.option("--k", type=int, default=10, show_default=True)
@click.option("--ef-search", default=",".join(map(str, DEFAULT_EF_SEARCH_SWEEP)),
              show_default=True, help="Comma-separated settings to sweep.")
@click.option("--repeats", type=int, default=3, show_default=True)
@click.option("--tag", default=None, help="Also measure searches filtered to this tag.")
@click.option("--robot", default=None, help="Also measure searches filtered to this robot.")
@click.option("--iterative-scan", type=click.Choice(["off", "strict_order", "relaxed_order"]),
              multiple=True, help="Iterative scan modes to compare (repeatable; default off).")
@click.option("--force-index", is_flag=True,
              help="Forbid exact sorts so that filtered queries walk the HNSW index.")
@click.option("--out", default="bench-recall.csv", show_default=True,
              help="Where to save the full result (.csv or .parquet).")
@output_options
@click.pass_context
def bench_recall(ctx: click.Context, queries: int, k: int, ef_search: str, repeats: int,
                 tag: str | None, robot: str | None, iterative_scan: tuple[str, ...],
                 force_index: bool, out: str, fmt: str) -> None:
    """Recall@k, latency and QPS of the live HNSW index for each ef_search."""
    filters: list[dict[str, str] | None] = [None]
    filters += [{"tag": tag}] if tag else []
    filters += [{"robot": robot}] if robot else []
    modes = [None if m == "off" else m for m in iterative_scan] or [None]
    with _open_store(ctx, init_schema=False, pool_size=1) as store:
        frame = benchmark_recall(store, queries=queries, k=k, ef_search=_int_list(ef_search),
                                 repeats=repeats, filters=filters, iterative_scan=modes,
                                 force_index=force_index, output=out,
                                 progress=sys.stderr.isatty())
    _emit_benchmark(frame, fmt, out)


@bench.command("build")
@click.option("--m", "m", default="8,16,32", show_default=True, help="HNSW m values.")
@click.option("--ef-construction", default="32,64,128", show_default=True)
@click.option("--queries", type=int, default=200, show_default=True)
@click.option("--ef-search", default="10,20,40,80,160", show_default=True)
@click.option("--out", default="bench-build.csv", show_default=True,
              help="Where to save the full result (.csv or .parquet).")
@output_options
@click.pass_context
def bench_build(ctx: click.Context, m: str, ef_construction: str, queries: int,
                ef_search: str, out: str, fmt: str) -> None:
    """Build HNSW variants on a copy of the vectors: build time, size, recall curve."""
    with _open_store(ctx, init_schema=False, pool_size=1) as store:
        frame = benchmark_index_build(store, m=_int_list(m),
                                      ef_construction=_int_list(ef_construction),
                                      queries=queries, ef_search=_int_list(ef_search),
                                      output=out, progress=sys.stderr.isatty())
    _emit_benchmark(frame, fmt, out)


@cli.group("import")
def import_() -> None:
    """Import another memory system's database into the store (read-only, idempotent)."""


def _import_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Options every importer takes; the summary is printed as a table (or CSV / JSON)."""

    @click.option("--chunk-rows", type=int, default=5_000, show_default=True,
                  help="Source rows read and written at a time (bounds memory).")
    @output_options
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return command(*args, **kwargs)

    return wrapper


def _run_import(ctx: click.Context, importer: Callable[..., Any], source: str, fmt: str,
                **options: Any) -> None:
    with _open_store(ctx) as store:
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
def import_ghostkg_command(ctx: click.Context, source: str, chunk_rows: int, fmt: str) -> None:
    """A GhostKG SQLite file: agents, knowledge-graph edges, entities and logs."""
    from .peers import import_ghostkg

    _run_import(ctx, import_ghostkg, source, fmt, chunk_rows=chunk_rows)


@import_.command("arandu")
@click.argument("source", metavar="URL")
@click.option("--embedding-model", default=None, metavar="PROVIDER/MODEL",
              help="The model that made Arandu's vectors (it does not record it).")
@_import_options
@click.pass_context
def import_arandu_command(ctx: click.Context, source: str, embedding_model: str | None,
                          chunk_rows: int, fmt: str) -> None:
    """An Arandu PostgreSQL database: agents, events, versioned facts, entities."""
    from .peers import import_arandu

    _run_import(ctx, import_arandu, source, fmt, chunk_rows=chunk_rows,
                embedding_model=_model_option(embedding_model))


@import_.command("seaf")
@click.argument("source", metavar="URL")
@click.option("--embedding-model", default="openai/text-embedding-3-small",
              show_default=True, metavar="PROVIDER/MODEL",
              help="The model that made the tools' vectors.")
@_import_options
@click.pass_context
def import_seaf_command(ctx: click.Context, source: str, embedding_model: str,
                        chunk_rows: int, fmt: str) -> None:
    """A Self-Engineering Agent Framework database: sessions, messages, tools, executions."""
    from .peers import import_seaf

    _run_import(ctx, import_seaf, source, fmt, chunk_rows=chunk_rows,
                embedding_model=_model_option(embedding_model))
@cli.group("eval")
def eval_group() -> None:
    """Measure search quality on labelled queries."""


@eval_group.command("retrieval")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--strategies", default=",".join(EVALUATED_STRATEGIES), show_default=True,
              help="Comma-separated search strategies to compare.")
@click.option("--k", type=int, default=10, show_default=True,
              help="Results per search and metric cutoff.")
@click.option("--embedder", default=None,
              help="Embedding provider for queries without a vector (see get_embedder).")
@click.option("--show", type=click.Choice(["summary", "per-query", "significance"]),
              default="summary", show_default=True, help="Which result to print.")
@output_options
@click.pass_context
def eval_retrieval(ctx: click.Context, path: str, strategies: str, k: int,
                   embedder: str | None, show: str, fmt: str) -> None:
    """Recall@1/5/k, MRR@k, nDCG@k and p50/p95 latency per strategy for the labelled
    queries in PATH (JSON Lines or .csv: query, relevant node ids, optional vector)."""
    queries = read_labelled_queries(path)
    with _open_store(ctx, init_schema=False, pool_size=1) as store:
        result = evaluate_retrieval(
            store, queries, k=k, strategies=[s.strip() for s in strategies.split(",")],
            embedding_service=get_embedder(embedder) if embedder else None)
    emit({"summary": result.summary, "per-query": result.per_query,
          "significance": result.significance}[show], fmt)


def main() -> None:
    """Entry point: run the CLI, turning library errors into one clear line and exit code 1."""
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except HTMError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()

