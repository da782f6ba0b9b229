"""Forget, restore and purge as each HTM era does: soft by default where the schema has
``deleted_at`` (the current gem), permanent on the seed era; the event log records them."""

from __future__ import annotations

import datetime as dt
import re

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import htm_analytics as ha
from htm_analytics import LongTermMemory, NoSoftDeleteError, NotFoundError, ValidationError
from htm_analytics.cli import cli
from tests.test_existing_databases import as_role, roles  # noqa: F401 (fixture)
from tests.test_gem_as_written import CONTENTS, WRITER_ZONE, gem_written, vector

CONFIRM = {"confirm": "confirmed"}


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE deleted_at IS NOT NULL), "
            "(SELECT count(*) FILTER (WHERE deleted_at IS NOT NULL) FROM robot_nodes), "
            "(SELECT count(*) FILTER (WHERE deleted_at IS NOT NULL) FROM node_tags) "
            "FROM nodes").fetchone()
    return dict(zip(["nodes", "forgotten", "forgotten_links", "forgotten_tags"], row))


def events(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT kind, count(*) FROM memory_events "
                                 "WHERE kind <> 'remember' GROUP BY 1").fetchall())


def test_the_current_gem_forgets_softly_restores_and_purges(
        server_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    with gem_written(server_url, roles) as url:  # one memory already forgotten by the gem
        LongTermMemory(url, init_schema=True).close()
        writer = as_role(url, roles["writer"])
        with LongTermMemory(writer, writer_timezone=WRITER_ZONE, cache_size=0) as store:
            postgres = store.node_ids_by_content([CONTENTS[0]])[0]
            assert store.forget(postgres) is True
            assert counts(url) == {"nodes": 4, "forgotten": 2, "forgotten_links": 2,
                                   "forgotten_tags": 2}
            assert store.forget(postgres) is False  # already forgotten: nothing changes
            assert store.stats()["soft_deleted_nodes"] == 2
            hits = store.search_by_strategy("vector_bm25", query="primary database",
                                            embedding=vector(0))
            assert CONTENTS[0] not in {h["content"] for h in hits}
            for fusion in ("weighted", "rrf"):  # neither its words nor its tags find it
                hits = store.search_hybrid(query="primary database", embedding=vector(0),
                                           fusion=fusion, match="any")
                assert CONTENTS[0] not in {h["content"] for h in hits}
                assert hits or fusion == "weighted"  # whose candidates are matches only

            assert store.restore(postgres) is True
            assert store.restore(postgres) is False
            assert counts(url)["forgotten"] == 1 and counts(url)["forgotten_links"] == 1
            assert store.search_fulltext(query="primary database")[0]["id"] == postgres
            assert len(ha.robot_overlap(store)) == 4

            # Remembering forgotten content again restores it: one node, not two.
            robot = store.register_robot("gem-a")
            again = store.add(content=CONTENTS[3], robot_id=robot)
            assert again["is_new"] is False and store.exists(again["node_id"])
            assert counts(url)["nodes"] == 4

            with pytest.raises(ValidationError) as refused:
                store.forget(postgres, permanent=True)
            assert refused.value.field == "confirm" and store.exists(postgres)
            with pytest.raises(NotFoundError):
                store.forget(10**9)
            with pytest.raises(NotFoundError):
                store.restore(10**9)

            kafka = store.node_ids_by_content([CONTENTS[2]])[0]
            store.forget(kafka)
            with pytest.raises(ValidationError):
                store.purge_deleted(older_than=dt.timedelta(0))
            assert store.purge_deleted(older_than=dt.timedelta(hours=1), **CONFIRM) == 0
            assert store.purge_deleted(older_than=dt.timedelta(0), **CONFIRM) == 1
            assert store.forget(postgres, permanent=True, **CONFIRM) is True
            assert counts(url) == {"nodes": 2, "forgotten": 0, "forgotten_links": 0,
                                   "forgotten_tags": 0}
        # forget x3 (the gem's before init-db is not logged), restore x2 (one by add),
        # purge of Kafka, permanent delete of PostgreSQL
        assert events(url) == {"delete": 3, "restore": 2, "purge": 1}


def test_a_bare_gem_database_forgets_without_the_additions(
        server_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    with gem_written(server_url, roles) as url, \
            LongTermMemory(as_role(url, roles["writer"]), cache_size=0) as store:
        node = store.node_ids_by_content([CONTENTS[1]])[0]
        assert store.forget(node) and store.restore(node)
        assert counts(url)["forgotten"] == 1


def test_the_seed_era_forgets_permanently_and_cannot_restore(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("seed")
    node = ltm.add(content="forgotten for good", robot_id=robot)["node_id"]
    with pytest.raises(ValidationError) as refused:
        ltm.forget(node)
    assert refused.value.field == "confirm" and ltm.exists(node)
    with pytest.raises(NoSoftDeleteError, match="no soft delete"):
        ltm.restore(node)
    with pytest.raises(NoSoftDeleteError):
        ltm.purge_deleted(older_than=dt.timedelta(0), **CONFIRM)
    assert isinstance(NoSoftDeleteError("x"), ha.SchemaError)
    assert ltm.forget(node, **CONFIRM) is True and not ltm.exists(node)
    with pytest.raises(NotFoundError):
        ltm.forget(node, **CONFIRM)


def test_htm_forgets_as_its_era_does(server_url: str, roles: dict[str, str]) -> None:  # noqa: F811
    with gem_written(server_url, roles) as url, \
            LongTermMemory(as_role(url, roles["writer"]), writer_timezone=WRITER_ZONE,
                           cache_size=0) as store, \
            ha.HTM("gem-a", store=store, buffer_writes=False,  # the gem's vectors are 8-d
                   embedder=ha.get_embedder("hashing", dimensions=8)) as htm:
        node = htm.remember("Nginx fronts the API")
        assert htm.forget(node) and node not in htm.working_memory
        assert not store.exists(node)
        assert htm.restore(node) and store.exists(node)
        with pytest.raises(ValidationError, match="not forgotten"):
            htm.restore(node)
        htm.forget(node)
        assert htm.purge_deleted(older_than=dt.timedelta(0), **CONFIRM) == 2


@pytest.mark.parametrize("era", ["gem", "seed"])
def test_cli_asks_before_forgetting(era: str, server_url: str, roles: dict[str, str],  # noqa: F811
                                    database_url: str) -> None:
    def run(*args: str, answer: str | None = None) -> str:
        result = CliRunner().invoke(cli, ["--db", url, "--writer-timezone", WRITER_ZONE,
                                          *args], input=answer)
        assert (result.exit_code == 0) is (answer != "n"), result.output
        return result.output

    if era == "seed":
        url = database_url
        with LongTermMemory(url) as store:
            node = store.add(content="asked first", robot_id=store.register_robot("r"))[
                "node_id"]
        assert "delete permanently" in run("forget", str(node), answer="n")
        assert "deleted" in run("forget", str(node), "--yes")
        with LongTermMemory(url) as store:
            assert not store.exists(node)
        result = CliRunner().invoke(cli, ["--db", url, "restore", str(node), "--yes"])
        assert result.exit_code != 0
        # A memory that is not there is said so before any question is asked.
        for command in ("forget", "restore"):
            missing = CliRunner().invoke(cli, ["--db", url, command, str(node)])
            assert type(missing.exception).__name__ == "NotFoundError", missing.output
            assert "?" not in missing.output
        return
    with gem_written(server_url, roles) as url:
        with LongTermMemory(url) as store:
            node = store.node_ids_by_content([CONTENTS[0]])[0]
        run("forget", str(node), answer="n")
        assert counts(url)["forgotten"] == 1
        assert "forgotten" in run("forget", str(node), answer="y")
        with LongTermMemory(url) as store:  # reads leave it out; it is there to restore
            assert not store.exists(node) and store.exists(node, forgotten=True)
        assert "restored" in run("restore", str(node), "--yes")
        assert "was not forgotten" in run("restore", str(node), "--yes")
        asked = run("purge", "--older-than", "0d", answer="n")
        assert re.search(r"forgotten before \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC in ", asked)
        assert counts(url)["forgotten"] == 1
        assert "1 forgotten" in run("purge", "--older-than", "0s", "--yes")
        assert counts(url) == {"nodes": 3, "forgotten": 0, "forgotten_links": 0,
                               "forgotten_tags": 0}


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(node_id=st.one_of(st.integers(max_value=0), st.text(), st.floats(), st.none()),
       older_than=st.one_of(st.text(), st.integers(), st.datetimes(),
                            st.timedeltas(max_value=dt.timedelta(-1))),
       permanent=st.one_of(st.text(), st.integers(min_value=2)))
def test_bad_input_is_refused_before_any_write(ltm: LongTermMemory, node_id: object,
                                               older_than: object, permanent: object) -> None:
    for call in (lambda: ltm.forget(node_id, **CONFIRM),  # type: ignore[arg-type]
                 lambda: ltm.forget(1, permanent=permanent, **CONFIRM),  # type: ignore[arg-type]
                 lambda: ltm.restore(node_id),  # type: ignore[arg-type]
                 lambda: ltm.purge_deleted(older_than=older_than, **CONFIRM)):  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            call()


def test_a_soft_forget_by_plain_sql_reaches_every_cache(server_url: str,
                                                        roles: dict[str, str]) -> None:  # noqa: F811
    """A writer that sets ``deleted_at`` on ``nodes`` alone (no ``node_tags``, as the gem's
    forget also writes) and clears it again: a search this store had cached sees both at
    once, not after ``cache_ttl``."""
    with gem_written(server_url, roles) as url:
        LongTermMemory(url, init_schema=True).close()
        with LongTermMemory(url, writer_timezone=WRITER_ZONE, cache_ttl=3600) as store:
            assert store.cache_scope == "database"
            node = store.node_ids_by_content([CONTENTS[0]])[0]

            def found() -> bool:
                return node in {h["id"] for h in store.search_fulltext(
                    query="primary database")}

            assert found() and found()  # the second from the cache
            for when in ("now()", "NULL"):
                with psycopg.connect(url, autocommit=True) as other:
                    other.execute(f"UPDATE nodes SET deleted_at = {when} WHERE id = %s",
                                  (node,))
                assert found() is (when == "NULL")
