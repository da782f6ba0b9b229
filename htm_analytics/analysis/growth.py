"""How fast the memory grows, and where it is heading: counts, bytes and index size per
period, with a fitted forecast and its interval."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..frames import period_unit, scope_params, split_at_infinity
from ..store import LongTermMemory
from ..validation import validate_number
from ._common import live_store

# scipy.stats is imported by the functions that fit, not with the module: it takes about a
# second, which every command importing the analysis package paid.

__all__ = ["GROWTH_COLUMNS", "memory_growth"]

GROWTH_COLUMNS = {"period": "datetime64[us, UTC]", "robot": "string", "kind": "string",
                  "new": "float64", "memories": "float64", "bytes": "float64",
                  "index_bytes": "float64", "memories_low": "float64",
                  "memories_high": "float64"}
TOTAL = "(all robots)"


def memory_growth(store: LongTermMemory, *, horizon: int = 6, freq: str = "M",
                  robots: str | list[str] | None = None, timeframe: Any = None,
                  confidence: float = 0.95) -> pd.DataFrame:
    """Memories, text bytes and HNSW index bytes over time, in total and per robot, with a
    forecast ``horizon`` periods ahead.

    The forecast fits a straight line to the new memories per period (least squares over
    the observed periods, empty ones counted as 0) and adds it up from the last observed
    total; the interval is the fit's residual spread accumulated over the periods ahead
    (``t`` quantile times ``sqrt(h)``), so it widens with the horizon. It assumes the periods'
    deviations are independent: treat it as a lower bound of the uncertainty. Bytes and
    index bytes are projected at today's bytes per memory.

    Parameters
    ----------
    store : LongTermMemory
        The live store; only read.
    horizon : int
        Periods to forecast (1-120).
    freq : {'D', 'W', 'M', 'Q', 'Y'}
        Period length.
    robots, timeframe : optional
        The scope.
    confidence : float
        Of the interval (default 0.95).

    Returns
    -------
    pandas.DataFrame
        Per robot (``(all robots)`` first) and period: ``period``, ``robot``, ``kind``
        (``observed`` or ``forecast``), ``new`` and ``memories`` (cumulative), ``bytes``
        (text bytes, total only), ``index_bytes`` (the HNSW indexes' share, total only),
        ``memories_low``/``memories_high`` (the forecast's interval; NaN for observed rows).
        Memories created at ``infinity`` or ``-infinity`` fall in no period:
        ``attrs["untimed_memories"]`` counts them.
    """
    store = live_store(store)
    horizon = validate_number(horizon, field="horizon", minimum=1, maximum=120, integer=True)
    unit, pandas_freq = period_unit(freq, hourly=False)
    confidence = validate_number(confidence, field="confidence", minimum=0.5)
    if confidence >= 1:
        raise ValidationError(f"must be below 1, got {confidence!r}", field="confidence")
    counts = store.growth_counts(unit, scope=scope_params(timeframe=timeframe, robots=robots))
    counts["period"] = pd.to_datetime(counts["period"], utc=True)
    counts["robot"] = counts["robot"].fillna(TOTAL)
    counts, untimed = split_at_infinity(counts)
    untimed_memories = int(untimed.loc[untimed["robot"] == TOTAL, "new"].sum())
    indexes = store.index_list()
    hnsw_bytes = float(indexes.loc[(indexes["table"] == "nodes")
                                   & (indexes["method"] == "hnsw"), "size_bytes"].sum())
    if timeframe is not None or robots is not None:
        # The index holds every memory, not only the scope's: its cost per memory is the
        # whole index over all of them (over the scope's, it came out several times higher).
        hnsw_bytes *= int(counts.loc[counts["robot"] == TOTAL, "new"].sum()) \
            / max(store.count_in_scope(None), 1)
    if counts.empty:
        result = pd.DataFrame({c: pd.Series(dtype=t) for c, t in GROWTH_COLUMNS.items()})
    else:
        is_total = counts["robot"] == TOTAL
        frames = [_series(counts[is_total], TOTAL, pandas_freq, horizon, confidence,
                          hnsw_bytes)] if is_total.any() else []
        if not is_total.all():
            frames.append(_robot_series(counts[~is_total], pandas_freq, horizon, confidence))
        result = pd.concat(frames, ignore_index=True).astype(GROWTH_COLUMNS)
    result.attrs["untimed_memories"] = untimed_memories
    return result


def _robot_series(counts: pd.DataFrame, freq: str, horizon: int,
                  confidence: float) -> pd.DataFrame:
    """What :func:`_series` gives for each robot (without bytes), for all robots at once.

    A fleet has thousands of robots: one pandas and scipy round per robot took most of
    ``memory_growth`` (62 s at 100k memories, 2,000 robots). Here each robot is one row of
    a robots x periods matrix, and its least-squares line comes from masked sums.
    """
    from scipy import stats

    robots = pd.Index(counts["robot"].unique())
    grid = pd.date_range(counts["period"].min(), counts["period"].max(), freq=freq)
    row = robots.get_indexer(pd.Index(counts["robot"]))
    column = grid.get_indexer(pd.DatetimeIndex(counts["period"]))
    new = np.zeros((len(robots), len(grid)))
    np.add.at(new, (row, column), counts["new"].to_numpy(dtype=float))
    first = np.full(len(robots), len(grid))
    last = np.full(len(robots), -1)
    np.minimum.at(first, row, column)
    np.maximum.at(last, row, column)
    position = np.arange(len(grid))
    inside = (position >= first[:, None]) & (position <= last[:, None])
    n = (last - first + 1).astype(float)
    x = np.where(inside, position - first[:, None], 0).astype(float)
    y = np.where(inside, new, 0.0)
    memories = np.cumsum(y, axis=1)
    total = memories[np.arange(len(robots)), last]
    sx, sy = x.sum(axis=1), y.sum(axis=1)
    sxx, sxy = (x * x).sum(axis=1), (x * y).sum(axis=1)
    fitted = n >= 3
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(fitted, (n * sxy - sx * sy) / (n * sxx - sx * sx), 0.0)
        intercept = np.where(fitted, (sy - slope * sx) / n, sy / n)
        residual = np.where(inside, y - (intercept[:, None] + slope[:, None] * x), 0.0)
        mean_residual = residual.sum(axis=1) / n
        squares = np.where(inside, (residual - mean_residual[:, None]) ** 2, 0.0).sum(axis=1)
        spread = np.where(fitted, np.sqrt(squares / (n - 2)), np.nan)
        quantile = np.where(fitted, stats.t.ppf(0.5 + confidence / 2, np.maximum(n - 2, 1)),
                            0.0)
    ahead = np.arange(1, horizon + 1, dtype=float)
    rate = np.maximum(intercept[:, None] + slope[:, None] * ((n - 1)[:, None] + ahead), 0)
    forecast = total[:, None] + np.cumsum(rate, axis=1)
    margin = (quantile * spread)[:, None] * np.sqrt(ahead)
    periods = pd.date_range(grid[0], periods=len(grid) + horizon, freq=freq)
    observed_rows, observed_columns = np.nonzero(inside)
    ahead_columns = last[:, None] + np.arange(1, horizon + 1)
    names = np.asarray(robots, dtype=object)
    observed = pd.DataFrame({
        "robot": names[observed_rows], "order": 0, "period": grid[observed_columns],
        "kind": "observed", "new": new[observed_rows, observed_columns],
        "memories": memories[observed_rows, observed_columns]})
    ahead_rows = np.repeat(np.arange(len(robots)), horizon)
    predicted = pd.DataFrame({
        "robot": names[ahead_rows], "order": 1, "period": periods[ahead_columns.ravel()],
        "kind": "forecast", "new": rate.ravel(), "memories": forecast.ravel(),
        "memories_low": np.maximum(forecast - margin, total[:, None]).ravel(),
        "memories_high": (forecast + margin).ravel()})
    observed["rank"], predicted["rank"] = observed_rows, ahead_rows
    result = pd.concat([observed, predicted], ignore_index=True)
    result = result.sort_values(["rank", "order", "period"], kind="stable")
    for name in GROWTH_COLUMNS:
        if name not in result:
            result[name] = np.nan
    return result[list(GROWTH_COLUMNS)].reset_index(drop=True)


def _series(rows: pd.DataFrame, robot: str, freq: str, horizon: int, confidence: float,
            hnsw_bytes: float | None) -> pd.DataFrame:
    from scipy import stats

    periods = pd.date_range(rows["period"].min(), rows["period"].max(), freq=freq)
    new = rows.set_index("period")["new"].reindex(periods, fill_value=0).astype(float)
    observed = pd.DataFrame({"period": periods, "robot": robot, "kind": "observed",
                             "new": new.to_numpy(), "memories": new.cumsum().to_numpy()})
    total = float(observed["memories"].iloc[-1])
    if hnsw_bytes is not None:
        text = rows.set_index("period")["new_bytes"].reindex(periods, fill_value=0)
        observed["bytes"] = text.astype(float).cumsum().to_numpy()
        observed["index_bytes"] = hnsw_bytes * observed["memories"] / max(total, 1)
    x = np.arange(len(new), dtype=float)
    if len(new) >= 3:
        fit = stats.linregress(x, new.to_numpy())
        slope, intercept = float(fit.slope), float(fit.intercept)
        spread = float(np.std(new.to_numpy() - (intercept + slope * x), ddof=2))
        quantile = float(stats.t.ppf(0.5 + confidence / 2, len(new) - 2))
    else:  # too short to fit a trend: the mean rate, no interval
        slope, intercept, spread, quantile = 0.0, float(new.mean()), float("nan"), 0.0
    ahead = np.arange(1, horizon + 1, dtype=float)
    rate = np.maximum(intercept + slope * (x[-1] + ahead), 0)
    memories = total + np.cumsum(rate)
    margin = quantile * spread * np.sqrt(ahead)
    forecast = pd.DataFrame({
        "period": pd.date_range(periods[-1], periods=horizon + 1, freq=freq)[1:],
        "robot": robot, "kind": "forecast", "new": rate, "memories": memories,
        "memories_low": np.maximum(memories - margin, total), "memories_high": memories + margin})
    if hnsw_bytes is not None:
        per_memory = observed["bytes"].iloc[-1] / max(total, 1)
        forecast["bytes"] = memories * per_memory
        forecast["index_bytes"] = memories * hnsw_bytes / max(total, 1)
    result = pd.concat([observed, forecast], ignore_index=True)
    for column in GROWTH_COLUMNS:
        if column not in result:
            result[column] = np.nan
    return result[list(GROWTH_COLUMNS)]
