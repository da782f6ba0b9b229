"""Working memory: the token-budgeted set of memories a robot holds in its context."""

from __future__ import annotations

import datetime as dt
import math
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, cast

from ..errors import ValidationError
from ..validation import (
    validate_datetime,
    validate_number,
    validate_positive_int,
    validate_token_count,
)

__all__ = ["WorkingMemory", "CheckedClock", "checked_clock", "entry_value"]

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

    Parameters
    ----------
    access_count : int
        How often the entry was used, 0 or more (not a bool).
    last_used : datetime
        An aware datetime: when it was last used (or added). A time after ``now`` counts as
        no time idle.
    now : datetime
        An aware datetime: the moment of the valuation.

    Returns
    -------
    float
        Finite and positive: 0 < value <= ln(1 + access_count) + 1; it grows with
        ``access_count`` and shrinks as ``now`` moves on.

    Raises
    ------
    ValidationError
        A bad argument, naming it.
    """
    accesses = validate_number(access_count, field="access_count", minimum=0, integer=True)
    return _entry_value(int(accesses), aware_datetime(last_used, field="last_used"),
                        aware_datetime(now, field="now"))


def _entry_value(access_count: int, last_used: dt.datetime, now: dt.datetime) -> float:
    """:func:`entry_value` without the checks, for the eviction and context loops, whose
    entries and moment were checked when they came in."""
    hours = max((now - last_used).total_seconds(), 0.0) / 3600.0
    return math.log1p(access_count) + 1.0 / (1.0 + hours)


def aware_datetime(value: Any, *, field: str) -> dt.datetime:
    """``value`` if it is an aware datetime (a ``pandas.Timestamp`` as a datetime); raise
    :class:`ValidationError` naming ``field`` for anything else: text, a date, a naive
    datetime (whose zone is unknown) or a missing value (``NaT``)."""
    if type(value).__name__ == "NaTType":
        raise ValidationError("must be an aware datetime, got a missing value (NaT)",
                              field=field)
    if not isinstance(value, dt.datetime):
        raise ValidationError(f"must be an aware datetime, got {type(value).__name__}",
                              field=field)
    try:
        aware = value.utcoffset() is not None
    except Exception as exc:  # a tzinfo of one's own that fails
        raise ValidationError(f"has a time zone that fails ({exc})", field=field) from None
    if not aware:
        raise ValidationError(f"must be an aware datetime (with a time zone), got the naive "
                              f"{value.isoformat()}", field=field)
    # a pandas.Timestamp as a datetime (to the microsecond)
    return value.to_pydatetime(warn=False) if hasattr(value, "to_pydatetime") else value


class CheckedClock:
    """A clock each reading of which is checked by :func:`aware_datetime` (and with
    ``bounded``, by :func:`~htm_analytics.validation.validate_datetime`: within the years
    the store holds): a clock that fails or returns anything else raises
    :class:`ValidationError` naming ``field``."""

    def __init__(self, clock: Callable[[], Any], *, field: str, bounded: bool) -> None:
        self._clock, self.field, self.bounded = clock, field, bounded

    def __call__(self) -> dt.datetime:
        try:
            value = self._clock()
        except ValidationError:
            raise
        except Exception as exc:
            raise ValidationError(f"failed: {type(exc).__name__}: {exc}",
                                  field=self.field) from exc
        value = aware_datetime(value, field=self.field)
        if self.bounded:
            validate_datetime(value, field=self.field)
        return value


def checked_clock(clock: Any, *, field: str = "clock",
                  bounded: bool = False) -> Callable[[], dt.datetime]:
    """``clock`` (default: UTC now) as a :class:`CheckedClock`, read once here, so that a
    clock that is no clock is refused where it is given. A clock checked already at least
    as strictly (HTM's, which it hands to its working memory) is used as it is: read once,
    and each reading checked once."""
    if isinstance(clock, CheckedClock) and clock.field == field \
            and (clock.bounded or not bounded):
        return clock
    if clock is None and not bounded:
        return _utc_now
    if clock is not None and not callable(clock):
        raise ValidationError(f"must be a callable returning an aware datetime, got "
                              f"{type(clock).__name__}", field=field)
    checked = CheckedClock(clock or _utc_now, field=field, bounded=bounded)
    checked()
    return checked


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _key(key: Any) -> Hashable:
    """``key`` if it can be a dictionary key; raise :class:`ValidationError` otherwise."""
    try:
        hash(key)
    except Exception:  # TypeError for lists, dicts, sets; anything a __hash__ raises
        raise ValidationError(f"must be hashable (a string, number or tuple of them), got "
                              f"{type(key).__name__}", field="key") from None
    return cast(Hashable, key)


class WorkingMemory:
    """A token budget of memories, most valuable kept, thread-safe.

    Parameters
    ----------
    max_tokens : int
        The budget.
    clock : callable, optional
        Returns the current aware datetime (default: UTC now); tests pass a fixed clock.
        It is read once when the working memory is made, and each reading is checked: a
        clock that is not callable, fails or returns anything but an aware datetime raises
        :class:`~htm_analytics.ValidationError` (``field="clock"``) and changes nothing.

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
        self._clock = checked_clock(clock)
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
        return _key(key) in self._entries

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
            last_accessed: dt.datetime | None = None, now: dt.datetime | None = None) -> None:
        """Hold ``value`` under ``key`` (replacing an entry with that key, made most recent).

        Parameters
        ----------
        key : hashable
        value : object
            Held as it is; :meth:`assemble_context` joins the ``str`` of each value.
        token_count : int
            0 to 2**31 - 1.
        access_count : int
            How often it was used before, 0 or more.
        last_accessed : datetime, optional
            An aware datetime: when it was last used (default: when it is added).
        now : datetime, optional
            An aware datetime: when it is added (default: a reading of the clock). A caller
            doing several things at one moment (HTM's remember and recall) reads its clock
            once and passes that moment, so that no reading can fail half-way.

        Raises
        ------
        ValidationError
            A key that is not hashable or a bad count or time (naming the argument); an
            entry larger than the whole budget, or one that does not fit in the space left
            (call :meth:`evict_to_make_space` first): the budget is never exceeded; a clock
            that fails. Nothing changes then.
        """
        key = _key(key)
        tokens = _tokens(token_count)
        accesses = int(validate_number(access_count, field="access_count", minimum=0,
                                       integer=True))
        if last_accessed is not None:
            last_accessed = aware_datetime(last_accessed, field="last_accessed")
        if now is not None:
            now = aware_datetime(now, field="now")
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
            if now is None:
                now = self._clock()
            self._counter += 1
            self._entries[key] = _Entry(value, tokens, accesses, last_accessed, now,
                                        self._counter)
            self._tokens += tokens - freed

    def touch(self, key: Hashable) -> bool:
        """Count one access to ``key`` now and make it most recent; False if absent."""
        key = _key(key)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False
            now = self._clock()
            self._counter += 1
            entry.access_count += 1
            entry.last_accessed = now
            entry.order = self._counter
            return True

    def remove(self, key: Hashable) -> bool:
        """Drop ``key``; False if it was not held."""
        key = _key(key)
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

    def evict_to_make_space(self, tokens: int, *,
                            now: dt.datetime | None = None) -> list[dict[str, Any]]:
        """Evict the least valuable entries until ``tokens`` more fit; return them.

        Parameters
        ----------
        tokens : int
        now : datetime, optional
            An aware datetime: the moment the entries are valued at (default: a reading of
            the clock, taken only if something must be evicted).

        Returns
        -------
        list of dict
            ``{"key": ..., "value": ...}`` per evicted entry, in eviction order (empty when
            the tokens already fit).

        Raises
        ------
        ValidationError
            If ``tokens`` exceed the whole budget, a bad ``now`` or a clock that fails
            (nothing is evicted then).
        """
        needed = _tokens(tokens, "tokens")
        if now is not None:
            now = aware_datetime(now, field="now")
        if needed > self.max_tokens:
            raise ValidationError(f"{needed} tokens do not fit a working memory of "
                                  f"{self.max_tokens}", field="tokens")
        with self._lock:
            if self._tokens + needed <= self.max_tokens:
                return []
            if now is None:
                now = self._clock()
            ranked = sorted(self._entries.items(), key=lambda kv: (
                _entry_value(kv[1].access_count, kv[1].last_accessed or kv[1].added_at, now),
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
        if not isinstance(strategy, str) or strategy not in CONTEXT_STRATEGIES:
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
                entries.sort(key=lambda e: (-_entry_value(
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
