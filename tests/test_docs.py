"""Shared parameter documentation: written once, filled everywhere, never left as a
placeholder."""

from __future__ import annotations

import inspect

import pytest

import htm_analytics as ha
from htm_analytics._docs import PARAMETER_DOCS, DocstringComponents


def _documented() -> list[tuple[str, str]]:
    found = []
    for name in ha.__all__:
        item = getattr(ha, name)
        if inspect.isfunction(item):
            found.append((name, item.__doc__ or ""))
        elif inspect.isclass(item):
            found += [(f"{name}.{attr}", member.__doc__ or "")
                      for attr, member in vars(item).items() if inspect.isfunction(member)]
            for base in item.__mro__[1:]:
                if base.__module__.startswith("htm_analytics"):
                    found += [(f"{base.__name__}.{attr}", member.__doc__ or "")
                              for attr, member in vars(base).items()
                              if inspect.isfunction(member)]
    return found


def test_no_placeholder_is_left_unfilled() -> None:
    documented = _documented()
    assert len(documented) > 100
    assert [name for name, doc in documented if "%(" in doc] == []


def test_shared_entries_are_used_and_indented() -> None:
    doc = ha.tag_cooccurrence.__doc__ or ""
    for name in ("source", "timeframe", "robots", "prefix", "level"):
        first = PARAMETER_DOCS[name].splitlines()[0]
        assert f"\n    {first}\n" in doc, name
    assert PARAMETER_DOCS["search_vectors"].splitlines()[2] in (ha.LongTermMemory.search.__doc__
                                                                or "")


def test_unknown_placeholder_fails_when_defined() -> None:
    with pytest.raises(KeyError, match="no_such_entry"):
        DocstringComponents({"a": "a : int"}).fill("    %(no_such_entry)s\n")
