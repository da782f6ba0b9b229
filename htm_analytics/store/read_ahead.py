"""An iterator's next items taken in a thread of their own while the caller works on the
current one."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["read_ahead"]

T = TypeVar("T")
_POLL = 0.05  # seconds between checks that the caller still wants items


@dataclass
class _Done:
    error: BaseException | None


def read_ahead(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yield ``items``, taking up to ``depth`` of them ahead in a thread.

    For a producer and a consumer that both wait outside Python (the server's rows and
    DuckDB's writes of a snapshot): they then overlap. ``items`` runs in that thread only (a
    connection it holds is used there alone) and is closed there when the caller stops
    early; an exception it raises is raised to the caller.
    """
    ahead: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(value: Any) -> bool:
        while not stop.is_set():
            try:
                ahead.put(value, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        error: BaseException | None = None
        stopped = False
        try:
            for item in items:
                if not put(item):
                    stopped = True
                    break
        except BaseException as exc:  # handed to the caller's thread
            error = exc
        try:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        except BaseException as exc:
            error = error or exc
        if not stopped:
            put(_Done(error))

    thread = threading.Thread(target=produce, name="htm_analytics-read-ahead", daemon=True)
    thread.start()
    try:
        while not isinstance(value := ahead.get(), _Done):
            yield value
        if value.error is not None:
            raise value.error
    finally:
        stop.set()
        thread.join()
