"""Test configuration. The database fixtures live in the plugin module ``fixtures_db``."""

from __future__ import annotations

import inspect
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
    # htm_analytics.agent.datasets.find_corpus searches the current directory's parents.
    if CORPUS_DIR.is_dir():
        os.environ.setdefault("HTM_CORPUS_DIR", str(CORPUS_DIR))


def _corpus_missing() -> str | None:
    from htm_analytics.agent.datasets import find_corpus

    try:
        find_corpus()
    except FileNotFoundError:
        return ("needs the debian-memories corpus (../shared/data/debian-memories beside the "
                "checkout, or HTM_CORPUS_DIR)")
    return None


def _reads_corpus(function: object) -> bool:
    try:
        return "read_corpus(" in inspect.getsource(function)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False


_SKIPPED_FOR_CORPUS = pytest.StashKey[int]()


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _skip_without_corpus(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the corpus, skip (with one reason) every test that reads it, directly or
    through a fixture, instead of failing them one by one; in CI (``CI=true``), where the
    corpus must be present, stop the run instead, so that a green run never hides them."""
    reason = _corpus_missing()
    if reason is None:
        return
    needing = []
    for item in items:
        definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        fixtures = [d.func for defs in definitions.values() for d in defs]
        if any(_reads_corpus(f) for f in [getattr(item, "function", None), *fixtures]):
            needing.append(item)
    if needing and _in_ci():
        raise pytest.UsageError(
            f"CI is set and {len(needing)} of the {len(items)} collected tests read the "
            "debian-memories corpus, which is missing (../shared/data/debian-memories beside "
            "the checkout, or HTM_CORPUS_DIR): they would be skipped and the run would look "
            "green. Provide the corpus, or unset CI to skip them locally.")
    for item in needing:
        item.add_marker(pytest.mark.skip(reason=reason))
    config.stash[_SKIPPED_FOR_CORPUS] = len(needing)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """Without the corpus the run stays in one process, which counts and reports the tests
    it skips (or, in CI, stops before any runs); otherwise pytest-xdist's own choice."""
    return 0 if _corpus_missing() else None


# Tests sharing a costly fixture run on one worker under pytest-xdist (`--dist loadgroup`),
# which then builds it once: the demo memory for the tests that read it, and each module's
# own module-scoped fixtures for the rest of the module.
_SHARED_ACROSS_MODULES = ("demo",)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        shared = [name for name in _SHARED_ACROSS_MODULES
                  if name in getattr(item, "fixturenames", ())]
        group = shared[0] if shared else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
    _skip_without_corpus(config, items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    skipped = config.stash.get(_SKIPPED_FOR_CORPUS, 0)
    if skipped:
        terminalreporter.write_sep(
            "!", f"{skipped} tests were skipped: the debian-memories corpus is missing "
                 "(set HTM_CORPUS_DIR; with CI=true the run fails instead)",
            red=True, bold=True)
