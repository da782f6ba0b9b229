"""Pure-Python work on batches spread over worker processes, results kept in order.

For checks whose time goes to Python code that holds the GIL (the sensitive-data detectors'
regular expressions): threads would not help, processes do. Workers are spawned (not
forked: the store's pool runs threads, and a fork copies their locks), so a script that
asks for them must guard its entry point with ``if __name__ == "__main__":``, as
:mod:`multiprocessing` requires; notebooks and the ``htm-analytics`` command need nothing.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from ..errors import HTMError, ValidationError

__all__ = ["available_cpus", "ordered_map", "validate_workers"]

_T = TypeVar("_T")
_R = TypeVar("_R")
_MAX_WORKERS = 64


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def validate_workers(value: Any) -> int:
    """``value`` if it is an integer from 1 to 64, else :class:`ValidationError` (field
    ``workers``)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_WORKERS:
        raise ValidationError(f"must be an integer from 1 to {_MAX_WORKERS}, got {value!r}",
                              field="workers")
    return value


def ordered_map(function: Callable[[_T], _R], items: Iterable[_T], *,
                workers: int) -> Iterator[_R]:
    """``function(item)`` for each item, in the items' order.

    In this process when ``workers`` is 1; otherwise in that many spawned processes, with at
    most two items per worker in flight, so that items are read (from a database cursor,
    say) only as fast as they are done. ``function`` and the items must pickle. A worker
    that dies (out of memory, killed) raises :class:`~htm_analytics.HTMError`.
    """
    if workers == 1:
        yield from map(function, items)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        pending: deque[Future[_R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(function, item))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        except BrokenProcessPool as exc:
            raise HTMError(f"a worker process stopped before its batch was done ({exc}): out "
                           "of memory, or killed? Run with one worker (workers=1, --workers "
                           "1)") from exc
        except BaseException:  # an error, Ctrl-C or a consumer that stopped early
            pool.shutdown(wait=True, cancel_futures=True)
            raise
