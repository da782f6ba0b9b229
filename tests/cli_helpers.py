"""Running the command line as a user does, through its real entry point."""

from __future__ import annotations

import sys

import pytest

import htm_analytics.cli as cli_package


def run_main(args: list[str], monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``htm-analytics ARGS`` through ``main()``: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["htm-analytics", *args])
    with pytest.raises(SystemExit) as info:
        cli_package.main()
        raise SystemExit(0)
    captured = capsys.readouterr()
    return int(info.value.code or 0), captured.out, captured.err
