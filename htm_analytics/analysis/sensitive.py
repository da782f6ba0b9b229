"""Secrets and personal data held in memories, found with well-kept detectors and masked.

Credentials come from the plugins of Yelp's ``detect-secrets`` (cloud and service keys and
tokens, JWTs, private-key blocks, passwords in URLs, ``password = "..."`` assignments); phone
numbers from Google's libphonenumber (``phonenumbers``); payment cards (Luhn) and IBANs
(ISO 13616 check digits and country formats) from ``python-stdnum``. E-mail addresses use
the WHATWG HTML "valid e-mail address" pattern with a dotted domain. Only the kind, the
detector and a masked excerpt leave this module: the matched text itself is never returned,
logged or put in a report.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
import phonenumbers
from stdnum import iban, luhn

from .._docs import share_docs
from .._progress import progress_bar, validate_progress
from ..errors import ValidationError
from ..frames import scope_params
from ..store import LongTermMemory
from ..store.display import counted
from ._common import draw_sample, live_store, validate_choices
from .worker_pool import ordered_map, validate_workers

__all__ = ["SENSITIVE_KINDS", "SENSITIVE_COLUMNS", "sensitive_memories", "find_sensitive",
           "Finding", "kinds_found", "mask_sensitive"]

SENSITIVE_KINDS = ("credential", "email", "phone", "payment_card", "iban")
SENSITIVE_COLUMNS = {"node_id": "int64", "kind": "string", "detector": "string",
                     "excerpt": "string", "robots": "string",
                     "created_at": "datetime64[us, UTC]"}


def kinds_found(kinds: pd.Series) -> str:
    """How many findings of each kind, in words: ``2 credentials, 13 emails``."""
    return ", ".join(counted(int(n), str(kind).replace("_", " "))
                     for kind, n in sorted(kinds.value_counts().items()))


# detect-secrets plugins left out: high-entropy strings and public IP addresses flag hashes,
# checksums and example addresses in ordinary prose (they are for source code review).
_LEFT_OUT_PLUGINS = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
# WHATWG HTML's valid e-mail address, with at least one dot in the domain.
_EMAIL = re.compile(
    r"[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
    r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+")
# 13 to 19 digits, optionally grouped by single spaces or dashes, not inside a longer number.
_CARD = re.compile(r"(?<![\d.,-])\d(?:[ -]?\d){12,18}(?![\d,]|\.\d)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_EXCERPT_CONTEXT = 30
_PARALLEL_FROM = 20_000  # memories read from which worker processes repay their start
_BATCH_ROWS = 5_000  # memories per batch read, and per task of a worker


@dataclass(frozen=True)
class _Gate:
    """Substrings of which every match of a plugin's patterns contains one: ``exact`` ones
    as written, ``folded`` ones in the case-folded text (for patterns that ignore case), and
    one of ``also``, when given, as written. A text without them is not scanned by the
    plugin: a substring test costs a few microseconds where a pattern may cost a hundred."""

    exact: tuple[str, ...] = ()
    folded: tuple[str, ...] = ()
    also: tuple[str, ...] = ()

    def admits(self, text: str, folded: str) -> bool:
        return ((any(word in text for word in self.exact)
                 or any(word in folded for word in self.folded))
                and (not self.also or any(word in text for word in self.also)))


# Most assignment-style patterns (``cloudant_key: ...``) need one of these words: they cost
# far more than the other patterns together. A plugin without a gate (one added by a later
# detect-secrets) scans every text. tests/test_hygiene_sensitive.py checks each gate against
# strings generated from the plugin's own patterns.
_ASSIGNMENT = _Gate(folded=("key", "pw", "pass", "token", "secret", "contrase", "cloudant",
                            "softlayer"))
_GATES = {
    "Cloudant Credentials": _ASSIGNMENT, "IBM Cloud IAM Key": _ASSIGNMENT,
    "SoftLayer Credentials": _ASSIGNMENT, "IBM COS HMAC Credentials": _Gate(folded=("secret",)),
    "AWS Access Key": _Gate(exact=("A3T", "ABIA", "ACCA", "AKIA", "ASIA"), folded=("aws",)),
    "Artifactory Credentials": _Gate(exact=("AKC", "AP")),
    "Azure Storage Account access key": _Gate(exact=("AccountKey=",)),
    "Basic Auth Credentials": _Gate(exact=("://",)),
    "Discord Bot Token": _Gate(exact=(".",)),
    "GitHub Token": _Gate(exact=("gh",)),
    "GitLab Token": _Gate(exact=("gl", "GR1348941")),
    "JSON Web Token": _Gate(exact=("eyJ",)),
    "Mailchimp Access Key": _Gate(exact=("-us",)),
    "NPM tokens": _Gate(exact=(":_authToken=",)),
    "OpenAI Token": _Gate(exact=("T3BlbkFJ",)),
    "Private Key": _Gate(exact=("PRIVATE KEY", "PuTTY-User-Key-File-2")),
    "PyPI Token": _Gate(exact=("pypi-Ag",)),
    "SendGrid API Key": _Gate(exact=("SG.",)),
    "Slack Token": _Gate(folded=("xox", "hooks.slack.com")),
    "Square OAuth Secret": _Gate(exact=("sq0csp-",)),
    "Stripe Access Key": _Gate(exact=("k_live_",)),
    "Telegram Bot Token": _Gate(exact=(":",)),
    "Twilio API Key": _Gate(exact=("AC", "SK")),
}


@functools.cache
def _gate(secret_type: str) -> _Gate | None:
    """The gate of a plugin; the keyword plugin's needs one of its words (``api_?key``,
    ``password``...) and a quote."""
    if secret_type != "Secret Keyword":
        return _GATES.get(secret_type)
    from detect_secrets.plugins.keyword import DENYLIST

    words = {variant.casefold() for word in DENYLIST
             for variant in (word.replace("_?", "_"), word.replace("_?", ""))}
    return _Gate(folded=tuple(sorted(words)), also=("'", '"', "`"))


@dataclass(frozen=True)
class Finding:
    """One sensitive span of a text: where it is, not what it says."""

    kind: str
    detector: str
    start: int
    end: int


@functools.cache
def _secret_plugins() -> tuple[Any, ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    plugins = []
    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    for cls in classes:
        if cls.__name__ not in _LEFT_OUT_PLUGINS:
            plugins.append(cls())
    return tuple(sorted(plugins, key=lambda p: p.secret_type))


def _credential_findings(text: str) -> Iterator[Finding]:
    from detect_secrets.plugins.base import RegexBasedDetector

    folded = text.casefold()
    for plugin in _secret_plugins():
        gate = _gate(plugin.secret_type)
        if gate is not None and not gate.admits(text, folded):
            continue
        if isinstance(plugin, RegexBasedDetector):
            # The whole match: some patterns capture only a token's prefix. A match counts
            # when the plugin accepts it on its own (JWTs must decode, for one).
            for pattern in plugin.denylist:
                for match in pattern.finditer(text):
                    if any(plugin.analyze_string(match.group())):
                        yield Finding("credential", plugin.secret_type, *match.span())
            continue
        for secret in set(plugin.analyze_string(text)):
            for match in re.finditer(re.escape(secret), text) if secret else ():
                yield Finding("credential", plugin.secret_type, match.start(), match.end())


def _phone_findings(text: str, region: str | None) -> Iterator[Finding]:
    if region is None and "+" not in text:  # without a region only +<country> numbers parse
        return
    for match in phonenumbers.PhoneNumberMatcher(text, region,
                                                 leniency=phonenumbers.Leniency.VALID):
        yield Finding("phone", "phonenumbers", match.start, match.end)


def find_sensitive(text: str, *, kinds: tuple[str, ...] = SENSITIVE_KINDS,
                   phone_region: str | None = None) -> list[Finding]:
    """Every sensitive span of ``text`` (overlapping spans of one kind merged), by position."""
    found: list[Finding] = []
    if "credential" in kinds:
        found += _credential_findings(text)
    if "email" in kinds and "@" in text:
        found += [Finding("email", "email address", m.start(), m.end())
                  for m in _EMAIL.finditer(text)]
    if "phone" in kinds:
        found += _phone_findings(text, phone_region)
    if "payment_card" in kinds:
        for m in _CARD.finditer(text):
            digits = re.sub(r"\D", "", m.group())
            if len(set(digits)) > 1 and luhn.is_valid(digits):
                found.append(Finding("payment_card", "Luhn-valid card number", m.start(),
                                     m.end()))
    if "iban" in kinds:
        found += [Finding("iban", "IBAN", m.start(), m.end()) for m in _IBAN.finditer(text)
                  if iban.is_valid(m.group())]
    # A credential wins over what overlaps it (the password of a URL looks like an
    # e-mail address); overlapping findings of one kind are one.
    found.sort(key=lambda f: (f.kind != "credential", f.start, -f.end))
    kept: list[Finding] = []
    for finding in found:
        if any(finding.start < k.end and k.start < finding.end
               and (k.kind == finding.kind or k.kind == "credential") for k in kept):
            continue
        kept.append(finding)
    kept.sort(key=lambda f: (f.start, f.end))
    return kept


def masked_excerpt(text: str, findings: list[Finding], finding: Finding,
                   context: int = _EXCERPT_CONTEXT) -> str:
    """The text around ``finding`` with every finding in it replaced by ``[kind]``."""
    start, end = max(0, finding.start - context), min(len(text), finding.end + context)
    pieces, position = [], start
    for other in findings:
        if other.end <= start or other.start >= end:
            continue
        pieces.append(text[position:max(position, other.start)])
        pieces.append(f"[{other.kind}]")
        position = max(position, other.end)
    pieces.append(text[position:end])
    excerpt = " ".join("".join(pieces).split())
    return ("…" if start > 0 else "") + excerpt + ("…" if end < len(text) else "")


def mask_sensitive(text: str) -> str:
    """``text`` as a report may show it: every sensitive span (:func:`find_sensitive`, every
    kind) replaced by ``[kind]``. A text already shortened (ending with ``…``) also loses its
    cut last word, which may be the beginning of a secret the detectors no longer know."""
    if text.endswith("…"):
        head = text[:-1]
        cut = head.rfind(" ")
        text = (head[:cut] if cut > 0 else head) + "…"
    pieces, position = [], 0
    for finding in find_sensitive(text):
        pieces += [text[position:max(position, finding.start)], f"[{finding.kind}]"]
        position = max(position, finding.end)
    return "".join(pieces) + text[position:]


def _scan(batch: tuple[list[int], list[str]], *, kinds: tuple[str, ...],
          phone_region: str | None) -> tuple[int, list[tuple[int, str, str, str]]]:
    """The memories of a batch read, and their findings of ``kinds`` as ``(node_id, kind,
    detector, excerpt)`` (run in a worker process when there are several)."""
    found = []
    for node_id, content in zip(*batch):
        # Every kind is looked for, so that excerpts mask the kinds not asked for too.
        findings = find_sensitive(content, phone_region=phone_region)
        found += [(node_id, f.kind, f.detector, masked_excerpt(content, findings, f))
                  for f in findings if f.kind in kinds]
    return len(batch[0]), found


@share_docs
def sensitive_memories(store: LongTermMemory, *, kinds: str | list[str] | None = None,
                       robots: str | list[str] | None = None, timeframe: Any = None,
                       phone_region: str | None = None, sample: int | None = None,
                       seed: int = 0, progress: bool = False, workers: int = 1
                       ) -> pd.DataFrame:
    """Memories holding credentials or personal data, with masked excerpts.

    Parameters
    ----------
    store : LongTermMemory
        The live store; only read (the texts stream through in batches).
    kinds : str or list of str, optional
        Which to look for, among ``credential``, ``email``, ``phone``, ``payment_card`` and
        ``iban`` (all by default).
    robots : str or list of str, optional
        Only memories that one of these robots remembers.
    timeframe : (datetime, datetime), optional
        Only memories created in this range (inclusive, UTC).
    phone_region : str, optional
        A two-letter region (``"US"``, ``"DE"``) whose national phone numbers count too;
        without it only international ``+<country>`` numbers are found, as national formats
        overlap with ordinary numbers.
    sample : int, optional
        Read only this many memories in scope, chosen by a hash of their id and ``seed``
        (every memory when None or when the scope holds no more). A sample estimates how
        common sensitive memories are; it cannot show that a rare one is absent.
    seed : int
        Chooses the sample; the same seed gives the same memories.
    %(progress)s
    workers : int
        Processes that run the detectors (pure Python, one CPU each) when more than
        20,000 memories are read; the findings are the same. More than 1 spawns them: a
        script must then guard its entry point (``if __name__ == "__main__":``). The
        command uses every CPU.

    Returns
    -------
    pandas.DataFrame
        One row per finding, by memory then position:

        - ``node_id`` (int64);
        - ``kind`` (string): ``credential``, ``email``, ``phone``, ``payment_card`` or
          ``iban``;
        - ``detector`` (string): the detect-secrets plugin's secret type (``AWS Access Key``,
          ``Basic Auth Credentials``...) or the personal-data check;
        - ``excerpt`` (string): about 30 characters either side, every finding replaced by
          ``[kind]``;
        - ``robots`` (string): the robots that remember the memory;
        - ``created_at`` (datetime64[us, UTC]).

        ``attrs["scanned"]`` is the number of memories read. With a sample,
        ``attrs["sample"]`` holds ``checked``, ``memories`` (in scope), ``seed``,
        ``involved`` (sampled memories with a finding), ``share`` and its 95% interval
        ``share_low``/``share_high``.
    """
    store = live_store(store)
    chosen = validate_choices(kinds, SENSITIVE_KINDS, field="kinds")
    if phone_region is not None and (not isinstance(phone_region, str) or phone_region
                                     not in phonenumbers.SUPPORTED_REGIONS):
        raise ValidationError(f"must be a two-letter region code such as 'US', got "
                              f"{phone_region!r}", field="phone_region")
    validate_progress(progress)
    workers = validate_workers(workers)
    scope = scope_params(timeframe=timeframe, robots=robots)
    drawn = draw_sample(store, sample, seed, scope)
    total = (len(drawn.ids) if drawn is not None else
             store.count_in_scope(scope) if progress or workers > 1 else None)
    if total is not None and total < _PARALLEL_FROM:
        workers = 1
    batches = ((batch["id"].tolist(), batch["content"].tolist()) for batch in
               store.iter_contents(scope=scope, batch_rows=_BATCH_ROWS,
                                   ids=None if drawn is None else drawn.ids.tolist()))
    rows: list[tuple[int, str, str, str]] = []
    scanned = 0
    with progress_bar(progress, total, "sensitive data", "memories") as bar:
        for read, found in ordered_map(functools.partial(_scan, kinds=chosen,
                                                         phone_region=phone_region),
                                       batches, workers=workers):
            rows += found
            scanned += read
            bar.update(read)
    frame = pd.DataFrame(rows, columns=["node_id", "kind", "detector", "excerpt"])
    described = store.describe_nodes(sorted(set(frame["node_id"]))).set_index("id")
    frame["robots"] = frame["node_id"].map(described["robots"])
    frame["created_at"] = frame["node_id"].map(described["created_at"])
    frame = frame.astype({"node_id": "int64"})
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    frame = frame.astype(SENSITIVE_COLUMNS).reset_index(drop=True)
    frame.attrs["scanned"] = scanned
    if drawn is not None:
        frame.attrs["sample"] = drawn.estimate(frame["node_id"].nunique())
    return frame

