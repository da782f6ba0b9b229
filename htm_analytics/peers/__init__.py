"""Other agents' memory databases: import them into the store and analyse them in place.

- :mod:`~htm_analytics.peers.ghostkg`: GhostKG (SQLite knowledge graphs with FSRS state).
- :mod:`~htm_analytics.peers.arandu`: Arandu (PostgreSQL: events, versioned facts, entities).
- :mod:`~htm_analytics.peers.seaf`: the Self-Engineering Agent Framework (PostgreSQL: tools,
  executions, workflow patterns, sessions).

See ``docs/peers.md`` for how each system maps onto robots, nodes, tags and events.
"""

from ._importing import ImportSummary, TableSummary
from .arandu import (
    arandu_entity_growth,
    arandu_fact_versions,
    arandu_stale_facts,
    check_arandu_source,
    import_arandu,
    plot_fact_timeline,
)
from .ghostkg import (
    check_ghostkg_source,
    fsrs_retrievability,
    ghostkg_memory_state,
    ghostkg_retrievability_curves,
    import_ghostkg,
    plot_retrievability_curves,
)
from .seaf import (
    check_seaf_source,
    import_seaf,
    plot_tool_stats,
    seaf_composite_candidates,
    seaf_tool_ngrams,
    seaf_tool_stats,
)

__all__ = [
    "ImportSummary",
    "TableSummary",
    "arandu_entity_growth",
    "arandu_fact_versions",
    "arandu_stale_facts",
    "check_arandu_source",
    "check_ghostkg_source",
    "check_seaf_source",
    "fsrs_retrievability",
    "ghostkg_memory_state",
    "ghostkg_retrievability_curves",
    "import_arandu",
    "import_ghostkg",
    "import_seaf",
    "plot_fact_timeline",
    "plot_retrievability_curves",
    "plot_tool_stats",
    "seaf_composite_candidates",
    "seaf_tool_ngrams",
    "seaf_tool_stats",
]
