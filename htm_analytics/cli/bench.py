"""``htm-analytics bench``: HNSW recall/latency sweeps and index-build experiments."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ._app import _open_store, cli
from ._output import checked_output, emit, output_options

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["bench"]

# tuning.DEFAULT_EF_SEARCH_SWEEP, spelt out so that --help need not import the tuning code
# (tests/test_cli_messages.py checks they agree).
DEFAULT_SWEEP = "10,20,40,80,160,320"


def _int_list(text: str, option: str) -> list[int]:
    """The distinct integers of ``option``'s comma-separated value, in order (a setting
    given twice was measured twice)."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}",
                                 param_hint=option) from None
    if not values:  # an empty sweep measures nothing and would say nothing
        raise click.BadParameter("expected comma-separated integers, got none",
                                 param_hint=option)
    return list(dict.fromkeys(values))


_SUMMARY = ["variant", "filter", "iterative_scan", "ef_search", "recall_mean", "recall_p5",
            "latency_p50_ms", "latency_p50_spread_ms", "latency_p95_ms", "qps", "qps_spread",
            "returned_mean", "used_index", "build_seconds", "index_bytes"]


_TABLE_SUFFIXES = (".csv", ".parquet")  # what the benchmarks save


def _emit_benchmark(frame: pd.DataFrame, fmt: str, out: str) -> None:
    shown = frame if fmt != "table" else frame[[c for c in _SUMMARY if c in frame]]
    emit(shown, fmt)
    if len(frame):
        first = frame.iloc[0]
        noise = ""
        if "latency_p50_spread_ms" in frame and first["repeats"] > 1:
            noise = (f"; p50 latency of a setting varied by up to "
                     f"{frame['latency_p50_spread_ms'].max():.2f} ms between repeats: "
                     "smaller differences between settings are noise")
        click.echo(f"{first['queries']} queries x {first['repeats']} repeats over "
                   f"{first['rows']} vectors of {first['dimension']} dimensions{noise}; "
                   f"PostgreSQL {first['postgresql']}, pgvector {first['pgvector']}; "
                   f"saved to {out}", err=True)


@cli.group()
def bench() -> None:
    """HNSW tuning experiments: ef_search recall sweeps and index builds."""


@bench.command("recall")
@click.option("--queries", type=int, default=500, show_default=True,
              help="Held-out stored vectors used as queries.")
@click.option("--k", type=int, default=10, show_default=True)
@click.option("--ef-search", default=DEFAULT_SWEEP,
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
    from ..tuning.benchmark import benchmark_recall

    filters: list[dict[str, str] | None] = [None]
    # An empty --tag or --robot is refused by the library, not dropped without a word.
    filters += [{"tag": tag}] if tag is not None else []
    filters += [{"robot": robot}] if robot is not None else []
    modes = [None if m == "off" else m for m in iterative_scan] or [None]
    checked_output(out, "--out", suffixes=_TABLE_SUFFIXES)
    sweep = _int_list(ef_search, "--ef-search")  # before connecting
    with _open_store(ctx, init_schema=False, pool_size=1) as store:
        frame = benchmark_recall(store, queries=queries, k=k, ef_search=sweep,
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
    from ..tuning.benchmark import benchmark_index_build

    checked_output(out, "--out", suffixes=_TABLE_SUFFIXES)
    ms, constructions, sweep = (_int_list(m, "--m"),  # before connecting
                                _int_list(ef_construction, "--ef-construction"),
                                _int_list(ef_search, "--ef-search"))
    with _open_store(ctx, init_schema=False, pool_size=1) as store:
        frame = benchmark_index_build(store, m=ms, ef_construction=constructions,
                                      queries=queries, ef_search=sweep, output=out,
                                      progress=sys.stderr.isatty())
    for variant in frame.attrs.get("skipped", []):
        click.echo(f"note: skipped {variant}: pgvector needs ef_construction >= 2 * m",
                   err=True)
    _emit_benchmark(frame, fmt, out)
