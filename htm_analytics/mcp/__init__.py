"""A read-only MCP server over the toolkit's analytics: ``htm-analytics mcp``.

Needs the optional dependency ``mcp`` (``pip install 'htm-analytics[mcp]'``).
"""

from .server import MAX_CHARS, MAX_ROWS, REPORT_URI, build_server

__all__ = ["build_server", "MAX_ROWS", "MAX_CHARS", "REPORT_URI"]
