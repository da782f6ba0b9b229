"""The read-only MCP server, run in process with the official SDK's client."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

import htm_analytics as ha
from htm_analytics import DatabaseError, LongTermMemory, ValidationError
from htm_analytics.agent.embeddings import HashingEmbedder
from htm_analytics.mcp import REPORT_URI, build_server
from tests.test_existing_databases import as_role, footprint, roles  # noqa: F401
from tests.test_gem_as_written import WRITER_ZONE, gem_written

EMBEDDER = HashingEmbedder(64)
LONG = "PostgreSQL " + "and its vacuum " * 200
TOOLS = {"status", "search", "robots", "tags", "tag_pairs", "trends", "indexes", "advice",
         "ef_search", "hygiene"}
SECRET = "AKIAIOSFODNN7EXAMPLE"  # an AWS key id as the documentation shows it


def populate(url: str) -> None:
    with LongTermMemory(url) as store:
        robots = [store.register_robot(name) for name in ("planner", "coder")]
        texts = [f"memory {i} about {topic}" for i, topic in enumerate(
            ["postgresql indexes", "redis caching", "kafka events", "vacuum tuning"] * 8)]
        for i, text in enumerate([*texts, LONG, f"deploy with aws key {SECRET}"]):
            store.add(content=text, robot_id=robots[i % 2], embedding=EMBEDDER.embed(text),
                      embedding_model=(EMBEDDER.name, EMBEDDER.model),
                      tags=["database:postgresql" if "postgres" in text.lower() else "ops",
                            "topic:memory"])


async def call(client: Client, name: str, **arguments: Any) -> Any:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, (name, result.content)
    return result.structured_content


async def refused(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, name
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert "Traceback" not in text
    return text


def test_a_session_of_tool_calls_writes_nothing(database_url: str) -> None:
    populate(database_url)
    before = footprint(database_url)
    with LongTermMemory(database_url, read_only=True, cache_size=0) as store:
        server = build_server(store, embedder=EMBEDDER, max_rows=5, max_chars=80,
                              sweep_queries=10)

        async def session() -> None:
            async with Client(server) as client:
                listed = (await client.list_tools()).tools
                assert {t.name for t in listed} == TOOLS
                assert all(t.annotations and t.annotations.read_only_hint
                           and t.annotations.destructive_hint is False for t in listed)
                status = await call(client, "status")
                assert status["counts"]["nodes"] == 34 and "seed" in status["found"]
                for strategy in ("vector_bm25", "fulltext_any", "vector", "rrf", "fuzzy"):
                    found = await call(client, "search", query="postgresql vacuum",
                                       strategy=strategy, limit=3)
                    assert 0 < len(found["results"]) <= 3, strategy
                default = await call(client, "search", query="vacuum", limit=50)
                assert default["strategy"] == "vector_bm25"
                texts = [r["content"] for r in default["results"]]
                assert max(len(t) for t in texts) <= 81 and any(t.endswith("…") for t in texts)
                robots = await call(client, "robots")
                assert robots["total_rows"] == 2 and not robots["truncated"]
                tags = await call(client, "tags")
                assert tags["truncated"] is False and tags["total_rows"] >= 3
                pairs = await call(client, "tag_pairs", min_shared=1)
                assert pairs["rows"]
                trends = await call(client, "trends", freq="D", by="robot")
                assert trends["exact"] is True and trends["rows"]
                indexes = await call(client, "indexes")
                assert indexes["indexes"]["truncated"] and len(indexes["indexes"]["rows"]) == 5
                assert (await call(client, "advice"))["total_rows"] >= 0
                content = await call(client, "hygiene")
                assert content["memories"] == 34 and SECRET not in str(content)
                assert content["sensitive"]["rows"][0]["kind"] == "credential"
                assert {r["check"] for r in content["summary"]["rows"]} == {
                    "near_duplicates", "sensitive", "supersession"}
                assert content["checked"] == "Checked every one of the 34 memories."
                sampled = await call(client, "hygiene", sample=10)
                assert sampled["checked"].startswith("Checked 10 of 34 memories, chosen by")
                assert sampled["summary"]["rows"][0]["share_low"] is not None
                assert "sample" in await refused(client, "hygiene", sample=-1)
                tuned = await call(client, "ef_search", target_recall=0.5)
                assert tuned["sweep"]["rows"] and tuned["evidence"]
                report = await client.read_resource(REPORT_URI)
                assert report.contents[0].text.startswith("# Memory report")

                assert "limit" in await refused(client, "search", query="x", limit=0)
                assert "strategy" in await refused(client, "search", query="x",
                                                   strategy="psychic")
                assert "query" in await refused(client, "search", query="   ")
                assert "freq" in await refused(client, "trends", freq="fortnight")
                assert "target_recall" in await refused(client, "ef_search",
                                                        target_recall=7.0)
                # An argument a tool does not take is refused, not dropped (unfiltered).
                assert "no argument 'robot'" in await refused(client, "search", query="x",
                                                              robot="nobody")
                assert "no argument 'bogus'" in await refused(client, "status", bogus=1)
                # The SDK would read the first, second and last as 1, 5 and 0.9.
                assert "limit: must be an integer" in await refused(client, "search",
                                                                    query="x", limit=True)
                assert "limit: must be an integer" in await refused(client, "tags",
                                                                    limit="5")
                assert "sample: must be an integer" in await refused(client, "hygiene",
                                                                     sample=2.5)
                assert "target_recall: must be a number" in await refused(
                    client, "ef_search", target_recall="0.9")
                # Strings, choices and required arguments: the toolkit's one line, not
                # the SDK's report of several.
                for tool, arguments, said in [
                        ("search", {"query": 5}, "query: must be a string, got 5"),
                        ("search", {}, "query: is required"),
                        ("search", {"query": "x", "strategy": "nope"},
                         "strategy: must be one of vector, fulltext"),
                        ("search", {"query": "x", "strategy": 1}, "strategy: must be one of"),
                        ("trends", {"freq": None}, "freq: must be a string, got None"),
                        ("tags", {"prefix": 3}, "prefix: must be a string, got 3"),
                        ("search", {"query": "x", "timeframe": ["last week"]},
                         "timeframe: must be a string")]:
                    message = await refused(client, tool, **arguments)
                    assert message.startswith(f"ValidationError: {said}"), message
                    assert "\n" not in message and "pydantic" not in message, message
                assert (await call(client, "tags", prefix=None))["rows"]
                found = await call(client, "search", query="postgres",
                                   timeframe="2000-01-01..2100-12-31")  # as the docs say
                assert found["results"]

        anyio.run(session)
        # Read-only by construction, whatever a tool would call.
        with pytest.raises(DatabaseError, match="read-only"):
            store.forget(1, permanent=True, confirm="confirmed")
    assert footprint(database_url) == before


def test_without_an_embedder_only_lexical_strategies_run(database_url: str) -> None:
    populate(database_url)
    with LongTermMemory(database_url, read_only=True, cache_size=0) as store:
        server = build_server(store)

        async def session() -> None:
            async with Client(server) as client:
                found = await call(client, "search", query="kafka events")
                assert found["strategy"] == "fulltext_any" and found["results"]
                assert "--embedder" in await refused(client, "search", query="kafka",
                                                     strategy="vector")

        anyio.run(session)


def test_a_tag_graph_without_positive_ties_has_one_community_per_tag(
        database_url: str) -> None:
    populate(database_url)  # topic:memory is on every memory: its PMI with any tag is 0
    with LongTermMemory(database_url, read_only=True) as store:
        graph = ha.tag_graph(store, weight="pmi", min_shared=1)
    # database, database:postgresql, ops, topic, topic:memory; every pair has PMI 0
    assert graph.number_of_edges() > 0
    assert graph.graph["communities"] == graph.number_of_nodes() == 5


def test_the_server_refuses_a_store_that_may_write(ltm: LongTermMemory) -> None:
    with pytest.raises(ValidationError) as error:
        build_server(ltm)
    assert error.value.field == "store"


def test_status_on_the_current_gem_counts_forgotten_apart(
        server_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    with gem_written(server_url, roles) as url:
        before = footprint(url)
        with LongTermMemory(as_role(url, roles["reader"]), read_only=True,
                            writer_timezone=WRITER_ZONE) as store:

            async def session() -> None:
                async with Client(build_server(store)) as client:
                    status = await call(client, "status")
                    assert status["schema"]["era"] == "current gem"
                    assert status["counts"]["nodes"] == 3
                    assert status["counts"]["nodes (soft-deleted)"] == 1
                    found = await call(client, "search", query="database")
                    assert {r["content"] for r in found["results"]} == {
                        "PostgreSQL is our primary database"}

            anyio.run(session)
        assert footprint(url) == before


def test_the_command_serves_over_stdio(database_url: str) -> None:
    populate(database_url)
    before = footprint(database_url)
    command = StdioServerParameters(
        command=sys.executable, args=["-m", "htm_analytics", "--db", database_url, "mcp",
                                      "--max-rows", "1"],
        env={k: v for k, v in os.environ.items() if k.startswith(("HTM_", "TMP", "PG"))})

    async def session() -> None:
        async with Client(command) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            robots = await call(client, "robots")
            assert robots["total_rows"] == 2 and robots["truncated"] is True
            found = await call(client, "search", query="kafka events", limit=2)
            assert found["strategy"] == "fulltext_any" and len(found["results"]) == 2

    anyio.run(session)
    assert footprint(database_url) == before


def test_ef_search_on_a_memory_too_small_to_sweep(database_url: str) -> None:
    """A memory of one vector cannot be swept (a held-out query has no neighbour): the
    answer says so instead of an error about arguments the tool does not take."""
    with LongTermMemory(database_url) as writer:
        writer.bulk_add(["one memory"], robots="r", embeddings=[[1.0, 0.0]])
    with LongTermMemory(database_url, read_only=True, cache_size=0) as store:
        with pytest.raises(ValidationError) as raised:
            build_server(store, sweep_queries="50")  # type: ignore[arg-type]
        assert raised.value.field == "sweep_queries"
        server = build_server(store)

        async def session() -> None:
            async with Client(server) as client:
                answer = await call(client, "ef_search")
                assert answer["ef_search"] is None
                assert answer["evidence"].startswith("not measured: 1 stored vector of")
                assert "target_recall" in await refused(client, "ef_search",
                                                        target_recall=7.0)

        anyio.run(session)
