"""Progress bars for long loops: tqdm's, imported only when a bar is shown."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import ValidationError

__all__ = ["Progress", "progress_bar", "validate_progress"]


class Progress:
    """A tqdm bar, or nothing when none is shown (then every method does nothing)."""

    def __init__(self, bar: Any = None) -> None:
        self._bar = bar

    @property
    def shown(self) -> bool:
        """Whether a bar is shown."""
        return self._bar is not None

    def update(self, done: float = 1) -> None:
        """Count ``done`` more units of work."""
        if self._bar is not None:
            self._bar.update(done)

    def note(self, text: str) -> None:
        """Say beside the bar what is being done (the current step or item)."""
        if self._bar is not None:
            self._bar.set_postfix_str(text)


def validate_progress(value: Any) -> bool:
    """``value`` if it is True or False, else :class:`ValidationError` (field ``progress``)."""
    if not isinstance(value, bool):
        raise ValidationError(f"must be True or False, got {value!r}", field="progress")
    return value


@contextmanager
def progress_bar(enabled: bool, total: float | None, description: str, unit: str, *,
                 scaled: bool = False) -> Iterator[Progress]:
    """A :class:`Progress` over ``total`` units (None: unknown), closed on leaving.

    ``scaled`` counts in k, M, G (for totals such as pairs of vectors). The bar goes to
    standard error, or to a widget in a notebook, and is removed when done."""
    bar = None
    if enabled:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=description, unit=unit, unit_scale=scaled, leave=False)
    try:
        yield Progress(bar)
    finally:
        if bar is not None:
            bar.close()
