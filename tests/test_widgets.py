"""The notebook explorers, driven headlessly: set control values, read the rendered results."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import htm_analytics as ha
from htm_analytics.report.demo import DemoQueryEmbedder
from htm_analytics.report.widgets import ef_search_explorer, search_explorer, tag_browser


@pytest.fixture(scope="module")
def store(demo: dict) -> Iterator[ha.LongTermMemory]:
    with ha.LongTermMemory(demo["url"], pool_size=2) as live:
        yield live


def test_search_explorer_runs_every_strategy(store: ha.LongTermMemory) -> None:
    embedder = DemoQueryEmbedder()
    title = embedder.examples[0]
    explorer = search_explorer(store, embedder=embedder)
    assert "type a query" in explorer.results.value
    explorer.controls["query"].value = title
    assert list(explorer.controls["strategy"].options) == list(ha.store.SEARCH_STRATEGIES)
    for strategy in ha.store.SEARCH_STRATEGIES:
        explorer.controls["strategy"].value = strategy
        assert f"({strategy})" in explorer.results.value, explorer.results.value
    explorer.controls["strategy"].value = "vector"
    explorer.controls["limit"].value = 3
    assert explorer.results.value.count("<tr>") == 3  # body rows (the header row has a style)
    # The answer to the title is its package description: it comes first.
    answer = store.search(embedding=embedder.embed(title), limit=1)[0]
    assert f"<td>{answer['id']}</td>" in explorer.results.value


def test_search_explorer_filters_by_robot_and_reports_errors(store: ha.LongTermMemory) -> None:
    explorer = search_explorer(store, embedder=DemoQueryEmbedder())
    explorer.controls["query"].value = "library"
    explorer.controls["robot"].value = "coder"
    rows = explorer.results.value.split("<tbody>")[1].split("<tr>")[1:]
    assert rows and all("coder" in row for row in rows)
    explorer.controls["strategy"].value = "vector"  # text the demo embedder does not know
    assert "only knows the bundled demo queries" in explorer.results.value
    without = search_explorer(store)
    assert list(without.controls["strategy"].options) == ["fulltext", "fulltext_any", "fuzzy"]


def test_tag_browser_shows_children_and_partners(store: ha.LongTermMemory) -> None:
    browser = tag_browser(store)
    hierarchy = ha.tag_hierarchy(store)
    roots = hierarchy[hierarchy["depth"] == 1]
    assert browser.results.value.count("<tr>") == len(roots)
    browser.controls["prefix"].value = "devel"
    children = hierarchy[hierarchy["parent"] == "devel"]
    assert "children of devel" in browser.results.value
    assert all(f"<td>{tag}</td>" in browser.results.value for tag in children["tag"])
    assert "more often than chance" in browser.results.value
    browser.controls["prefix"].value = "no-such-tag"
    assert "no tag no-such-tag" in browser.results.value


def test_ef_search_explorer_measures_each_setting(store: ha.LongTermMemory) -> None:
    explorer = ef_search_explorer(store, queries=40, ef_search=5)
    low = explorer.results.value
    explorer.controls["ef_search"].value = 200
    high = explorer.results.value
    assert "<td>5</td>" in low and "<td>200</td>" in high
    assert "40 held-out queries" in high


def test_results_show_themselves_escaped(ltm: ha.LongTermMemory) -> None:
    robot = ltm.register_robot("r")
    ltm.add(content="<b>bold</b> claims about PostgreSQL", robot_id=robot)
    results = ltm.search_fulltext(query="postgresql")
    assert isinstance(results, list) and len(results) == 1
    shown = results._repr_html_()
    assert "&lt;b&gt;bold&lt;/b&gt;" in shown and "<b>bold" not in shown
    assert results.to_frame()["content"].iloc[0].startswith("<b>bold</b>")
    stats = ltm.stats()
    assert "<th>total_nodes</th><td>1</td>" in stats._repr_html_()
