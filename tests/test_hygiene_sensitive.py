"""Secrets and personal data planted in memories are found, masked, and never shown."""

from __future__ import annotations

import operator
import os
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htm_analytics import HTMError, LongTermMemory, ValidationError
from htm_analytics.analysis import sensitive, sensitive_memories
from htm_analytics.analysis.sensitive import find_sensitive, kinds_found
from htm_analytics.analysis.worker_pool import ordered_map
from tests.test_hostile_input import FAST, anything
from tests.test_hygiene import random_texts

# Published example and test values: none is anyone's real secret.
SECRETS = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "url_password": "hunter2pass",
    "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "card": "4111 1111 1111 1111",
    "iban": "GB82 WEST 1234 5698 7654 32",
    "email": "jane.roe@example.org",
    "phone": "+44 20 7946 0958",
    "keyword": "s3cr3t-Passw0rd-42",
}
PLANTED = {
    "aws": f"deploy with access key {SECRETS['aws']} in the staging account",
    "url_password": f"the replica is postgres://app:{SECRETS['url_password']}@db.internal/app",
    "github": f"CI pushes with the token {SECRETS['github']} since March",
    "private_key": ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA75\n"
                    "-----END RSA PRIVATE KEY-----"),
    "card": f"the user paid with card {SECRETS['card']} last week",
    "iban": f"refunds go to {SECRETS['iban']} (their bank)",
    "email": f"write to {SECRETS['email']} for the invoices",
    "phone": f"call the office on {SECRETS['phone']} before noon",
    "keyword": f'config has password = "{SECRETS["keyword"]}" in it',
}
EXPECTED = {"aws": ("credential", "AWS Access Key"),
            "url_password": ("credential", "Basic Auth Credentials"),
            "github": ("credential", "GitHub Token"),
            "private_key": ("credential", "Private Key"),
            "card": ("payment_card", "Luhn-valid card number"),
            "iban": ("iban", "IBAN"), "email": ("email", "email address"),
            "phone": ("phone", "phonenumbers"), "keyword": ("credential", "Secret Keyword")}
# Look-alikes that are not findings: a card number failing Luhn, an IBAN with bad check
# digits, a version string, a national number without a region, an address without a domain.
LOOKALIKES = ["order 4111 1111 1111 1112 shipped", "account GB00 WEST 1234 5698 7654 32",
              "needs libfoo 1.2.3.4 or later", "call 020 7946 0958 today",
              "mail root@localhost on failure", "the checksum is 1234567890123"]


def test_planted_secrets_are_found_and_masked(ltm: LongTermMemory) -> None:
    ltm.bulk_add(random_texts(40, seed=3) + LOOKALIKES, robots="clean")
    ltm.bulk_add(list(PLANTED.values()), robots="leaky")
    found = sensitive_memories(ltm)
    assert found.attrs["scanned"] == 40 + len(LOOKALIKES) + len(PLANTED)
    ids = dict(zip(PLANTED, ltm.node_ids_by_content(list(PLANTED.values()))))
    got = {(int(r.node_id), r.kind, r.detector) for r in found.itertuples()}
    assert got == {(ids[name], *EXPECTED[name]) for name in PLANTED}
    assert set(found["robots"]) == {"leaky"}
    shown = found.to_json(date_format="iso") + found.to_csv()
    for secret in SECRETS.values():
        assert secret not in shown and secret.replace(" ", "") not in shown
    card = found[found["kind"] == "payment_card"]["excerpt"].iloc[0]
    assert card == "the user paid with card [payment_card] last week"
    # Only the kinds asked for, only the robots asked for.
    assert set(sensitive_memories(ltm, kinds=["email", "iban"])["kind"]) == {"email", "iban"}
    # What was not asked for is still masked in the excerpts shown.
    ltm.bulk_add([f"mail {SECRETS['email']} with key {SECRETS['aws']}"], robots="leaky")
    keys = sensitive_memories(ltm, kinds="credential")
    assert not keys["excerpt"].str.contains(SECRETS["email"]).any()
    assert keys["excerpt"].str.contains(r"\[email\]").any()
    assert sensitive_memories(ltm, robots="clean").empty
    assert len(sensitive_memories(ltm, kinds="phone", phone_region="GB")) == 2


def test_worker_processes_find_the_same_in_the_same_order(
        ltm: LongTermMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of seven memories spread over two spawned workers: the findings, their order
    and the memories counted are those of one process."""
    from htm_analytics.analysis import sensitive

    ltm.bulk_add(random_texts(30, seed=5), robots="clean")
    ltm.bulk_add(list(PLANTED.values()), robots="leaky")
    ltm.bulk_add(random_texts(30, seed=6), robots="clean")
    monkeypatch.setattr(sensitive, "_BATCH_ROWS", 7)
    alone = sensitive_memories(ltm)
    monkeypatch.setattr(sensitive, "_PARALLEL_FROM", 0)
    spread = sensitive_memories(ltm, workers=2)
    assert len(alone) == len(PLANTED) and alone.attrs["scanned"] == 60 + len(PLANTED)
    pd.testing.assert_frame_equal(spread, alone)
    assert spread.attrs == alone.attrs


def test_ordered_map_keeps_the_order_and_stops_early() -> None:
    assert list(ordered_map(operator.neg, range(50), workers=2)) == [-i for i in range(50)]
    assert list(ordered_map(operator.neg, range(5), workers=1)) == [0, -1, -2, -3, -4]
    taken = ordered_map(operator.neg, iter(range(10**6)), workers=2)
    assert [next(taken) for _ in range(3)] == [0, -1, -2]
    taken.close()  # the pool is shut down; the million items are never read
    with pytest.raises(TypeError):
        list(ordered_map(operator.neg, ["text"], workers=2))
    with pytest.raises(HTMError, match="worker process stopped"):  # a worker killed
        list(ordered_map(os._exit, [3], workers=2))


def test_clean_memory_has_no_findings(ltm: LongTermMemory) -> None:
    ltm.bulk_add(random_texts(50, seed=4) + LOOKALIKES, robots="clean")
    found = sensitive_memories(ltm)
    assert found.empty and list(found.columns) == ["node_id", "kind", "detector", "excerpt",
                                                   "robots", "created_at"]


def test_a_url_password_is_one_credential_not_an_email() -> None:
    findings = find_sensitive("see https://admin:pw123456@example.com/path")
    assert [(f.kind, f.detector) for f in findings] == [("credential",
                                                         "Basic Auth Credentials")]


def _plugin_patterns() -> list[Any]:
    """Every detect-secrets plugin's patterns, as the scan runs them."""
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.keyword import QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP

    return [pytest.param(plugin.secret_type, pattern, id=f"{plugin.secret_type}-{i}")
            for plugin in sensitive._secret_plugins()
            for i, pattern in enumerate(plugin.denylist if isinstance(plugin, RegexBasedDetector)
                                        else QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP)]


def test_every_plugin_has_a_gate() -> None:
    types = {plugin.secret_type for plugin in sensitive._secret_plugins()}
    assert all(sensitive._gate(t) is not None for t in types)


@pytest.mark.parametrize(("secret_type", "pattern"), _plugin_patterns())
@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_gate_admits_every_match_of_its_plugin(secret_type: str, pattern: Any,
                                                 data: st.DataObject) -> None:
    """A text that a plugin's pattern matches (generated from the pattern itself, case
    variants included) passes the plugin's gate: the gates skip only work, never a find."""
    text = data.draw(st.from_regex(pattern))
    assert pattern.search(text)
    gate = sensitive._gate(secret_type)
    assert gate is not None and gate.admits(text, text.casefold())


def test_kinds_found_are_counted_in_words() -> None:
    kinds = pd.Series(["email", "credential", "email", "payment_card"], dtype="string")
    assert kinds_found(kinds) == "1 credential, 2 emails, 1 payment card"


@FAST
@given(kinds=anything, robots=anything, region=anything, progress=anything,
       workers=anything)
def test_bad_arguments_name_their_field(ltm: LongTermMemory, kinds: Any, robots: Any,
                                        region: Any, progress: Any, workers: Any) -> None:
    try:
        sensitive_memories(ltm, kinds=kinds, robots=robots, phone_region=region,
                           progress=progress, workers=workers)
    except ValidationError as exc:
        assert exc.field in {"kinds", "robots", "phone_region", "progress", "workers"}


@pytest.mark.parametrize("kinds", [[], "secrets", ["email", 3]])
def test_unknown_kinds_are_refused(ltm: LongTermMemory, kinds: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        sensitive_memories(ltm, kinds=kinds)
    assert caught.value.field == "kinds"
