"""Trust-store variables: where a program finds the CA certificates it trusts
(``SSL_CERT_FILE``, ``AWS_CA_BUNDLE``, ``NODE_EXTRA_CA_CERTS``, ...).

Their value is a path to public certificates, not a credential: it is never masked (a
name with ``CERT`` in it would otherwise mask the path everywhere, under whichever
variable's name holds it first) and a question shows it under its own name.
"""

from __future__ import annotations

import re

#: Known trust-store variables (exact names), besides :data:`PATTERN`.
NAMES = frozenset(
    {
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "AWS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
        "PIP_CERT",
        "HTTPLIB2_CA_CERTS",
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    }
)
#: Names that end like one: ``NIX_SSL_CERT_FILE``, ``*_CA_BUNDLE``, ``*_EXTRA_CA_CERTS``,
#: ``VAULT_CACERT``, ``*_CA_CERTS_FILE``, ``*_CA_FILE``, ``*_CAPATH``, ``*_CAINFO``.
PATTERN = re.compile(
    r"(^|_)(SSL_CERT_(FILE|DIR)|CA_?(BUNDLE|CERTS?|CERTIFICATES?)(_(FILE|DIR|PATH))?"
    r"|CA_(FILE|PATH|DIR)|CA(INFO|PATH)|ROOTS_FILE_PATH)$"
)


def is_trust_store(name: str) -> bool:
    upper = name.upper()
    return upper in NAMES or bool(PATTERN.search(upper))


def is_path(value: str) -> bool:
    """A file or folder name (one line, no certificate or key text in it)."""
    return bool(value) and "\n" not in value and "-----BEGIN" not in value and len(value) < 4096


def public_path(name: str, value: str) -> bool:
    """``name=value`` names a trust store by its path: nothing secret."""
    return is_trust_store(name) and is_path(value)
