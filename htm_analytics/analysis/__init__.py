"""Analysis helpers: DataFrames about tags, trends, robots and indexes, and ``plot_*``
functions taking them (``ax=None``, returning the Axes). They read through a
:class:`~htm_analytics.LongTermMemory` or an offline :class:`~htm_analytics.Snapshot`.
"""

from .indexes import (
    index_usage,
    index_usage_delta,
    plot_index_usage,
    table_health,
)
from .robots import (
    plot_robot_activity,
    plot_robot_overlap,
    robot_activity,
    robot_overlap,
)
from .tags import (
    plot_popular_tags,
    plot_tag_cooccurrence,
    plot_tag_graph,
    plot_tag_hierarchy,
    popular_tags,
    tag_cooccurrence,
    tag_graph,
    tag_graph_view,
    tag_hierarchy,
    write_tag_graph,
)
from .trends import (
    most_reinforced,
    plot_remember_count_distribution,
    plot_remember_trends,
    remember_count_distribution,
    remember_trends,
)

__all__ = [
    "index_usage",
    "index_usage_delta",
    "table_health",
    "plot_index_usage",
    "robot_overlap",
    "robot_activity",
    "plot_robot_overlap",
    "plot_robot_activity",
    "tag_cooccurrence",
    "tag_graph",
    "tag_graph_view",
    "write_tag_graph",
    "tag_hierarchy",
    "popular_tags",
    "plot_tag_cooccurrence",
    "plot_tag_graph",
    "plot_tag_hierarchy",
    "plot_popular_tags",
    "remember_trends",
    "remember_count_distribution",
    "most_reinforced",
    "plot_remember_trends",
    "plot_remember_count_distribution",
]
