"""Notebook explorers (ipywidgets): thin layers over the store's searches and the analysis
helpers. Each returns a :class:`Explorer` whose ``controls`` can be set from code and whose
``results`` HTML shows the answer."""

from __future__ import annotations

import datetime as dt
import html
from typing import Any

import ipywidgets as widgets
import pandas as pd

from ..analysis.robots import robot_activity
from ..analysis.tags import tag_cooccurrence, tag_hierarchy
from ..errors import HTMError, ValidationError
from ..frames import MemorySource, memory_source
from ..store import SEARCH_STRATEGIES, VECTOR_STRATEGIES, LongTermMemory, live_store
from ..tuning.benchmark import benchmark_recall
from ..validation import validate_positive_int
from .render import html_table

__all__ = ["Explorer", "search_explorer", "tag_browser", "ef_search_explorer"]

_TIMEFRAMES = {"any time": None, "last 7 days": 7, "last 30 days": 30, "last 90 days": 90}
# pgvector's range of hnsw.ef_search.
_MAX_EF_SEARCH = 1000


def _text(value: Any, field: str) -> str:
    """A control's starting text: a widget would raise its own TraitError on anything else."""
    if not isinstance(value, str):
        raise ValidationError(f"must be a string, got {type(value).__name__}", field=field)
    return value


class Explorer(widgets.VBox):
    """A widget box with named ``controls`` and a ``results`` HTML pane.

    ``refresh()`` recomputes the results from the controls; changing a control does it too.
    """

    def __init__(self, controls: dict[str, widgets.Widget], render: Any, title: str) -> None:
        self.controls = controls
        self.results = widgets.HTML()
        self._render = render
        super().__init__([widgets.HTML(f"<b>{html.escape(title)}</b>"),
                          widgets.HBox(list(controls.values())), self.results])
        for control in controls.values():
            control.observe(lambda _change: self.refresh(), names="value")
        self.refresh()

    def refresh(self) -> None:
        """Recompute the results pane from the current control values."""
        values = {name: control.value for name, control in self.controls.items()}
        try:
            self.results.value = self._render(**values)
        except HTMError as exc:
            self.results.value = f"<p style='color:#b00'>{html.escape(str(exc))}</p>"


def search_explorer(store: LongTermMemory, *, embedder: Any = None,
                    query: str = "") -> Explorer:
    """Search the memory: query, strategy, timeframe, limit, robot -> results with scores.

    ``embedder`` (an object with ``embed``) enables the vector, hybrid and rrf strategies;
    without one, full text and fuzzy search work. The robot filter keeps results that robot
    remembers (the search fetches five times the limit, then filters).
    """
    store = live_store(store)
    query = _text(query, "query")
    strategies = [s for s in SEARCH_STRATEGIES if embedder or s not in VECTOR_STRATEGIES]
    robots = ["any robot", *robot_activity(store)["robot"].tolist()]
    controls = {
        "query": widgets.Text(value=query, placeholder="what to recall", description="query"),
        "strategy": widgets.Dropdown(options=strategies, value="fulltext",
                                     description="strategy"),
        "timeframe": widgets.Dropdown(options=list(_TIMEFRAMES), value="any time",
                                      description="when"),
        "limit": widgets.IntSlider(value=10, min=1, max=50, description="limit",
                                   continuous_update=False),
        "robot": widgets.Dropdown(options=robots, value="any robot", description="robot"),
    }

    def render(query: str, strategy: str, timeframe: str, limit: int, robot: str) -> str:
        if not query.strip():
            return "<p><em>type a query</em></p>"
        days = _TIMEFRAMES[timeframe]
        window = None
        if days is not None:
            now = dt.datetime.now(dt.UTC)
            window = (now - dt.timedelta(days=days), now)
        fetch = limit if robot == "any robot" else 5 * limit
        # The widget's "fulltext" is the ranked any-word search: typed queries rarely match
        # every word.
        rows = store.search_by_strategy(
            "fulltext_any" if strategy == "fulltext" else strategy, query=query, limit=fetch,
            timeframe=window, embedding_service=embedder)
        frame = pd.DataFrame(list(rows))
        if frame.empty:
            return "<p><em>no results</em></p>"
        owners = store.robots_of_nodes(frame["id"].tolist())
        frame["robots"] = [", ".join(owners[i]) for i in frame["id"]]
        if robot != "any robot":
            frame = frame[[robot in owners[i] for i in frame["id"]]]
        frame = frame.head(limit)
        frame["content"] = frame["content"].str.slice(0, 160)
        score = [c for c in ("similarity", "relevance", "combined_score", "score", "rrf_score")
                 if c in frame]
        columns = ["id", *score, "content", "robots", "created_at"]
        return html_table(f"{len(frame)} results ({strategy})",
                          frame[[c for c in columns if c in frame]])

    return Explorer(controls, render, "Search the memory")


def tag_browser(source: MemorySource, *, prefix: str = "") -> Explorer:
    """Browse the tag tree: a prefix -> its children with counts, and the tags it meets most
    often (by normalised PMI). Computed once; the widget filters the results."""
    source = memory_source(source)
    prefix = _text(prefix, "prefix")
    hierarchy = tag_hierarchy(source)
    pairs = tag_cooccurrence(source, min_shared=2, sort_by="npmi")
    controls = {"prefix": widgets.Combobox(value=prefix, options=hierarchy["tag"].tolist(),
                                           placeholder="top level", description="tag",
                                           ensure_option=False)}

    def render(prefix: str) -> str:
        prefix = prefix.strip()
        if prefix and prefix not in set(hierarchy["tag"]):
            return f"<p><em>no tag {html.escape(prefix)}</em></p>"
        children = hierarchy[hierarchy["parent"] == prefix] if prefix else \
            hierarchy[hierarchy["depth"] == 1]
        children = children.sort_values(["cumulative_nodes", "tag"], ascending=[False, True])
        parts = [html_table(f"children of {prefix or 'the root'}",
                            children[["tag", "cumulative_nodes", "direct_nodes"]])]
        if prefix:
            related = pairs[(pairs["topic1"] == prefix) | (pairs["topic2"] == prefix)].head(10)
            other = related["topic2"].where(related["topic1"] == prefix, related["topic1"])
            parts.append(html_table(
                f"tags found with {prefix} more often than chance",
                pd.DataFrame({"tag": other, "shared_nodes": related["shared_nodes"],
                              "npmi": related["npmi"]})))
        return "".join(parts)

    return Explorer(controls, render, "Browse tags")


def ef_search_explorer(store: LongTermMemory, *, queries: int = 100, k: int = 10,
                       ef_search: int = 40) -> Explorer:
    """Move ``hnsw.ef_search`` and see recall@k and latency, measured on a sample of held-out
    stored vectors each time (two repeats, with the spread of their median latency and QPS:
    a change smaller than that is noise).

    ``ef_search`` is the slider's first setting, from 1 to 1000 (pgvector's range);
    ``queries``, ``k`` and ``ef_search`` are checked here
    (:class:`~htm_analytics.ValidationError`); a measurement's own error (a memory with too
    few vectors) shows in the results pane."""
    store = live_store(store)
    queries = validate_positive_int(queries, field="queries")
    # Checked, not left to the slider: it clamps 1000 to its maximum, True to 1 and 2.5 to
    # 2, and would measure a setting nobody asked for.
    ef_search = validate_positive_int(ef_search, field="ef_search", maximum=_MAX_EF_SEARCH)
    k = validate_positive_int(k, field="k", maximum=_MAX_EF_SEARCH)
    controls = {"ef_search": widgets.IntSlider(value=ef_search, min=1,
                                               max=max(400, ef_search), step=1,
                                               description="ef_search",
                                               continuous_update=False)}

    def render(ef_search: int) -> str:
        result = benchmark_recall(store, queries=queries, k=k, ef_search=ef_search, repeats=2,
                                  progress=False)
        row = result.iloc[0]
        return html_table(
            f"recall@{k} and latency on {row['queries']} held-out queries x {row['repeats']} "
            f"repeats over {row['rows']:,} vectors",
            result[["ef_search", "recall_mean", "recall_p5", "latency_p50_ms",
                    "latency_p50_spread_ms", "latency_p95_ms", "qps", "qps_spread",
                    "repeats", "returned_mean", "index"]])

    return Explorer(controls, render, "Tune ef_search")
