"""The ``htm-analytics`` command line: thin wrappers over the store and analysis helpers.

``_app`` holds the group and the everyday commands; each module of a group of commands
(``bench``, ``evaluate``, ``forgetting``, ``history``, ``hygiene``, ``imports``, ``serve``,
``server``, ``status``) registers them on the group when imported here.
"""

from . import bench, evaluate, forgetting, history, hygiene, imports, serve, server, status
from ._app import cli, main

__all__ = ["main", "cli", "bench", "evaluate", "forgetting", "history", "hygiene", "imports",
           "serve", "server", "status"]
