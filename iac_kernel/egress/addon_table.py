"""The broker's table, on both sides: the agent writes it (``iac_kernel.egress.broker``,
mode 0600, in its private folder) and the proxy's addon reads it (:class:`Table`), adding
the credentials it obtains for a run. Stdlib only: copied beside the addons, and imported
by the agent too.

An entry (:func:`entry`) is one credential: its ``kind`` (``aws``: the three
:data:`AWS_KEYS`; ``token``: a bearer token or a password), ``name``, the ``hosts`` its
real values may be sent to (none: a placeholder never swapped), the ``real`` values and
the ``placeholder`` of each, and optionally the request-body fields it is swapped in
(``body``) and the hosts of the tokens it is exchanged for (``issues_for``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import random
import re
import string
from collections.abc import Iterable

#: The mitmdump option naming the table's file.
TABLE_OPTION = "iac_broker_file"
AWS_KEYS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
#: Prefixes a placeholder keeps as they are (a CLI or a server may check them).
KNOWN_PREFIX = re.compile(
    r"^(AKIA|ASIA|AROA|AIDA|github_pat_|gh[pousr]_|glpat-|sk-ant-[a-z0-9]+-|sk-|"
    r"xox[abpr]-|hv[sbr]\.|dop_v1_|npm_|pypi-|pul-|dckr_pat_|dapi|ya29\.)"
)
#: Markers kept where they are inside a token (Terraform Cloud's ``ID.atlasv1.SECRET``).
KNOWN_INFIX = re.compile(r"\.atlasv1\.")
#: The shortest placeholder: long enough to never occur in a request by chance.
MIN_LENGTH = 20


def placeholder_for(real: str, key: bytes, label: str = "") -> str:
    """A placeholder for ``real`` of the right shape (what a sandbox holds instead): its
    known prefix, its length and the class of each character (upper, lower, digit; other
    signs kept), so CLIs that check a credential's shape accept it; a short value (a
    password) gets a long random one, so the proxy finds it in a request without false
    matches. Drawn from an HMAC of ``real`` under ``key``: stable for the same key, label
    and value, telling nothing about the value."""
    seed = hmac.new(key, f"{label}\0{real}".encode(), hashlib.sha256).digest()
    rng = random.Random(seed)  # a seeded shape filler: the HMAC is the secret part
    found = KNOWN_PREFIX.match(real)
    prefix = found.group(0) if found else ""
    body = real[len(prefix) :]
    if len(real) < MIN_LENGTH:
        alphabet = string.ascii_letters + string.digits
        return prefix + "".join(rng.choice(alphabet) for _ in range(MIN_LENGTH))
    kept = {i for m in KNOWN_INFIX.finditer(body) for i in range(m.start(), m.end())}
    while True:
        made = prefix + "".join(c if i in kept else _same_class(c, rng) for i, c in enumerate(body))
        if made != real:
            return made


def _same_class(char: str, rng: random.Random) -> str:
    for alphabet in (string.ascii_uppercase, string.ascii_lowercase, string.digits):
        if char in alphabet:
            return rng.choice(alphabet)
    return char


def entry(
    kind: str,
    name: str,
    hosts: Iterable[str],
    real: dict[str, str],
    placeholder: dict[str, str],
    body: Iterable[str] = (),
    issues_for: Iterable[str] = (),
) -> dict:
    """One credential of the table (see the module doc)."""
    made = {"kind": kind, "name": name, "hosts": list(hosts), "real": real}
    made["placeholder"] = placeholder
    if body:
        made["body"] = list(body)
    if issues_for:
        made["issues_for"] = list(issues_for)
    return made


def host_matches(pattern: str, host: str, port: int) -> bool:
    """``pattern`` (``host``, ``*.suffix``, either with ``:port``) covers ``host:port``."""
    name, _, want = pattern.rpartition(":") if pattern.count(":") == 1 else (pattern, "", "")
    if want and want != str(port):
        return False
    return fnmatch.fnmatchcase(host.lower(), name.lower())


class Table:
    """The credentials of the broker table, indexed by placeholder."""

    def __init__(self, data: dict) -> None:
        #: placeholder -> [(real, hosts)] (one real value per placeholder)
        self.swaps: dict[str, tuple[str, list[str]]] = {}
        #: placeholder access key id -> (real keys, hosts)
        self.aws: dict[str, tuple[dict, list[str]]] = {}
        #: placeholder access key id -> its placeholder secret (verifies signatures)
        self.aws_secrets: dict[str, str] = {}
        #: placeholder -> the request-body fields (form or JSON) it is swapped in
        self.body: dict[str, set[str]] = {}
        #: placeholder of a secret exchanged for tokens -> the hosts those are for
        self.issues_for: dict[str, list[str]] = {}
        for entry in data.get("credentials", []):
            hosts = list(entry.get("hosts", []))
            for name, fake in entry["placeholder"].items():
                real = entry["real"][name]
                known = self.swaps.get(fake, (real, []))[1]
                self.swaps[fake] = (real, sorted({*known, *hosts}))
            for fake in entry["placeholder"].values() if entry.get("body") else ():
                self.body.setdefault(fake, set()).update(entry["body"])
                if entry.get("issues_for"):
                    self.issues_for[fake] = list(entry["issues_for"])
            if entry["kind"] == "aws":
                fake_id = entry["placeholder"][AWS_KEYS[0]]
                self.aws[fake_id] = (entry["real"], self.swaps[fake_id][1])
                self.aws_secrets[fake_id] = entry["placeholder"][AWS_KEYS[1]]

    def intercepts(self, host: str, port: int) -> bool:
        return any(
            host_matches(p, host, port) for _real, hosts in self.swaps.values() for p in hosts
        )

    def allowed(self, fake: str, host: str, port: int) -> bool:
        return any(host_matches(p, host, port) for p in self.swaps[fake][1])

    def named(self, fake: str, host: str, port: int) -> bool:
        """``host:port`` is named with its port (an explicit endpoint, ``AWS_ENDPOINT_URL``),
        not only covered by a pattern such as ``*.amazonaws.com``."""
        return any(":" in p and host_matches(p, host, port) for p in self.swaps[fake][1])
