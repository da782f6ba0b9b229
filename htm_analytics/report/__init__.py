"""What people look at: the self-contained report, the demo that builds one, and the
notebook widgets (:mod:`htm_analytics.report.widgets`, imported on demand).
"""

from .advice import (
    advisor_section,
    findings_html,
    findings_markdown,
    hnsw_section,
)
from .build import (
    MIN_SWEEP_VECTORS,
    TOP_ROBOTS,
    TOP_TREND_ROBOTS,
    Figure,
    Report,
    Section,
    build_report,
)
from .conversations import conversation_section
from .demo import (
    DEMO_DATABASE,
    DemoQueryEmbedder,
    demo_database_url,
    demo_queries,
    load_demo,
    run_demo,
)
from .hygiene import (
    REPORT_DUPLICATES_SAMPLE,
    REPORT_HYGIENE_SAMPLE,
    WORST_SHOWN,
    hygiene_section,
)
from .render import (
    REPORT_CSS,
    counted,
    escape,
    first_sentence,
    html_table,
    markdown_table,
    shown_texts,
    with_size,
)

__all__ = [
    "advisor_section",
    "hnsw_section",
    "findings_html",
    "findings_markdown",
    "Figure",
    "Section",
    "Report",
    "build_report",
    "MIN_SWEEP_VECTORS",
    "TOP_ROBOTS",
    "TOP_TREND_ROBOTS",
    "DEMO_DATABASE",
    "load_demo",
    "demo_database_url",
    "demo_queries",
    "run_demo",
    "DemoQueryEmbedder",
    "hygiene_section",
    "conversation_section",
    "WORST_SHOWN",
    "REPORT_HYGIENE_SAMPLE",
    "REPORT_DUPLICATES_SAMPLE",
    "html_table",
    "escape",
    "markdown_table",
    "with_size",
    "shown_texts",
    "REPORT_CSS",
    "counted",
    "first_sentence",
]
