"""Test configuration. The database fixtures live in the plugin module ``fixtures_db``."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pytest
from hypothesis import settings

matplotlib.use("Agg")
# Properties, not speed: no per-example deadline (hypothesis' 200 ms by default), which an
# example of real size can pass on a loaded machine. Speed is measured in benchmarks/.
settings.register_profile("htm_analytics", deadline=None)
settings.load_profile("htm_analytics")

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


# Under pytest-xdist, each module's tests run on one worker (its module-scoped fixtures are
# built once), and so do the modules reading the demo memory (built once, by one worker).
# pytest 9 ignores the node-id suffix behind xdist's own `loadgroup`, so the scheduler below
# groups by module path itself. Work goes out in collection order, longest first, so that
# the workers finish together.
_DEMO_MODULES = ("test_report.py", "test_report_browser.py", "test_first_hour.py",
                 "test_notebooks.py", "test_htm.py", "test_widgets.py")
_LONGEST_FIRST = ("test_setup.py", "test_code_quality.py", "test_bulk_and_corpus.py",
                  "test_conversations.py", "test_embedded_server.py", "test_peers_ghostkg.py")


def _unit_of(nodeid: str) -> str:
    """The work unit of a test: its module, or "demo" for the modules reading the demo."""
    module = nodeid.split("::", 1)[0]
    return "demo" if Path(module).name in _DEMO_MODULES else module


def _rank(item: pytest.Item) -> int:
    name = Path(item.nodeid.split("::", 1)[0]).name
    if name in _DEMO_MODULES:
        return 0
    return 1 + _LONGEST_FIRST.index(name) if name in _LONGEST_FIRST else len(_LONGEST_FIRST) + 1


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        """Whole work units (:func:`_unit_of`), handed out in collection order."""

        def _split_scope(self, nodeid: str) -> str:
            return _unit_of(nodeid)

    config.option.loadscopereorder = False
    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = sorted({item.nodeid.split("::", 1)[0] for item in items
                        if "demo" in getattr(item, "fixturenames", ())
                        and _unit_of(item.nodeid) != "demo"})
    if misplaced:
        raise pytest.UsageError(f"add {', '.join(misplaced)} to _DEMO_MODULES in "
                                "tests/conftest.py: its tests read the demo memory")
    items.sort(key=_rank)  # stable: a module's tests keep their order
    _skip_without_corpus(config, items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    skipped = config.stash.get(_SKIPPED_FOR_CORPUS, 0)
    if skipped:
        terminalreporter.write_sep(
            "!", f"{skipped} tests were skipped: the debian-memories corpus is missing "
                 "(set HTM_CORPUS_DIR; with CI=true the run fails instead)",
            red=True, bold=True)
