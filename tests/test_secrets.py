"""No password in any message, repr, exception chain or log record."""

from __future__ import annotations

import logging
import traceback

import pytest
from click.testing import CliRunner

from htm_analytics import HTM, HTMError, LongTermMemory, QueryTimeoutError
from htm_analytics.cli import cli
from htm_analytics.store.connection import mask_url

SECRET = "S3cr3t-Pa55word"

MALFORMED = [
    f"postgresql://htm:{SECRET}%zz@localhost/htm",          # a bad percent-escape
    f"postgress://htm:{SECRET}@localhost/htm",              # a misspelt scheme
    f"host=localhost password=my {SECRET} dbname=htm",      # an unquoted space
    f"postgresql://htm:my {SECRET}@localhost/htm",          # a space in a URL password
    f"host=localhost password='{SECRET} dbname=htm",        # an unterminated quote
    f"postgresql://htm:{SECRET}@127.0.0.1:1/htm?connect_timeout=2",  # refused
    f"host=127.0.0.1 port=1 password={SECRET} connect_timeout=2",    # refused, keywords
    f"mysql://htm:{SECRET}@localhost/htm",                  # another system's URL
]


def everything_said(exc: BaseException) -> str:
    """The exception's message, repr and whole printed traceback (chained causes too)."""
    return "\n".join([str(exc), repr(exc), *traceback.format_exception(exc)])


def assert_masked(text: str) -> None:
    assert SECRET not in text
    for piece in ("S3cr3t", "Pa55word"):
        assert piece not in text


@pytest.mark.parametrize("url", MALFORMED)
def test_malformed_or_unreachable_urls_never_show_the_password(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for make in (lambda: LongTermMemory(url), lambda: HTM("r", store=url)):
        with pytest.raises(HTMError) as info:
            make()
        assert_masked(everything_said(info.value))
    result = CliRunner().invoke(cli, ["status", "--db", url], standalone_mode=False)
    assert isinstance(result.exception, HTMError)
    assert_masked(result.output + everything_said(result.exception))
    assert_masked("\n".join(r.getMessage() for r in caplog.records))
    assert_masked(mask_url(url))


def test_a_working_store_never_shows_its_password(database_url: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    traced: list[str] = []
    url = f"{database_url} password={SECRET}"  # the test server trusts its socket
    with LongTermMemory(url, tracer=lambda *a: traced.append(repr(a)),
                        query_timeout=50) as store:
        robot = store.register_robot("secretive")
        store.add(content="nothing to hide", robot_id=robot)
        said = [repr(store), str(store.url), repr(store.server_info), repr(store.stats())]
        with pytest.raises(QueryTimeoutError) as info:
            store.fetch_frame("SELECT pg_sleep(1)")
        said.append(everything_said(info.value))
        said.append(repr(HTM("secretive", store=store)))
    assert_masked("\n".join(said + traced))
    assert_masked("\n".join(r.getMessage() for r in caplog.records))
    result = CliRunner().invoke(cli, ["status", "--db", url])
    assert result.exit_code == 0, result.output
    assert "***" in result.output
    assert_masked(result.output)


@pytest.mark.parametrize("url", MALFORMED)
def test_a_peer_source_url_never_shows_the_password(url: str, tmp_path) -> None:
    """Another system's database, named by URL to be imported or analysed."""
    from htm_analytics.peers import check_arandu_source, check_seaf_source

    for check in (check_arandu_source, check_seaf_source):
        with pytest.raises(HTMError) as info:
            check(url)
        assert_masked(everything_said(info.value))
    for system in ("arandu", "seaf"):
        result = CliRunner().invoke(cli, ["--db", f"postgresql:///x?host={tmp_path}", "import",
                                          system, url], standalone_mode=False)
        assert isinstance(result.exception, HTMError), result.output
        assert_masked(result.output + everything_said(result.exception))
