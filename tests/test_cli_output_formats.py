"""The shared output options (--table, --csv, --json): one format per command line; two are
a usage error naming both, on every command that takes them, before any work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import permutations

import click
import pytest
from click.testing import CliRunner
from test_history_formats import _blank_sample

from htm_analytics.cli import cli
from htm_analytics.store.history import append_sample

_FORMATS = ("--table", "--csv", "--json")
_NOBODY = "postgresql://nobody@127.0.0.1:9/none"  # any work would fail to connect: exit 1


def _commands(command: click.Command, path: list[str]) -> Iterator[tuple[list[str],
                                                                         click.Command]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, [*path, name])


def _with_formats() -> list[list[str]]:
    """Every command taking all three output options."""
    found = []
    for path, command in _commands(cli, []):
        options = {opt for param in command.params if isinstance(param, click.Option)
                   for opt in param.opts}
        if path and set(_FORMATS) <= options:
            found.append(path)
    return found


def test_every_command_refuses_two_output_formats() -> None:
    """Given two of --table, --csv and --json, in either order, each command stops with a
    usage error (exit 2) naming both, before opening a database or reading an argument it
    lacks; one format given twice is still one."""
    commands = _with_formats()
    assert len(commands) >= 20 and ["history"] in commands and ["status"] in commands
    runner = CliRunner()
    for path in commands:
        for first, second in permutations(_FORMATS, 2):
            result = runner.invoke(cli, ["--db", _NOBODY, *path, first, second])
            assert result.exit_code == 2, (path, first, second, result.output)
            assert f"Error: {first} and {second} are two output formats" in result.output, \
                (path, result.output)
    # The same format twice is no conflict: the command runs on (and fails to connect).
    again = runner.invoke(cli, ["--db", _NOBODY, "status", "--csv", "--csv"])
    assert again.exit_code == 1 and "could not talk to" in str(again.exception), again.output


def test_one_format_prints_as_asked(database_url: str, tmp_path) -> None:
    """status and history print the one format given (a table when none is), and refuse two
    where the last used to win."""
    path = tmp_path / "history.duckdb"
    append_sample(path, _blank_sample())
    runner = CliRunner()
    for args in (["--db", database_url, "status"], ["history", "--history", str(path)]):
        as_json = runner.invoke(cli, [*args, "--json"])
        assert as_json.exit_code == 0, as_json.output
        json.loads(as_json.stdout)
        as_csv = runner.invoke(cli, [*args, "--csv"])
        assert as_csv.exit_code == 0 and "," in as_csv.stdout.splitlines()[0]
        with pytest.raises(json.JSONDecodeError):
            json.loads(as_csv.stdout)
        table = runner.invoke(cli, args)
        assert table.exit_code == 0 and table.stdout == runner.invoke(
            cli, [*args, "--table"]).stdout
        both = runner.invoke(cli, [*args, "--csv", "--json"])
        assert both.exit_code == 2 and not both.stdout.startswith(("[", "{")), both.output
        assert "--csv and --json are two output formats" in both.output
