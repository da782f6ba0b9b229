"""Test configuration. The database fixtures live in the plugin module ``fixtures_db``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

pytest_plugins = ["fixtures_db"]

CORPUS_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "debian-memories"


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def pytest_configure(config: pytest.Config) -> None:
    # The corpus beside the checkout, unless the environment says where it is; otherwise
    # htm_analytics.datasets.find_corpus searches the current directory's parents.
    if CORPUS_DIR.is_dir():
        os.environ.setdefault("HTM_CORPUS_DIR", str(CORPUS_DIR))
