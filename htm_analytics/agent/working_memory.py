"""Working memory: the token-budgeted set of memories a robot holds in its context."""

from __future__ import annotations

import datetime as dt
import math
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..validation import validate_positive_int, validate_token_count

__all__ = ["WorkingMemory", "entry_value"]

CONTEXT_STRATEGIES = ("recent", "frequent", "balanced")


@dataclass
class _Entry:
    value: Any
    token_count: int
    access_count: int
    last_accessed: dt.datetime | None
    added_at: dt.datetime
    order: int  # when added or last touched: larger is more recent


def entry_value(access_count: int, last_used: dt.datetime, now: dt.datetime) -> float:
    """How much an entry is worth keeping: ``ln(1 + access_count) + 1 / (1 + hours idle)``.

    Frequent use (logarithmic, so a few extra accesses matter less and less) and recent use
    (decaying from 1 towards 0 over hours) both raise it. Eviction removes the lowest first.
    """
    hours = max((now - last_used).total_seconds(), 0.0) / 3600.0
    return math.log1p(max(access_count, 0)) + 1.0 / (1.0 + hours)


class WorkingMemory:
    """A token budget of memories, most valuable kept, thread-safe.

    Parameters
    ----------
    max_tokens : int
        The budget.
    clock : callable, optional
        Returns the current aware datetime (default: UTC now); tests pass a fixed clock.

    Notes
    -----
    Eviction removes entries in increasing :func:`entry_value` (ties: the least recently added
    or touched first) and stops as soon as the requested tokens fit: it frees only what is
    needed. The reference Ruby implementation evicts the *highest*-valued entry first, the
    reverse of its own documentation; this follows the documentation.
    """

    def __init__(self, max_tokens: int, *,
                 clock: Callable[[], dt.datetime] | None = None) -> None:
        self.max_tokens = validate_positive_int(max_tokens, field="max_tokens")
        self._clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self._entries: dict[Hashable, _Entry] = {}
        self._tokens = 0
        self._counter = 0
        self._lock = threading.RLock()

    # -- sizes ------------------------------------------------------------------------------

    @property
    def token_count(self) -> int:
        """Tokens held."""
        return self._tokens

    @property
    def node_count(self) -> int:
        """Entries held."""
        return len(self._entries)

    @property
    def utilization(self) -> float:
        """Percentage of the budget in use, 0 to 100, rounded to 2 decimals."""
        return round(100.0 * self._tokens / self.max_tokens, 2)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[Hashable]:
        """The keys held, least recently added or touched first."""
        with self._lock:
            return [k for k, _ in sorted(self._entries.items(), key=lambda kv: kv[1].order)]

    def __repr__(self) -> str:
        return (f"WorkingMemory({self.node_count} entries, {self._tokens}/{self.max_tokens} "
                f"tokens)")

    # -- changes ----------------------------------------------------------------------------

    def has_space(self, tokens: int) -> bool:
        """Whether ``tokens`` more fit in the budget."""
        return self._tokens + _tokens(tokens, "tokens") <= self.max_tokens

    def add(self, key: Hashable, value: Any, *, token_count: int, access_count: int = 0,
            last_accessed: dt.datetime | None = None) -> None:
        """Hold ``value`` under ``key`` (replacing an entry with that key, made most recent).

        Raises
        ------
        ValidationError
            If the entry is larger than the whole budget, or does not fit in the space left
            (call :meth:`evict_to_make_space` first): the budget is never exceeded.
        """
        tokens = _tokens(token_count)
        if tokens > self.max_tokens:
            raise ValidationError(f"{tokens} tokens do not fit a working memory of "
                                  f"{self.max_tokens}", field="token_count")
        with self._lock:
            previous = self._entries.get(key)
            freed = previous.token_count if previous else 0
            if self._tokens - freed + tokens > self.max_tokens:
                raise ValidationError(
                    f"{tokens} tokens do not fit: {self.max_tokens - self._tokens + freed} "
                    "left; call evict_to_make_space first", field="token_count")
            self._counter += 1
            self._entries[key] = _Entry(value, tokens, max(int(access_count), 0),
                                        last_accessed, self._clock(), self._counter)
            self._tokens += tokens - freed

    def touch(self, key: Hashable) -> bool:
        """Count one access to ``key`` now and make it most recent; False if absent."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False
            self._counter += 1
            entry.access_count += 1
            entry.last_accessed = self._clock()
            entry.order = self._counter
            return True

    def remove(self, key: Hashable) -> bool:
        """Drop ``key``; False if it was not held."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None:
                return False
            self._tokens -= entry.token_count
            return True

    def clear(self) -> list[Hashable]:
        """Drop everything; returns the keys that were held."""
        with self._lock:
            keys = list(self._entries)
            self._entries.clear()
            self._tokens = 0
            return keys

    def evict_to_make_space(self, tokens: int) -> list[dict[str, Any]]:
        """Evict the least valuable entries until ``tokens`` more fit; return them.

        Returns
        -------
        list of dict
            ``{"key": ..., "value": ...}`` per evicted entry, in eviction order (empty when
            the tokens already fit).

        Raises
        ------
        ValidationError
            If ``tokens`` exceed the whole budget (nothing is evicted then).
        """
        needed = _tokens(tokens, "tokens")
        if needed > self.max_tokens:
            raise ValidationError(f"{needed} tokens do not fit a working memory of "
                                  f"{self.max_tokens}", field="tokens")
        with self._lock:
            if self._tokens + needed <= self.max_tokens:
                return []
            now = self._clock()
            ranked = sorted(self._entries.items(), key=lambda kv: (
                entry_value(kv[1].access_count, kv[1].last_accessed or kv[1].added_at, now),
                kv[1].order))
            evicted = []
            for key, entry in ranked:
                if self._tokens + needed <= self.max_tokens:
                    break
                del self._entries[key]
                self._tokens -= entry.token_count
                evicted.append({"key": key, "value": entry.value})
            return evicted

    # -- context ----------------------------------------------------------------------------

    def assemble_context(self, strategy: str = "balanced", max_tokens: int | None = None) -> str:
        """The held values joined by blank lines, best first, within ``max_tokens``.

        Strategies: ``recent`` (most recently added or touched first), ``frequent`` (most
        accessed first), ``balanced`` (highest :func:`entry_value` first). Walks that order and
        stops at the first entry that would overflow the budget (default: ``max_tokens`` of
        this working memory).
        """
        if strategy not in CONTEXT_STRATEGIES:
            raise ValidationError(f"must be one of {', '.join(CONTEXT_STRATEGIES)}, got "
                                  f"{strategy!r}", field="strategy")
        budget = self.max_tokens if max_tokens is None else _tokens(max_tokens, "max_tokens")
        with self._lock:
            now = self._clock()
            entries = list(self._entries.values())
            if strategy == "recent":
                entries.sort(key=lambda e: -e.order)
            elif strategy == "frequent":
                entries.sort(key=lambda e: (-e.access_count, -e.order))
            else:
                entries.sort(key=lambda e: (-entry_value(
                    e.access_count, e.last_accessed or e.added_at, now), -e.order))
            parts, used = [], 0
            for entry in entries:
                if used + entry.token_count > budget:
                    break
                parts.append(str(entry.value))
                used += entry.token_count
            return "\n\n".join(parts)


def _tokens(value: Any, field: str = "token_count") -> int:
    return validate_token_count(value, field=field)
