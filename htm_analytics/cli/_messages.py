"""The library's messages in the command line's words: its arguments as the options that
set them."""

from __future__ import annotations

from collections.abc import Sequence

import click

__all__ = ["cli_words", "option_named"]

# Python arguments named in the library's messages, and the options that set them here.
_CLI_WORDS = {"pass overwrite=True": "add --overwrite", "baseline_sample: ": "--baseline: ",
              "history_db: ": "--history-db: ", "history_schema: ": "--history-schema: ",
              "pass embedding_service": "pass --embedder", " or a timedelta": "",
              ", or open it with LongTermMemory(url, init_schema=True)": ""}


# The library's arguments that options of other names set (in the commands that have them).
_SET_BY = {"older_than_days": "expire_after", "half_life_days": "half_life",
           "not_recalled_for": "days"}


def option_named(root: click.Group, argv: Sequence[str], field: str | None) -> str | None:
    """The option of the command ``argv`` runs (or of its groups) whose value is the
    library's argument ``field`` (``min_shared``: ``--min-shared``), if there is one."""
    command: click.Command = root
    params = list(root.params)
    for token in argv:
        if isinstance(command, click.Group) and token in command.commands:
            command = command.commands[token]
            params += command.params
    names = {field, _SET_BY.get(field or "")}
    return next((p.opts[0] for p in params if isinstance(p, click.Option)
                 and p.name in names and p.opts[0].startswith("--")), None)


def cli_words(message: str) -> str:
    """``message`` with the library's argument names replaced by the options'."""
    for python, option in _CLI_WORDS.items():
        message = message.replace(python, option)
    return message
