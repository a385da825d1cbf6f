"""Placeholder credentials of the right shape: what a sandbox holds instead of a secret.

A placeholder keeps the real value's known prefix (``AKIA``, ``ghp_``, ``glpat-`` ...),
its length and the class of each character (upper, lower, digit; other signs kept), so
CLIs that check a credential's shape accept it. It is drawn from an HMAC of the real value
under a per-install key: stable across restarts (placeholder files stay valid) and
telling nothing about the real value. A short real value (a password) gets a long random
placeholder instead, so the proxy can find it in a request without false matches.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import re
import string

#: Prefixes kept as they are (a CLI or a server may check them).
KNOWN_PREFIX = re.compile(
    r"^(AKIA|ASIA|AROA|AIDA|github_pat_|gh[pousr]_|glpat-|sk-ant-[a-z0-9]+-|sk-|"
    r"xox[abpr]-|hv[sbr]\.|dop_v1_|npm_|pypi-|pul-|dckr_pat_|dapi|ya29\.)"
)
#: Markers kept where they are inside a token (Terraform Cloud's ``ID.atlasv1.SECRET``).
KNOWN_INFIX = re.compile(r"\.atlasv1\.")
#: The shortest placeholder: long enough to never occur in a request by chance.
MIN_LENGTH = 20


def placeholder_for(real: str, key: bytes, label: str = "") -> str:
    """A placeholder for ``real``, stable for the same ``key``, ``label`` and value."""
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
    if char in string.ascii_uppercase:
        return rng.choice(string.ascii_uppercase)
    if char in string.ascii_lowercase:
        return rng.choice(string.ascii_lowercase)
    if char in string.digits:
        return rng.choice(string.digits)
    return char
