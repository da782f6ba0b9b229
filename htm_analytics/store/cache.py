"""An LRU cache with a time-to-live, for query results."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["QueryCache"]


class QueryCache:
    """Thread-safe LRU cache whose entries also expire ``ttl`` seconds after they were stored.

    Parameters
    ----------
    size : int
        Most entries kept; the least recently used entry is dropped first. 0 disables caching.
    ttl : float
        Seconds an entry stays valid.
    clock : callable, optional
        Monotonic clock in seconds; tests pass a fake one.
    """

    def __init__(self, size: int = 1000, ttl: float = 300, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self.ttl = ttl
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.generation = 0

    @property
    def enabled(self) -> bool:
        return self.size > 0

    def get(self, key: Hashable, valid: Callable[[Any], bool] | None = None
            ) -> tuple[bool, Any]:
        """Return ``(True, value)`` on a hit, ``(False, None)`` on a miss (counted).

        ``valid(value)``, when given, is asked about a live entry (outside the lock: it may
        ask the database); an entry it refuses is dropped and counts as a miss.
        """
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] <= self._clock():
                del self._entries[key]
                entry = None
        if entry is not None and (valid is None or valid(entry[1])):
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                self.hits += 1
            return True, entry[1]
        with self._lock:
            if entry is not None and self._entries.get(key) is entry:
                del self._entries[key]
            self.misses += 1
        return False, None

    def put(self, key: Hashable, value: Any) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._entries[key] = (self._clock() + self.ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry (the hit and miss counters stay) and start a new ``generation``.

        A result computed before a clear must not be stored after it: callers read
        ``generation`` before computing and put their key with it, so such a late result
        lands under a generation that no later lookup asks for.
        """
        with self._lock:
            self._entries.clear()
            self.generation += 1

    def __len__(self) -> int:
        with self._lock:
            now = self._clock()
            return sum(1 for expires, _ in self._entries.values() if expires > now)

    def stats(self) -> dict[str, float | int]:
        """``hits``, ``misses``, ``hit_rate`` (percent, 2 decimals) and ``size`` (live entries)."""
        with self._lock:
            total = self.hits + self.misses
            hit_rate = round(100.0 * self.hits / total, 2) if total else 0.0
            hits, misses = self.hits, self.misses
        return {"hits": hits, "misses": misses, "hit_rate": hit_rate, "size": len(self)}
