"""Analysis helpers: DataFrames about tags, trends, robots and indexes, and ``plot_*``
functions taking them (``ax=None``, returning the Axes). They read through a
:class:`~htm_analytics.LongTermMemory` or an offline :class:`~htm_analytics.Snapshot`.
"""

from ._common import share_text
from .growth import (
    GROWTH_COLUMNS,
    memory_growth,
)
from .hygiene import (
    NEAR_DUPLICATE_COLUMNS,
    model_groups,
    near_duplicates,
    normalise_text,
)
from .indexes import (
    index_usage,
    index_usage_delta,
    plot_index_usage,
    table_health,
)
from .reachability import (
    REACHABILITY_COLUMNS,
    UNREACHABLE_COLUMNS,
    unreachable_memories,
)
from .retention import (
    RETENTION_COLUMNS,
    RETENTION_SUMMARY_COLUMNS,
    DecayPolicy,
    ExpiryPolicy,
    RetentionPolicy,
    retention_what_if,
)
from .robots import (
    plot_robot_activity,
    plot_robot_overlap,
    robot_activity,
    robot_overlap,
)
from .sensitive import (
    SENSITIVE_COLUMNS,
    SENSITIVE_KINDS,
    Finding,
    find_sensitive,
    sensitive_memories,
)
from .staleness import (
    STALE_COLUMNS,
    stale_memories,
)
from .summary import (
    HYGIENE_CHECKS,
    HygieneResult,
    memory_hygiene,
)
from .supersession import (
    SUPERSESSION_COLUMNS,
    content_words,
    supersession_candidates,
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
    "GROWTH_COLUMNS",
    "memory_growth",
    "NEAR_DUPLICATE_COLUMNS",
    "near_duplicates",
    "normalise_text",
    "model_groups",
    "index_usage",
    "index_usage_delta",
    "table_health",
    "plot_index_usage",
    "UNREACHABLE_COLUMNS",
    "REACHABILITY_COLUMNS",
    "unreachable_memories",
    "robot_overlap",
    "robot_activity",
    "plot_robot_overlap",
    "plot_robot_activity",
    "SENSITIVE_KINDS",
    "SENSITIVE_COLUMNS",
    "sensitive_memories",
    "find_sensitive",
    "Finding",
    "STALE_COLUMNS",
    "stale_memories",
    "SUPERSESSION_COLUMNS",
    "content_words",
    "supersession_candidates",
    "RETENTION_COLUMNS",
    "RETENTION_SUMMARY_COLUMNS",
    "DecayPolicy",
    "ExpiryPolicy",
    "RetentionPolicy",
    "retention_what_if",
    "HYGIENE_CHECKS",
    "HygieneResult",
    "memory_hygiene",
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
    "share_text",
]
