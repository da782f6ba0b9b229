"""What ``bench_scale.py`` reads besides wall time: the CPU seconds of this process and of
the server it runs, and the seconds of each statement ``bulk_add`` sends."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg


def _proc_stat(pid: int | str) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()  # from the state field on


def cpu_clock(url: str) -> Callable[[], float] | None:
    """A clock of the CPU seconds this process and the server have used, or None for a
    server elsewhere. The server's are its postmaster's, every process it runs (backends,
    parallel workers, checkpointer, WAL writer, I/O workers) and the ones it has reaped. On
    a machine others share, wall times vary with their load; CPU seconds much less."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        try:
            postmaster = int(_proc_stat(row[0])[1])
        except OSError:
            return None
    tick = os.sysconf("SC_CLK_TCK")

    def seconds() -> float:
        own = _proc_stat(postmaster)
        ticks = sum(int(x) for x in own[11:15])  # utime, stime, cutime, cstime
        for entry in Path("/proc").iterdir():
            try:
                stat = _proc_stat(entry.name) if entry.name.isdigit() else None
            except OSError:  # gone meanwhile: counted in the postmaster's cutime
                continue
            if stat is not None and int(stat[1]) == postmaster:
                ticks += int(stat[11]) + int(stat[12])
        return ticks / tick + time.process_time()

    return seconds


class StatementTimes:
    """A ``tracer=`` summing the seconds of each statement while ``on`` (for ``bulk_add``)."""

    def __init__(self) -> None:
        self.on = False
        self.times: dict[str, list[float]] = {}  # statement -> [calls, seconds]

    def __call__(self, text: str, params: Any, seconds: float) -> None:
        if self.on:
            entry = self.times.setdefault(" ".join(text.split())[:100], [0, 0.0])
            entry[0] += 1
            entry[1] += seconds

    def report(self, top: int = 15) -> None:
        ranked = sorted(self.times.items(), key=lambda item: -item[1][1])
        for text, (calls, seconds) in ranked[:top]:
            print(f"    {seconds:8.2f} s {int(calls):6d}x  {text}")
