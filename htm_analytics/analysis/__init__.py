"""Analysis helpers returning DataFrames: here, the memory-hygiene checks.

Each takes the live store, only reads, and returns a typed DataFrame (see
``docs/hygiene.md``).
"""

from .growth import GROWTH_COLUMNS, memory_growth
from .hygiene import NEAR_DUPLICATE_COLUMNS, near_duplicates, normalise_text
from .reachability import REACHABILITY_COLUMNS, UNREACHABLE_COLUMNS, unreachable_memories
from .sensitive import SENSITIVE_COLUMNS, SENSITIVE_KINDS, sensitive_memories
from .staleness import STALE_COLUMNS, stale_memories
from .summary import HYGIENE_CHECKS, HygieneResult, memory_hygiene

__all__ = ["NEAR_DUPLICATE_COLUMNS", "near_duplicates", "normalise_text",
           "SENSITIVE_COLUMNS", "SENSITIVE_KINDS", "sensitive_memories",
           "HYGIENE_CHECKS", "HygieneResult", "memory_hygiene", "REACHABILITY_COLUMNS",
           "UNREACHABLE_COLUMNS", "unreachable_memories", "STALE_COLUMNS", "stale_memories",
           "GROWTH_COLUMNS", "memory_growth"]
