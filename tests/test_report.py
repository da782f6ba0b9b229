"""The main job (demo) and the report, end to end on a fresh database."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import htm_analytics as ha
from htm_analytics.agent.datasets import DEMO_ROBOTS
from htm_analytics.cli import cli

SECTIONS = ["advice", "hygiene", "overview", "robots", "trends", "tags", "search", "indexes",
            "hnsw"]


def test_demo_writes_a_complete_self_contained_report(demo: dict) -> None:
    html = demo["html"]
    for key in SECTIONS:
        assert f"<section id='{key}'>" in html, key
    # Offline: no scripts, stylesheets or images fetched from anywhere.
    assert "<script" not in html and "<link" not in html
    assert not re.search(r"src=['\"](?!data:)", html)
    figures = re.findall(r"<figure><img src='data:image/png;base64,[A-Za-z0-9+/=]+' alt='[^']+'>"
                         r"<figcaption>([^<]+)</figcaption>", html)
    assert len(figures) >= 10 and all(len(caption) > 30 for caption in figures)
    assert html.count("<table") >= 8 and html.count("<caption>") >= 7
    assert "exact: the memory_events log agrees with robot_nodes" in html
    assert "smallest ef_search reaching recall 0.95" in html
    assert "demo memory loaded" in demo["log"] and "report written" in demo["log"]
    findings = re.search(r"<h2>Key findings</h2><ul class='findings'>(.*?)</ul>", html)
    assert findings, "no key findings"
    items = re.findall(r"<li>(.*?)</li>", findings.group(1))
    heads = [i.split(":")[0] for i in items]
    assert heads[0] == "Advisor", items
    counted = re.match(r"Advisor: (\d+) findings? \((\d+) critical, (\d+) warnings?, (\d+) "
                       r"info\)\.$", items[0])
    assert counted, items[0]
    total, *severities = map(int, counted.groups())
    assert total == sum(severities) == html.count("<li class='finding'>")
    assert heads.index("Search") < heads.index("Indexes") < heads.index("HNSW"), items
    assert re.match(r"HNSW: ef_search \d+ is the smallest reaching recall 0.95 \(",
                    items[heads.index("HNSW")])
    # A memory within the hygiene sample is searched whole for near-duplicates, as `advise`
    # does: the report searched 1,000 of the demo's memories and found fewer groups.
    hygiene = items[heads.index("Hygiene")]
    assert "near-duplicates on" not in hygiene and "estimated" not in hygiene, hygiene
    # The advisor's findings come first, with the SQL that fixes them.
    advice = html[html.index("<section id='advice'>"):html.index("<section id='overview'>")]
    assert 'DROP INDEX CONCURRENTLY IF EXISTS &quot;public&quot;.&quot;' \
           'idx_robot_nodes_robot_id&quot;;' in advice
    assert "Concurrent searches" in html and "client threads" in html
    # Numbers that appear twice come from one computation.
    ages = set(re.findall(r"(?:reset|created)\)? (\d+ \w+) ago", html))
    assert len(ages) == 1, ages
    assert not re.search(r"\b1 (memories|robots|indexes|tags)\b", html)
    assert "share of tagged" in html and "that carry a tag" in html
    assert "was still in progress when the data was read" in html  # the last week, hatched


def test_the_command_the_demo_suggests_works(demo: dict) -> None:
    suggested = re.search(r'htm-analytics --db "([^"]+)" tags', demo["log"])
    assert suggested, demo["log"]
    result = CliRunner().invoke(cli, ["--db", suggested.group(1), "tags", "--csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("topic1,topic2,shared_nodes")
    assert len(result.stdout.splitlines()) > 10


def test_demo_memory_is_what_the_report_says(demo: dict) -> None:
    with ha.LongTermMemory(demo["url"]) as store:
        counts = store.table_counts().set_index("table")["rows"]
        activity = ha.robot_activity(store, robots=list(DEMO_ROBOTS))
        assert len(activity) == 5 and counts["nodes"] > 2900
        assert f"{counts['nodes']:,} memories" in demo["html"]
        assert "by 5 robots" in demo["html"]
        assert (activity["shared_fraction"] > 0.2).all()  # robots share memories
        trends = ha.remember_trends(store, freq="M")
        assert len(trends) >= 6 and trends["repeated_remembers"].sum() > 0
        assert 384 in store.native_dimensions
        quality = ha.retrieval_quality(store, *ha.report.demo.demo_queries(store, limit=50),
                                       strategies=("vector",))
        assert quality["recall_at_k"].iloc[0] > 0.8  # real MiniLM vectors, real queries
        robots_per_memory = counts["robot_nodes"] / counts["nodes"]
        assert f"5 robots, {robots_per_memory:.2f} robots per memory on average" in demo["html"]
        # The caption counts the tags the plot draws, not the whole graph's.
        view = ha.tag_graph_view(ha.tag_graph(store, level=2, min_shared=3, weight="npmi",
                                              seed=0))
        assert f"the {view.number_of_nodes()} biggest that share" in demo["html"]
        # The index section states the advisor's count, from the same reading: the list of
        # never-used indexes there is the one under What to do.
        never = int(re.search(r"Indexes: (\d+) non-key indexes were never used",
                              demo["html"]).group(1))
        advice = demo["html"][demo["html"].index("<section id='advice'>"):
                              demo["html"].index("<section id='overview'>")]
        assert f"<code>{never} indexes</code>" in advice
        # Indexes first used by queries since the report can only lower the count.
        assert never >= len(ha.advise(store).attrs["unused_indexes"])


def test_report_escapes_memory_text(ltm: ha.LongTermMemory) -> None:
    robot = ltm.register_robot("mallory")
    for _ in range(3):  # the most reinforced memory, so the report shows it
        ltm.add(content="<script>alert('memory')</script> & friends", robot_id=robot)
    other = ltm.add(content="another memory", robot_id=robot)["node_id"]
    ltm.track_access([other])
    report = ha.build_report(ltm, benchmark=False)
    html = report.to_html()
    nodes = ha.table_health(ltm).set_index("table").loc["nodes"]
    assert (f"{nodes['hot_update_fraction']:.0%} of the {nodes['n_tup_upd']:,} updates of nodes "
            "were HOT") in html
    assert [f for f in report.findings if f.startswith("Updates: ")]
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert('memory')&lt;/script&gt; &amp; friends" in html
    assert report._repr_html_() in html and "<html" not in report._repr_html_()


def test_report_cli_never_shows_the_password(demo: dict, tmp_path: Path) -> None:
    params = conninfo_to_dict(demo["url"])
    params["password"] = "s3cret-pw-42"  # ignored by the test server's trust auth
    url = make_conninfo(**params)
    out, data = tmp_path / "r.md", tmp_path / "data"
    result = CliRunner().invoke(cli, ["--db", url, "report", "--format", "md", "--out", str(out),
                                      "--data-dir", str(data), "--no-benchmark"])
    assert result.exit_code == 0, result.output
    markdown = out.read_text()
    assert "s3cret-pw-42" not in markdown + result.output
    assert "password=***" in markdown
    assert "## Tags" in markdown and "![" in markdown
    assert " nan |" not in markdown  # no value is an empty cell, as in the HTML report
    figures = list((tmp_path / "r_files").glob("*.png"))
    assert len(figures) == markdown.count("![")
    tables = {p.name for p in data.iterdir()}
    assert {"overview-table_counts.csv", "robots-overlap.csv", "tags-hierarchy.csv",
            "indexes-index_usage.csv"} <= tables


def test_report_from_a_snapshot(demo: dict, tmp_path: Path) -> None:
    with ha.LongTermMemory(demo["url"]) as store:
        ha.export_snapshot(store, tmp_path / "demo.duckdb")
    result = CliRunner().invoke(cli, ["report", "--snapshot", str(tmp_path / "demo.duckdb"),
                                      "--out", str(tmp_path / "offline.html"),
                                      "--data-dir", str(tmp_path / "parquet"),
                                      "--data-format", "parquet"])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "offline.html").read_text()
    assert "<section id='tags'>" in html and "<section id='indexes'>" not in html
    assert "snapshot of" in html
    assert any(p.suffix == ".parquet" for p in (tmp_path / "parquet").iterdir())


def test_without_the_advisor_the_index_count_is_the_usage_tables(ltm: ha.LongTermMemory) -> None:
    robot = ltm.register_robot("solo")
    ltm.add(content="one memory", robot_id=robot, tags=["topic:a"])
    report = ha.build_report(ltm, benchmark=False, advice=False, hygiene=False)
    assert report.sections[0].key == "overview"
    html = report.to_html()
    assert "1 memory held by 1 robot " in html  # agreement, not "1 memories held by 1 robots"
    usage = report.sections[-1].data["index_usage"]
    never = int(usage["never_used"].sum())
    noun = "non-key index was" if never == 1 else "non-key indexes were"
    assert f"Indexes: {never} {noun} never used since" in html


def test_report_arguments_are_checked_before_any_query(database_url: str) -> None:
    """Every argument of build_report is refused by name before the first statement."""
    statements: list[str] = []
    ltm = ha.LongTermMemory(database_url, tracer=lambda sql, *_: statements.append(sql))
    statements.clear()  # what opening the store read
    for arguments, field in [({"conversations": "x"}, "conversations"),
                             ({"labelled_queries": 5}, "labelled_queries"),
                             ({"labelled_queries": ("a", "b")}, "labelled_queries"),
                             ({"title": None}, "title"), ({"title": "  "}, "title"),
                             ({"sweep_queries": 1.5}, "sweep_queries"),
                             ({"sweep_queries": "x"}, "sweep_queries"),
                             ({"benchmark": "yes"}, "benchmark"), ({"hygiene": 1}, "hygiene"),
                             ({"advice": None}, "advice"), ({"freq": "fortnight"}, "freq"),
                             ({"freq": ["W"]}, "freq")]:
        with pytest.raises(ha.ValidationError) as raised:
            ha.build_report(ltm, **arguments)
        assert raised.value.field == field, arguments
    assert statements == []
    ltm.close()
