"""Argument checks and small helpers shared by the memory-hygiene checks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..store import LongTermMemory
from ..store.display import shorten_text
from ..store.memory import live_store

__all__ = ["live_store", "validate_fraction", "validate_sample", "validate_seed",
           "wilson_interval", "share_text", "shorten_text", "validate_choices", "MemorySample",
           "draw_sample"]


def validate_fraction(value: Any, *, field: str, low_open: bool = True) -> float:
    """A real number in (0, 1] (or [0, 1] with ``low_open=False``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(f"must be a number between 0 and 1, got {value!r}", field=field)
    number = float(value)
    if not math.isfinite(number) or number > 1 or number < 0 or (low_open and number == 0):
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValidationError(f"must be in {interval}, got {value!r}", field=field)
    return number


def validate_sample(value: Any, *, field: str = "sample") -> int | None:
    """None (every memory) or a positive number of memories."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValidationError(f"must be None or a positive integer, got {value!r}",
                              field=field)
    return int(value)


def validate_seed(value: Any, *, field: str = "seed") -> int:
    """A non-negative integer seed (at most PostgreSQL's ``bigint``)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value <= 2**63 - 1:
        raise ValidationError(f"must be a non-negative integer, got {value!r}", field=field)
    return int(value)


@dataclass(frozen=True)
class MemorySample:
    """Memories a check reads instead of every memory in scope: ``ids`` (int64, ascending),
    chosen in the database by a hash of each id and ``seed``, out of ``total`` in scope."""

    ids: np.ndarray
    total: int
    seed: int

    def estimate(self, involved: int) -> dict[str, Any]:
        """What a check on the sample says about the whole scope: ``involved`` of the
        ``checked`` sampled memories, their share and its 95% Wilson interval."""
        checked = len(self.ids)
        low, high = wilson_interval(involved, checked)
        return {"checked": checked, "memories": self.total, "seed": self.seed,
                "involved": involved, "share": involved / checked if checked else math.nan,
                "share_low": low, "share_high": high}


def draw_sample(store: LongTermMemory, sample: Any, seed: Any,
                scope: dict[str, Any]) -> MemorySample | None:
    """The seeded sample of ``sample`` memories in scope, or None when every memory is to
    be checked (``sample`` None, or at least the memories in scope)."""
    size = validate_sample(sample)
    seed = validate_seed(seed)
    if size is None:
        return None
    total = store.count_in_scope(scope)
    if size >= total:
        return None
    return MemorySample(store.sample_ids(size, seed=seed, scope=scope), total, seed)


def wilson_interval(hits: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``hits / total`` (NaNs when ``total`` is 0)."""
    if total == 0:
        return math.nan, math.nan
    z = NormalDist().inv_cdf(0.5 + confidence / 2)  # the standard library's: no scipy.stats
    share = hits / total
    centre = (share + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) \
        / (1 + z * z / total)
    # Rounding can put a bound a hair past the share itself (at 0 or all hits): clamp it.
    return min(share, max(0.0, centre - half)), max(share, min(1.0, centre + half))


def share_text(share: Any, low: Any, high: Any, *, digits: int = 1) -> str:
    """A share estimated on a sample, with its interval (numbers, as a frame holds them),
    worded the same everywhere: ``12.3% (95% interval 10.1%-14.8%)``."""
    share, low, high = float(share), float(low), float(high)
    return f"{share:.{digits}%} (95% interval {low:.{digits}%}-{high:.{digits}%})"


def validate_choices(value: Any, allowed: tuple[str, ...], *, field: str) -> tuple[str, ...]:
    """One name or a list of names among ``allowed`` (all of them for None), deduplicated."""
    if value is None:
        return allowed
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names or \
            not all(isinstance(n, str) and n in allowed for n in names):
        raise ValidationError(f"must be one or more of {', '.join(allowed)}", field=field)
    return tuple(dict.fromkeys(names))
