"""Tags: co-occurrence with association measures, the tag graph, the hierarchy, popularity."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._docs import share_docs
from .._plotting import axes_or_new, checked_plot, column_option, legend_if_labelled
from ..errors import ValidationError
from ..frames import MemorySource, memory_source, period_unit, scope_params, split_at_infinity
from ..store.file_paths import output_path, writing
from ..validation import validate_number, validate_positive_int
from .cooccurrence import COOCCURRENCE_DTYPES, cooccurrence_counts

# networkx and matplotlib are imported by the functions that draw or build graphs: with them,
# importing the analysis package took about 0.4 s longer for every command.
if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "tag_cooccurrence", "tag_graph", "tag_graph_view", "write_tag_graph", "tag_hierarchy",
    "popular_tags",
    "plot_tag_cooccurrence", "plot_tag_graph", "plot_tag_hierarchy", "plot_popular_tags",
]

_MEASURES = ("shared_nodes", "jaccard", "lift", "pmi", "npmi")
_HIERARCHY_DTYPES = {
    "tag": "string", "name": "string", "depth": "int64", "parent": "string", "stored": "bool",
    "tagged_nodes": "int64", "direct_nodes": "int64", "cumulative_nodes": "int64",
}


def _tree_order(tags: pd.Series) -> pd.Series:
    # ':' sorts before every other tag character once replaced by NUL, giving depth-first order
    # (a, a:b, a:b:c, a-x) by code point, whatever the database's collation.
    return tags.str.replace(":", "\x00", regex=False)


@share_docs
def tag_cooccurrence(source: MemorySource, *, min_shared: int = 2, level: int | None = None,
                     prefix: str | None = None, timeframe: Any = None,
                     robots: str | list[str] | None = None, sort_by: str = "shared_nodes",
                     limit: int | None = None) -> pd.DataFrame:
    """Pairs of tags found on the same memories, with association measures.

    Raw counts favour big tags; Jaccard, lift and (normalised) PMI say how much more often two
    tags meet than their sizes alone would predict. A tag and its own ancestor (``db`` and
    ``db:postgresql``) always co-occur, because tagging attaches ancestors, so such pairs are
    left out.

    Parameters
    ----------
    %(source)s
    min_shared : int
        Keep pairs found together on at least this many nodes.
    %(level)s
    %(prefix)s
    %(timeframe)s
    %(robots)s
    sort_by : {'shared_nodes', 'jaccard', 'lift', 'pmi', 'npmi'}
        Strongest pairs first by this measure (ties: the pair on more memories first, then
        by tag names).
    limit : int, optional
        Keep only the first ``limit`` pairs.

    Returns
    -------
    pandas.DataFrame
        One row per pair:

        - ``topic1``, ``topic2`` (string): the tags, ``topic1 < topic2`` by code point;
        - ``shared_nodes`` (int64): nodes carrying both;
        - ``nodes1``, ``nodes2`` (int64): nodes carrying each;
        - ``total_nodes`` (int64): tagged nodes in scope, N;
        - ``jaccard`` (float64): shared / (nodes1 + nodes2 - shared);
        - ``lift`` (float64): shared * N / (nodes1 * nodes2), 1 when independent;
        - ``pmi`` (float64): ln(lift);
        - ``npmi`` (float64): pmi / -ln(shared / N), in [-1, 1]; 1 when the two tags always
          go together (and when the pair covers every node, where the ratio is 0 / 0).
    """
    source = memory_source(source)
    params = _cooccurrence_params(min_shared, level, prefix, timeframe, robots)
    if sort_by not in _MEASURES:
        raise ValidationError(f"must be one of {', '.join(_MEASURES)}, got {sort_by!r}",
                              field="sort_by")
    frame, _ = _pairs_and_sizes(source, params)
    # Ties (NPMI 1 for every pair of tags that always go together): the pair on more memories
    # first, then by name.
    keys = list(dict.fromkeys([sort_by, "shared_nodes"]))
    frame = frame.sort_values([*keys, "topic1", "topic2"],
                              ascending=[False] * len(keys) + [True, True])
    if limit is not None:
        frame = frame.head(validate_positive_int(limit, field="limit"))
    return frame.reset_index(drop=True).astype(COOCCURRENCE_DTYPES)


def _cooccurrence_params(min_shared: Any, level: Any, prefix: Any, timeframe: Any,
                         robots: Any) -> dict[str, Any]:
    params = scope_params(timeframe=timeframe, robots=robots, prefix=prefix, level=level)
    params["min_shared"] = validate_positive_int(min_shared, field="min_shared")
    return params


def _pairs_and_sizes(source: MemorySource, params: dict[str, Any]
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pairs of :func:`tag_cooccurrence` with their measures (unsorted), and every topic
    in scope with its size (``tag``, ``nodes``)."""
    frame, sizes = cooccurrence_counts(source, params)
    frame["pmi"] = np.log(frame["lift"])
    joint = pd.Series(-np.log(frame["shared_nodes"] / frame["total_nodes"]), index=frame.index)
    # In [-1, 1] by definition; clipped, so that rounding shows no 1.0000000000000002 and
    # perfect pairs tie (then ordered by name) rather than by the last bit.
    frame["npmi"] = (frame["pmi"] / joint.where(joint > 0)).fillna(1.0).clip(-1.0, 1.0)
    return frame, sizes


def tag_graph(source: MemorySource, *, min_shared: int = 2, level: int | None = None,
              prefix: str | None = None, timeframe: Any = None,
              robots: str | list[str] | None = None, weight: str = "jaccard",
              resolution: float = 1.0, seed: int | None = 0) -> nx.Graph:
    """The tag co-occurrence network, with Louvain communities.

    Nodes are tags (every tag in scope, connected or not) with attributes ``nodes`` (memories
    carrying the tag) and ``community`` (0 is the largest community). Edges are the pairs of
    :func:`tag_cooccurrence` with all its measures as attributes, plus ``weight`` set to the
    chosen measure. Parameters as in :func:`tag_cooccurrence`; ``resolution`` and ``seed`` go to
    :func:`networkx.community.louvain_communities` (fixed seed: the same communities each run).

    Returns
    -------
    networkx.Graph
        ``graph.graph`` holds ``weight`` (the measure used) and ``communities`` (their count).
    """
    source = memory_source(source)
    import networkx as nx

    if weight not in _MEASURES:
        raise ValidationError(f"must be one of {', '.join(_MEASURES)}, got {weight!r}",
                              field="weight")
    resolution = validate_number(resolution, field="resolution", minimum=0, exclusive=True)
    if seed is not None:
        seed = validate_number(seed, field="seed", minimum=0, integer=True)
    pairs, sizes = _pairs_and_sizes(
        source, _cooccurrence_params(min_shared, level, prefix, timeframe, robots))
    pairs = pairs.sort_values(["shared_nodes", "topic1", "topic2"],
                              ascending=[False, True, True])  # tag_cooccurrence's order
    sizes = sizes.sort_values(["nodes", "tag"], ascending=[False, True])  # popular_tags' order
    graph = nx.Graph(weight=weight)
    graph.add_nodes_from((tag, {"nodes": int(n)}) for tag, n in zip(sizes["tag"], sizes["nodes"]))
    measures = {m: pairs[m].astype(int if m == "shared_nodes" else float).tolist()
                for m in _MEASURES}
    # Louvain needs positive weights; a negative PMI means "less than chance": no tie.
    weights = pairs[weight].clip(lower=0.0).astype(float).tolist()
    graph.add_edges_from(
        (a, b, {**dict(zip(_MEASURES, values)), "weight": w})
        for a, b, w, *values in zip(pairs["topic1"].tolist(), pairs["topic2"].tolist(),
                                    weights, *measures.values()))
    if graph.size(weight="weight") > 0:
        communities = nx.community.louvain_communities(graph, weight="weight",
                                                       resolution=resolution, seed=seed)
    else:  # no positive tie (a tag on every memory has PMI 0 with all): each tag alone
        communities = [{tag} for tag in graph.nodes]
    ordered = sorted(communities, key=lambda c: (-len(c), min(c)))
    for number, members in enumerate(ordered):
        for tag in members:
            graph.nodes[tag]["community"] = number
    graph.graph["communities"] = len(ordered)
    return graph


def write_tag_graph(graph: nx.Graph, path: str | os.PathLike[str]) -> Path:
    """Write a :func:`tag_graph` as GraphML (``.graphml``) or GEXF (``.gexf``, for Gephi)."""
    import networkx as nx

    writers = {".graphml": nx.write_graphml, ".gexf": nx.write_gexf}
    target = output_path(path, field="path", suffixes=tuple(writers))
    with writing(target, field="path"):
        writers[target.suffix.lower()](graph, target)
    return target


@share_docs
def tag_hierarchy(source: MemorySource, *, prefix: str | None = None, timeframe: Any = None,
                  robots: str | list[str] | None = None) -> pd.DataFrame:
    """Every tag and every ancestor its name implies, with node counts, in tree order.

    Parameters
    ----------
    %(source)s
    %(prefix)s
    %(timeframe)s
    %(robots)s

    Returns
    -------
    pandas.DataFrame
        One row per tag, depth first (a parent right before its children):

        - ``tag`` (string): the full path; ``name`` (string): its last segment;
        - ``depth`` (int64): 1 for top-level tags; ``parent`` (string, NA at top level);
        - ``stored`` (bool): the tag exists in the tags table (False: only implied by a
          descendant's name);
        - ``tagged_nodes`` (int64): nodes carrying the tag itself;
        - ``direct_nodes`` (int64): nodes carrying it and no tag below it;
        - ``cumulative_nodes`` (int64): nodes carrying it or any tag below it.
    """
    source = memory_source(source)
    params = scope_params(timeframe=timeframe, robots=robots, prefix=prefix)
    frame = source.analytics_frame("tag_hierarchy", params, _HIERARCHY_DTYPES)
    return frame.sort_values("tag", key=_tree_order).reset_index(drop=True)


@share_docs
def popular_tags(source: MemorySource, *, limit: int | None = 20, level: int | None = None,
                 prefix: str | None = None, timeframe: Any = None,
                 robots: str | list[str] | None = None, freq: str | None = None) -> pd.DataFrame:
    """The most used tags, overall or per period.

    Parameters
    ----------
    %(source)s
    limit : int or None
        The most used ``limit`` tags (None: all).
    %(level)s
    %(prefix)s
    %(timeframe)s
    %(robots)s
    freq : {'h', 'D', 'W', 'M', 'Q', 'Y'}, optional
        Also split by period of node creation (weeks start on Monday).

    Returns
    -------
    pandas.DataFrame
        Without ``freq``: ``tag`` (string), ``nodes`` (int64) and ``share`` (float64: nodes /
        tagged nodes in scope, not / all nodes), most used first; ``attrs["tagged_nodes"]``
        is that denominator.
        With ``freq``: ``period`` (datetime64[us, UTC]), ``tag`` (string), ``nodes`` (int64)
        for the same top tags, periods without new nodes for a tag left out; nodes created at
        ``infinity`` or ``-infinity`` fall in no period (``attrs["untimed_nodes"]`` counts
        them, once per tag).
    """
    source = memory_source(source)
    params = scope_params(timeframe=timeframe, robots=robots, prefix=prefix, level=level)
    frame = _tag_sizes(source, params, freq)
    totals = frame.groupby("tag")["nodes"].sum().reset_index()
    totals = totals.sort_values(["nodes", "tag"], ascending=[False, True])
    if limit is not None:
        totals = totals.head(validate_positive_int(limit, field="limit"))
    if freq is None:
        tagged = source.analytics_frame("tagged_nodes", params, {"nodes": "int64"})
        total = int(tagged["nodes"].iloc[0])
        totals["share"] = totals["nodes"] / total if total else 0.0
        result = totals.reset_index(drop=True).astype(
            {"tag": "string", "nodes": "int64", "share": "float64"})
        result.attrs["tagged_nodes"] = total
        return result
    frame = frame[frame["tag"].isin(totals["tag"])]
    frame, untimed = split_at_infinity(frame)
    result = frame.sort_values(["period", "tag"]).reset_index(drop=True)[["period", "tag", "nodes"]]
    result.attrs["untimed_nodes"] = int(untimed["nodes"].sum())
    return result


def _tag_sizes(source: MemorySource, params: dict[str, Any], freq: str | None) -> pd.DataFrame:
    """Nodes per tag in scope (``tag``, ``period``: NaT without ``freq``, ``nodes``)."""
    unit = period_unit(freq)[0] if freq is not None else None
    return source.analytics_frame(
        "tag_sizes", {**params, "unit": unit},
        {"tag": "string", "period": "datetime64[us, UTC]", "nodes": "int64"})


# -- plots ------------------------------------------------------------------------------------

@checked_plot
def plot_tag_cooccurrence(df: pd.DataFrame, *, ax: Any = None, measure: str = "npmi",
                          top: int = 25, **kwargs: Any) -> Any:
    """Bars of the ``top`` pairs of a :func:`tag_cooccurrence` result by ``measure``.

    ``**kwargs`` go to :meth:`matplotlib.axes.Axes.barh`. Returns the Axes.
    """
    measure = column_option(measure, _MEASURES, field="measure")
    top = validate_positive_int(top, field="top")
    shown = df.sort_values([measure, "topic1", "topic2"], ascending=[False, True, True]).head(top)
    ax = axes_or_new(ax, (7, max(2.0, 0.28 * len(shown))))
    labels = (shown["topic1"] + " + " + shown["topic2"]).tolist()
    ax.barh(labels, shown[measure], **kwargs)
    ax.invert_yaxis()
    ax.set_xlabel(measure)
    ax.set_title(f"Tag pairs by {measure}")
    return ax


def _name_order(name: Any) -> tuple[int, Any]:
    """A sort key for node names of any types (a hand-built graph may mix numbers and
    text, which do not compare): numbers first, by value, then the rest as text."""
    if isinstance(name, int | float) and not isinstance(name, bool):
        return (0, name)
    return (1, str(name))


def tag_graph_view(graph: nx.Graph, *, max_nodes: int = 30,
                   edges_per_tag: int = 3) -> nx.Graph:
    """The part of a :func:`tag_graph` that :func:`plot_tag_graph` draws: the ``max_nodes``
    biggest tags with a tie above chance (weight > 0), each with its ``edges_per_tag``
    strongest ties among them; tags left without a tie are dropped, so the view can hold
    fewer than ``max_nodes`` tags. Node and edge attributes are the graph's.

    Text about a plot (its caption, a notebook's summary) counts tags and communities here,
    so that it speaks of what is drawn.
    """
    import networkx as nx

    max_nodes = validate_positive_int(max_nodes, field="max_nodes")
    edges_per_tag = validate_positive_int(edges_per_tag, field="edges_per_tag")
    positive = [(a, b, d) for a, b, d in graph.edges(data=True) if d.get("weight", 0.0) > 0]
    connected = sorted({n for a, b, _ in positive for n in (a, b)},
                       key=lambda n: (-graph.nodes[n].get("nodes", 0), _name_order(n))
                       )[:max_nodes]
    chosen = set(connected)
    strongest: set[tuple[Any, Any]] = set()
    for tag in connected:
        ties = sorted(((d.get("weight", 0.0), *sorted((a, b), key=_name_order))
                       for a, b, d in positive if tag in (a, b) and a in chosen and b in chosen),
                      key=lambda tie: (tie[0], _name_order(tie[1]), _name_order(tie[2])),
                      reverse=True)
        strongest.update((a, b) for _, a, b in ties[:edges_per_tag])
    shown = nx.Graph(**graph.graph)
    shown.add_nodes_from((n, graph.nodes[n]) for n in connected)
    shown.add_edges_from((a, b, graph.edges[a, b]) for a, b in
                         sorted(strongest, key=lambda e: (_name_order(e[0]), _name_order(e[1]))))
    shown.remove_nodes_from([n for n in list(shown) if shown.degree(n) == 0])
    return shown


@checked_plot
def plot_tag_graph(graph: nx.Graph, *, ax: Any = None, max_nodes: int = 30,
                   labels: int | None = None, edges_per_tag: int = 3, seed: int = 0,
                   **kwargs: Any) -> Any:
    """Draw a :func:`tag_graph` (its :func:`tag_graph_view`): the ``max_nodes`` biggest
    connected tags, sized by memories,
    coloured by community (legend: each community's biggest tag); the ``labels`` biggest are
    named (default: all).

    Only each tag's ``edges_per_tag`` strongest ties above chance (weight > 0) are drawn and
    drive the layout: drawing every pair makes a hairball. ``**kwargs`` go to
    :func:`networkx.draw_networkx_nodes`. Returns the Axes.
    """
    import matplotlib
    import matplotlib.lines
    import networkx as nx

    if labels is not None:
        labels = validate_number(labels, field="labels", minimum=0, integer=True)
    # the layout's random state takes 0 to 2**32 - 1
    seed = validate_number(seed, field="seed", minimum=0, maximum=2**32 - 1, integer=True)
    shown = tag_graph_view(graph, max_nodes=max_nodes, edges_per_tag=edges_per_tag)
    ax = axes_or_new(ax, (9, 7))
    if shown.number_of_nodes() == 0:
        ax.set_axis_off()
        ax.set_title("Tag graph (no tags)")
        return ax
    position = nx.spring_layout(shown, weight="weight", seed=seed,
                                k=3.0 / max(shown.number_of_nodes(), 1) ** 0.5)
    sizes = np.array([shown.nodes[n].get("nodes", 1) for n in shown], dtype=float)
    node_size = 40 + 500 * np.sqrt(sizes / max(sizes.max(), 1.0))  # sizes of 0: no 0/0
    communities = [shown.nodes[n].get("community", 0) for n in shown]
    cmap = matplotlib.colormaps[kwargs.pop("cmap", "tab10")]
    palette = {c: cmap(i % cmap.N)
               for i, c in enumerate(sorted(set(communities), key=_name_order))}
    widths = [0.5 + 2.5 * d.get("weight", 0.0) for _, _, d in shown.edges(data=True)]
    nx.draw_networkx_edges(shown, position, ax=ax, width=widths, alpha=0.35)
    nx.draw_networkx_nodes(shown, position, ax=ax, node_size=node_size,
                           node_color=[palette[c] for c in communities], **kwargs)
    named = set(sorted(shown, key=lambda n: (-shown.nodes[n].get("nodes", 0), _name_order(n))
                       )[:labels])
    for node, (x, y) in position.items():
        if node not in named:
            continue
        ax.annotate(node, (x, y), xytext=(0, 9), textcoords="offset points", ha="center",
                    fontsize=7, bbox={"boxstyle": "round,pad=0.1", "fc": "white",
                                      "ec": "none", "alpha": 0.7})
    handles = []
    for community, colour in palette.items():
        members = [n for n in shown if shown.nodes[n].get("community", 0) == community]
        leader = max(members, key=lambda n: (shown.nodes[n].get("nodes", 0), _name_order(n)))
        handles.append(matplotlib.lines.Line2D(
            [], [], marker="o", linestyle="", color=colour,
            label=f"{leader} and {len(members) - 1} more" if len(members) > 1 else leader))
    ax.legend(handles=handles, title="communities (Louvain)", fontsize=7, title_fontsize=8,
              loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.margins(0.08)
    ax.set_axis_off()
    ax.set_title(f"Tag graph: the {shown.number_of_nodes()} biggest connected tags, each with "
                 f"its {edges_per_tag} strongest ties ({graph.graph.get('weight', 'weight')})")
    return ax


@checked_plot
def plot_tag_hierarchy(df: pd.DataFrame, *, ax: Any = None, children: int = 4,
                       top: int = 40, value: str = "cumulative_nodes", **kwargs: Any) -> Any:
    """The tag tree of a :func:`tag_hierarchy` result: top-level tags as bars, biggest
    first, each followed by its ``children`` biggest children (full paths, lighter colour).

    At most ``top`` bars. ``**kwargs`` go to :meth:`matplotlib.axes.Axes.barh`. Returns the
    Axes.
    """
    value = column_option(value, ("cumulative_nodes", "direct_nodes", "tagged_nodes"),
                          field="value")
    children = validate_number(children, field="children", minimum=0, integer=True)
    top = validate_positive_int(top, field="top")
    roots = df[df["depth"] == 1].sort_values([value, "tag"], ascending=[False, True])
    shown = []
    for root in roots.itertuples(index=False):
        shown.append((root.tag, getattr(root, value), True))
        below = df[df["parent"] == root.tag].sort_values([value, "tag"],
                                                          ascending=[False, True])
        shown += [(child.tag, getattr(child, value), False)
                  for child in below.head(children).itertuples(index=False)]
    shown = shown[:top]
    ax = axes_or_new(ax, (7, max(2.0, 0.25 * len(shown))))
    colors = kwargs.pop("color", ["C0" if is_root else "C9" for _, _, is_root in shown])
    ax.barh(range(len(shown)), [v for _, v, _ in shown], color=colors, **kwargs)
    ax.set_yticks(range(len(shown)), [tag if is_root else f"{tag}  " for tag, _, is_root
                                      in shown], fontsize=8)
    for label, (_, _, is_root) in zip(ax.get_yticklabels(), shown):
        label.set_fontweight("bold" if is_root else "normal")
    ax.invert_yaxis()
    ax.set_xlabel(value.replace("_", " "))
    ax.set_title("Tag hierarchy (bold: top-level tags)")
    return ax


@checked_plot
def plot_popular_tags(df: pd.DataFrame, *, ax: Any = None, **kwargs: Any) -> Any:
    """Bars of a :func:`popular_tags` result, or one line per tag when it has periods.

    ``**kwargs`` go to ``barh`` or ``plot``. Returns the Axes.
    """
    if "period" in df:
        ax = axes_or_new(ax, (8, 4))
        for tag, rows in df.groupby("tag", sort=True):
            ax.plot(rows["period"], rows["nodes"], marker="o", label=tag, **kwargs)
        ax.set_ylabel("new memories with the tag")
        legend_if_labelled(ax, fontsize=7, ncols=2)
    else:
        ax = axes_or_new(ax, (7, max(2.0, 0.25 * len(df))))
        ax.barh(df["tag"].tolist(), df["nodes"], **kwargs)
        ax.invert_yaxis()
        ax.set_xlabel("memories")
    ax.set_title("Most used tags")
    return ax
