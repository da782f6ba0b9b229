"""Timeframes for recall: None, a (start, end) pair, a date, or a natural phrase."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validation import validate_datetime, validate_timeframe

__all__ = ["parse_timeframe", "TIMEFRAME_PHRASES"]

TIMEFRAME_PHRASES = (
    "today", "yesterday", "recently", "last N hours|days|weeks|months|years",
    "past N ...", "last hour|day|week|month|year", "this week|month|year", "N days ago",
    "YYYY-MM-DD", "START..END (ISO dates or times)",
)
RECENTLY = dt.timedelta(days=3)
_UNITS = {"minute": dt.timedelta(minutes=1), "hour": dt.timedelta(hours=1),
          "day": dt.timedelta(days=1), "week": dt.timedelta(weeks=1),
          "month": dt.timedelta(days=30), "year": dt.timedelta(days=365)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "few": 3, "a few": 3, "several": 3}
_COUNT = r"(\d+|a few|few|several|one|two|three|four|five|six|seven|eight|nine|ten|an?)"
_UNIT = r"(minute|hour|day|week|month|year)s?"


def _day(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    return start, start + dt.timedelta(days=1) - dt.timedelta(microseconds=1)


def _month_start(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, 1, tzinfo=dt.UTC)


def parse_timeframe(value: Any, *, now: dt.datetime | dt.date | None = None
                    ) -> tuple[dt.datetime, dt.datetime] | None:
    """Turn a timeframe into an inclusive ``(start, end)`` pair of UTC datetimes, or None.

    Accepts None (no filter); a ``(start, end)`` pair of dates or datetimes (a date ending
    it holds that whole day); a date or datetime (that whole UTC day); or a phrase,
    case-insensitive:

    - ``today``, ``yesterday``; ``recently`` / ``recent`` (the last 3 days);
    - ``last N <unit>`` / ``past N <unit>`` / ``in the last N <unit>``: rolling, ending now
      (units minute, hour, day, week, month = 30 days, year = 365 days; N may be a word, "a
      few" and "several" mean 3); ``last <unit>`` alone is N = 1 except for the calendar ones
      below;
    - ``last week``, ``last month``, ``last year``: the previous calendar week (Monday to
      Sunday), month or year;
    - ``this week``, ``this month``, ``this year``: from its start until now;
    - ``N <unit>s ago``: that whole day (for days and weeks: the day N units back).

    As text too (a tool call passes nothing else): an ISO 8601 date (``2026-01-01``: that
    whole UTC day), or a range ``START..END`` of dates or dates and times
    (``2026-01-01..2026-02-01``, ``2026-01-01T10:00..2026-01-01T12:00``).

    ``now`` (default: the current time) is read as
    :func:`~htm_analytics.validation.validate_datetime` reads every datetime argument: a
    datetime (naive is UTC), a date (its first moment) or a ``pandas.Timestamp``.

    Raises
    ------
    ValidationError
        For anything else: an unknown phrase is never silently "no filter", and a missing
        value other than None (``NaT``, NaN, ``pd.NA``, alone or in a pair) is refused as
        missing. A bad ``now`` is refused naming ``now``.
    """
    when = dt.datetime.now(dt.UTC) if now is None else validate_datetime(now, field="now")
    if value is None:
        return None
    _refuse_missing(value)
    try:
        return _parse(value, when)
    except (OverflowError, ValueError) as exc:  # "last 99999999 years" leaves the calendar
        if isinstance(exc, ValidationError):
            raise
        raise ValidationError(f"{value!r} reaches outside the calendar ({exc})",
                              field="timeframe") from None


def _is_missing(value: Any) -> bool:
    """None, pandas' ``NaT`` and ``NA``, a float NaN or numpy's ``NaT``."""
    if value is None or type(value).__name__ in ("NaTType", "NAType"):
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(value))
    return False


def _refuse_missing(value: Any) -> None:
    """Refuse a missing value, alone (None aside: no filter) or as an end of a pair."""
    ends = (value if isinstance(value, Sequence) and not isinstance(value, (str, bytes))
            and len(value) == 2 else (value,))
    if any(_is_missing(end) for end in ends):
        raise ValidationError(f"must be a date, datetime, (start, end) pair or phrase, got a "
                              f"missing value ({value!r}); pass None for no filter",
                              field="timeframe")


def _parse(value: Any, now: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
    if isinstance(value, dt.datetime):
        return _day(value.astimezone(dt.UTC).date() if value.tzinfo else value.date())
    if isinstance(value, dt.date):
        return _day(value)
    if not isinstance(value, str):
        return validate_timeframe(value)
    phrase = " ".join(value.lower().split())
    today = now.date()
    if phrase == "today":
        return _day(today)[0], now
    if phrase == "yesterday":
        return _day(today - dt.timedelta(days=1))
    if phrase in ("recently", "recent"):
        return now - RECENTLY, now
    if phrase in ("last week", "previous week"):
        start = _day(today - dt.timedelta(days=today.weekday() + 7))[0]
        return start, start + dt.timedelta(weeks=1) - dt.timedelta(microseconds=1)
    if phrase in ("last month", "previous month"):
        end = _month_start(today)
        return _month_start((end - dt.timedelta(days=1)).date()), end - dt.timedelta(
            microseconds=1)
    if phrase in ("last year", "previous year"):
        return (dt.datetime(today.year - 1, 1, 1, tzinfo=dt.UTC),
                dt.datetime(today.year, 1, 1, tzinfo=dt.UTC) - dt.timedelta(microseconds=1))
    if phrase == "this week":
        return _day(today - dt.timedelta(days=today.weekday()))[0], now
    if phrase == "this month":
        return _month_start(today), now
    if phrase == "this year":
        return dt.datetime(today.year, 1, 1, tzinfo=dt.UTC), now
    rolling = re.fullmatch(rf"(?:in the )?(?:last|past)(?: {_COUNT})? {_UNIT}", phrase)
    if rolling:
        count = _count(rolling.group(1) or "1")
        return now - count * _UNITS[rolling.group(2)], now
    ago = re.fullmatch(rf"{_COUNT} {_UNIT} ago", phrase)
    if ago:
        point = now - _count(ago.group(1)) * _UNITS[ago.group(2)]
        return _day(point.date())
    written = _iso_written(value.strip())  # text is all a tool call can pass
    if isinstance(written, tuple):
        return validate_timeframe(written)  # a date ending the range holds that whole day
    if written is not None:
        return _parse(written, now)
    raise ValidationError(
        f"cannot read {value!r} as a timeframe; use None, a (start, end) pair, a date, or one "
        f"of: {'; '.join(TIMEFRAME_PHRASES)}", field="timeframe")


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}.*")


def _iso_moment(text: str) -> dt.date | dt.datetime | None:
    """A calendar date (``2026-01-01``) or a date and time in ISO 8601, or None (the week
    and ordinal forms, ``2026-W01``, ``2026-001``, are not read as a day)."""
    try:
        if _ISO_DATE.fullmatch(text):
            return dt.date.fromisoformat(text)
        return dt.datetime.fromisoformat(text) if _ISO_TIME.fullmatch(text) else None
    except ValueError:
        return None


def _iso_written(text: str) -> Any:
    """A date (``2026-01-01``) alone, or ``START..END`` of dates or dates and times as a
    pair, or None. A date and time alone names an instant, no range: not read."""
    start, dots, end = text.partition("..")
    moments = tuple(_iso_moment(part.strip()) for part in ((start, end) if dots else (start,)))
    if None in moments or (not dots and isinstance(moments[0], dt.datetime)):
        return None
    return moments if dots else moments[0]


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]
