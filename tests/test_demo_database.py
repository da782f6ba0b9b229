"""The demo's database is built aside and swapped in whole: an interrupted or failed build
leaves the old one as it was, and nothing of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

import htm_analytics.report.demo as demo_module
from htm_analytics import HTMError, LongTermMemory, ValidationError
from htm_analytics.store import (
    claimed_database,
    create_database,
    database_exists,
    drop_database,
    with_database,
)


def _databases(server_url: str, prefix: str) -> list[str]:
    with psycopg.connect(server_url, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT datname FROM pg_database WHERE left(datname, length(%s)) = %s",
            (prefix, prefix))]


def _small_load(store: LongTermMemory, **_: object) -> None:
    robot = store.register_robot("new-demo")
    store.add(content="the new demo memory", robot_id=robot)


@pytest.fixture
def demo_name(server_url: str) -> Iterator[str]:
    name = f"htm_demo_swap_{uuid.uuid4().hex[:8]}"
    yield name
    for leftover in _databases(server_url, name):
        drop_database(server_url, leftover)


def _old_demo(server_url: str, name: str) -> None:
    """A demo database as an earlier run left it (a small one)."""
    demo_module.demo_database_url(server_url, database=name)
    with LongTermMemory(with_database(server_url, name)) as store:
        assert store.node_ids_by_content(["the new demo memory"])[0]


def _contents(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT content FROM nodes ORDER BY id")]


def test_an_interrupted_demo_leaves_the_old_database_whole(
        server_url: str, demo_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_module, "load_demo", _small_load)
    _old_demo(server_url, demo_name)
    url = with_database(server_url, demo_name)
    before = _contents(url)

    def interrupted(store: LongTermMemory, **_: object) -> None:
        robot = store.register_robot("half-done")
        store.add(content="half of a new demo", robot_id=robot)
        raise KeyboardInterrupt  # Ctrl-C in the middle of the load

    monkeypatch.setattr(demo_module, "load_demo", interrupted)
    with pytest.raises(KeyboardInterrupt):
        demo_module.demo_database_url(server_url, fresh=True, database=demo_name)
    assert _contents(url) == before
    assert _databases(server_url, demo_name) == [demo_name]  # no build left behind


def test_a_fresh_demo_replaces_the_old_one_while_it_is_in_use(
        server_url: str, demo_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_module, "load_demo", _small_load)
    _old_demo(server_url, demo_name)
    url = with_database(server_url, demo_name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE nodes SET content = 'an old demo memory'")
        # A notebook still connected to the old demo does not stop the swap.
        assert demo_module.demo_database_url(server_url, fresh=True,
                                             database=demo_name) == url
    assert _contents(url) == ["the new demo memory"]
    assert _databases(server_url, demo_name) == [demo_name]


def test_a_failed_demo_leaves_nothing_behind(server_url: str, demo_name: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(store: LongTermMemory, **_: object) -> None:
        raise HTMError("the load failed")

    monkeypatch.setattr(demo_module, "load_demo", failing)
    with pytest.raises(HTMError, match="the load failed"):
        demo_module.demo_database_url(server_url, database=demo_name)
    assert not database_exists(server_url, demo_name)
    assert _databases(server_url, demo_name) == []


def test_builds_of_killed_runs_are_dropped(server_url: str, demo_name: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_module, "load_demo", _small_load)
    abandoned = demo_module._build_prefix(demo_name) + "deadbeef"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(
            psycopg.sql.Identifier(abandoned)))
    demo_module.demo_database_url(server_url, database=demo_name)
    assert _databases(server_url, demo_name) == [demo_name]


def test_a_build_under_way_is_left_alone(server_url: str, demo_name: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Two demo runs at once: the second dropped the first one's build as a killed run's
    whenever no session was connected to it (between its load and its swap)."""
    monkeypatch.setattr(demo_module, "load_demo", _small_load)
    running = demo_module._build_prefix(demo_name) + "cafecafe"
    with claimed_database(server_url, running):
        create_database(server_url, running)
        demo_module.demo_database_url(server_url, database=demo_name)
        assert sorted(_databases(server_url, demo_name)) == [demo_name, running]
    # that run gone (its claim with it), the next build drops what it left
    demo_module.demo_database_url(server_url, database=demo_name, fresh=True)
    assert _databases(server_url, demo_name) == [demo_name]


def test_ctrl_c_ends_the_command_with_130_and_says_so(
        server_url: str, demo_name: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    import sys

    from htm_analytics.cli import main

    def interrupted(store: LongTermMemory, **_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(demo_module, "load_demo", interrupted)
    monkeypatch.setattr(demo_module, "DEMO_DATABASE", demo_name)
    real_run_demo = demo_module.run_demo
    monkeypatch.setattr(demo_module, "run_demo", lambda out, **kw: real_run_demo(
        out, **{**kw, "database": demo_name}))
    monkeypatch.setattr(sys, "argv", ["htm-analytics", "--db", server_url, "demo", "--out",
                                      str(tmp_path / "r.html")])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 130
    captured = capsys.readouterr()
    assert f"interrupted while loading: {demo_name} is as it was" in captured.out
    assert captured.err.strip().endswith("interrupted")
    assert _databases(server_url, demo_name) == []


def test_a_demo_refuses_where_it_cannot_write_before_building(
        server_url: str, demo_name: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's path and the query count are checked before the database is touched:
    the demo's minutes of loading are not spent to end in "is a folder"."""
    def loaded(store: LongTermMemory, **_: object) -> None:
        raise AssertionError("the database was built first")

    monkeypatch.setattr(demo_module, "load_demo", loaded)
    for out, queries, field in [(tmp_path, 100, "out"), (tmp_path / "r.html", 0, "queries"),
                                (tmp_path / "r.html", True, "queries")]:
        with pytest.raises(ValidationError) as raised:
            demo_module.run_demo(out, server_url=server_url, database=demo_name,
                                 queries=queries, echo=lambda _: None)
        assert raised.value.field == field
    assert _databases(server_url, demo_name) == []


def test_a_second_demo_run_waits_for_the_first(server_url: str, demo_name: str, tmp_path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs at once: the second's swap ended the first's report sessions ("terminating
    connection due to administrator command"). The second now waits, and says so."""
    import threading
    import time

    loaded = threading.Event()

    def load(store: LongTermMemory, **_: object) -> None:
        loaded.set()
        raise RuntimeError("loaded")

    monkeypatch.setattr(demo_module, "load_demo", load)
    said: list[str] = []
    ended: list[BaseException] = []

    def second_run() -> None:
        try:
            demo_module.run_demo(tmp_path / "r.html", server_url=server_url,
                                 database=demo_name, echo=said.append)
        except BaseException as exc:
            ended.append(exc)

    with claimed_database(server_url, demo_name):  # the first run, still reporting
        thread = threading.Thread(target=second_run)
        thread.start()
        deadline = time.monotonic() + 30
        while not said and time.monotonic() < deadline:
            time.sleep(0.05)
        assert said == [f"another demo run is using {demo_name}: waiting for it to finish"]
        time.sleep(0.5)
        assert not loaded.is_set()
    thread.join(60)
    assert loaded.is_set() and [str(e) for e in ended] == ["loaded"]
    assert _databases(server_url, demo_name) == []
