"""Calendar dates a question names ("on 3 June, 2023", "May 25, 2023", "in December 2023",
"2023-06-03"), as UTC ranges: the default recall favours memories remembered then."""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["mentioned_dates"]

_MONTHS = {name: number for number, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
     ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
     ("october", "oct"), ("november", "nov"), ("december", "dec")], start=1)
    for name in names}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = [
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
]
_MAX_DATES = 8


def mentioned_dates(text: str) -> list[tuple[dt.datetime, dt.datetime]]:
    """The days (or whole months, when no day is given) ``text`` names, as half-open UTC
    ranges, in order of appearance; at most eight. Impossible dates are skipped."""
    found: list[tuple[int, dt.datetime, dt.datetime]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue  # "May 2023" inside "May 25, 2023"
            parts = match.groupdict()
            month = parts["month"]
            number = int(month) if month.isdigit() else _MONTHS[month.lower()]
            year = int(parts["year"])
            try:
                if parts.get("day"):
                    first = dt.datetime(year, number, int(parts["day"]), tzinfo=dt.UTC)
                    last = first + dt.timedelta(days=1)
                else:
                    first = dt.datetime(year, number, 1, tzinfo=dt.UTC)
                    last = dt.datetime(year + number // 12, number % 12 + 1, 1, tzinfo=dt.UTC)
            except ValueError:
                continue
            taken.append(match.span())
            found.append((match.start(), first, last))
    return [(first, last) for _, first, last in sorted(found)][:_MAX_DATES]
