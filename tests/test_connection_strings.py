"""Connection strings with passwords that need escaping: no piece of a password ever reaches
a message, and a malformed URL says how to write it."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

from htm_analytics import HTMError, LongTermMemory, ValidationError, resolve_database_url

# Letters that no message of ours contains, among the characters URLs treat specially: any
# letter of a password found in a message is a leak.
MARKERS = "жщэ"
PASSWORDS = st.text(alphabet=MARKERS + "@:/?#%&=,; '\"\\+[]", min_size=1, max_size=24).filter(
    lambda p: any(c in MARKERS for c in p))


def _message(text: str) -> str | None:
    try:
        resolve_database_url(text)
    except ValidationError as exc:
        return str(exc)
    return None


@settings(max_examples=300, deadline=None)
@given(password=PASSWORDS, user=st.sampled_from(["alice", "a.b-c"]))
def test_no_part_of_a_password_reaches_a_message(password: str, user: str) -> None:
    raw = f"postgresql://{user}:{password}@localhost:5999/htm"
    message = _message(raw)
    if message is not None:
        assert not any(c in message for c in MARKERS), message
        assert "percent-encode" in message and "%40" in message
    else:  # accepted as written: then libpq reads exactly this password
        assert conninfo_to_dict(raw)["password"] == password
    in_query = f"postgresql://{user}@localhost:5999/htm?password={password}"
    message = _message(in_query)
    assert message is None or not any(c in message for c in MARKERS), message
    keywords = f"host=localhost user={user} password={password} dbname=htm"
    message = _message(keywords)
    assert message is None or not any(c in message for c in MARKERS), message
    # A URL whose scheme is mistyped is no URL to libpq, which quotes it whole.
    for mistyped in (f"postgresql//{user}:{password}@localhost/htm",
                     f"{user}:{password}@localhost/htm", f"//{user}:{password}@localhost/htm",
                     f"postgresql:/{user}:{password}@localhost/htm"):
        message = _message(mistyped)
        assert message is None or not any(c in message for c in MARKERS), message


@settings(max_examples=200, deadline=None)
@given(password=PASSWORDS)
def test_a_percent_encoded_password_is_read_exactly(password: str) -> None:
    url = f"postgresql://alice:{urllib.parse.quote(password, safe='')}@localhost:5999/htm"
    assert conninfo_to_dict(resolve_database_url(url))["password"] == password


@pytest.mark.parametrize("url", [
    "postgresql://alice:p@ss:w/rd#1%@localhost:5999/htm",  # the reports of issue 20
    "postgresql://alice:a/b?c@localhost:5999/htm",
    "postgresql://alice:pa ss@localhost/htm",
    "postgres://alice:100%@localhost/htm",
])
def test_malformed_urls_say_to_percent_encode(url: str) -> None:
    with pytest.raises(ValidationError) as info:
        resolve_database_url(url)
    message = str(info.value)
    assert "percent-encode" in message
    for piece in ("ss:w", "rd#", "#1", "b?c", "c@", "pa ss", "100%"):
        assert piece not in message


def test_the_store_and_the_command_line_keep_the_password_out() -> None:
    url = "postgresql://alice:se/cr@t@localhost:5999/htm"
    with pytest.raises(HTMError) as info:
        LongTermMemory(url)
    assert "se/cr" not in str(info.value) and "cr@t" not in str(info.value)
    from click.testing import CliRunner

    from htm_analytics.cli import cli

    result = CliRunner().invoke(cli, ["--db", url, "status"])
    assert isinstance(result.exception, ValidationError)
    shown = result.output + str(result.exception)
    assert "percent-encode" in shown and "cr@t" not in shown


@pytest.mark.parametrize("url", ["postgresql://alice@localhost:5999/htm?password=x&жж",
                                 "postgresql://alice:ж/ж@localhost:5999/htm"])
def test_the_database_line_never_shows_a_malformed_url(url: str) -> None:
    from click.testing import CliRunner

    from htm_analytics.cli import cli

    result = CliRunner().invoke(cli, ["--db", url, "status"])
    assert isinstance(result.exception, ValidationError)
    assert "ж" not in result.output + str(result.exception)
    assert "database:" not in result.output  # refused before it is named


def test_an_unknown_option_is_named() -> None:
    message = _message("host=localhost dbnme=htm")
    assert message is not None and 'invalid connection option "dbnme"' in message


@pytest.mark.parametrize("url", ["postgresql://alice@localhost/htm?connect_timeout=abc",
                                 "host=localhost dbname=htm connect_timeout=1.5"])
def test_a_connect_timeout_that_is_no_number_is_refused_at_once(url: str) -> None:
    """libpq reads it only when it connects: the store's pool retried it for 30 s."""
    with pytest.raises(ValidationError, match="connect_timeout must be a whole number") as info:
        LongTermMemory(url)
    assert info.value.field == "config_or_url"


def test_a_history_database_that_fails_keeps_its_password_out(tmp_path) -> None:
    from click.testing import CliRunner

    from htm_analytics.cli import cli

    url = "postgresql://alice:Secr3tжPw@localhost:1/nonexistent"
    for command in (["collect", "--history-schema", "h", "--history-db", url],
                    ["history", "--history-schema", "h", "--history-db", url]):
        result = CliRunner().invoke(cli, ["--db", url.replace("nonexistent", "x"), *command])
        shown = result.output + str(result.exception)
        assert result.exit_code != 0 and "Secr3t" not in shown and "ж" not in shown, shown
    # A malformed one is named as the history's database, not the store's argument.
    malformed = CliRunner().invoke(cli, ["collect", "--history-schema", "h", "--history-db",
                                         "postgresql//alice:Secr3t@localhost/db"])
    assert getattr(malformed.exception, "field", None) == "history_db", malformed.output
    assert "Secr3t" not in str(malformed.exception)
