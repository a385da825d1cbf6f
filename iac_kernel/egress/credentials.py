"""A brokered credential and the hosts it belongs to, and the credentials the agent's
environment holds (:func:`from_env`):

* AWS static keys (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``)
  belong to :data:`AWS_HOSTS` plus the hosts of ``AWS_ENDPOINT_URL`` and
  ``AWS_ENDPOINT_URL_<SERVICE>``; the proxy re-signs their requests (Signature V4);
* ``TF_TOKEN_<host>`` belongs to that host (``_`` is a dot, ``__`` a dash, as terraform
  reads it); the tokens of :data:`TOKEN_VARIABLES` to their fixed hosts, those of
  :data:`ADDRESS_TOKENS` to the host of the variable naming their server (``VAULT_TOKEN``
  to ``VAULT_ADDR``'s);
* an OAuth client secret (:data:`IDENTITIES`) to its identity host, in a request body;
* the password of any ``http(s)://user:password@host`` URL to that host.

Credential files are read by :mod:`.formats`, found where :mod:`.stores` says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from iac_kernel.egress.addon_operations import AWS_DOMAINS
from iac_kernel.egress.addon_table import AWS_KEYS

AWS_HOSTS = (*(f"*.{domain}" for domain in AWS_DOMAINS), "amazonaws.com")
GITHUB_HOSTS = ("github.com", "*.github.com", "*.githubusercontent.com")
#: Well-known token variables and the hosts they belong to (sent in a header).
TOKEN_VARIABLES: dict[str, tuple[str, ...]] = {
    "GITHUB_TOKEN": GITHUB_HOSTS,
    "GH_TOKEN": GITHUB_HOSTS,
    "GOOGLE_OAUTH_ACCESS_TOKEN": ("*.googleapis.com",),
    "CLOUDSDK_AUTH_ACCESS_TOKEN": ("*.googleapis.com",),
    "DIGITALOCEAN_TOKEN": ("api.digitalocean.com",),
    "DIGITALOCEAN_ACCESS_TOKEN": ("api.digitalocean.com",),
    "HCLOUD_TOKEN": ("api.hetzner.cloud",),
    "CLOUDFLARE_API_TOKEN": ("api.cloudflare.com",),
}
#: Token variables whose host is named by another variable (a URL), with the host taken
#: when that variable is unset (None: not brokered then).
ADDRESS_TOKENS: dict[str, tuple[str, str | None]] = {
    "VAULT_TOKEN": ("VAULT_ADDR", None),
    "CONSUL_HTTP_TOKEN": ("CONSUL_HTTP_ADDR", None),
    "NOMAD_TOKEN": ("NOMAD_ADDR", None),
    "PULUMI_ACCESS_TOKEN": ("PULUMI_BACKEND_URL", "https://api.pulumi.com"),
    "TFE_TOKEN": ("TFE_HOSTNAME", "https://app.terraform.io"),
    "DATABRICKS_TOKEN": ("DATABRICKS_HOST", None),
    # gh's and glab's own pairs: an Enterprise token to GH_HOST, GitLab's to GITLAB_HOST.
    "GH_ENTERPRISE_TOKEN": ("GH_HOST", None),
    "GITHUB_ENTERPRISE_TOKEN": ("GH_HOST", None),
    "GITLAB_TOKEN": ("GITLAB_HOST", "https://gitlab.com"),
    "GITLAB_PRIVATE_TOKEN": ("GITLAB_HOST", "https://gitlab.com"),
}
#: Variable prefixes :func:`from_env` reads: terraform's host tokens, AWS endpoints.
TF_TOKEN, AWS_ENDPOINT = "TF_TOKEN_", "AWS_ENDPOINT_URL"


@dataclass(frozen=True)
class Identity:
    """An OAuth identity host: the variables holding a client secret that clients send
    it in a request body (in ``fields``; the proxy swaps it there alone), and the hosts
    the tokens it issues are for (they stay with the proxy: the sandbox gets
    placeholders bound to these hosts)."""

    host: str
    variables: tuple[str, ...]
    issues_for: tuple[str, ...]
    fields: tuple[str, ...] = ("client_secret",)


IDENTITIES = (
    Identity(
        "login.microsoftonline.com",
        ("ARM_CLIENT_SECRET", "AZURE_CLIENT_SECRET"),
        (
            "management.azure.com",
            "*.management.azure.com",
            "graph.microsoft.com",
            "*.vault.azure.net",
            "*.core.windows.net",
            "login.microsoftonline.com",
        ),
    ),
)
#: Client secret variable -> its identity host.
BODY_VARIABLES: dict[str, Identity] = {v: i for i in IDENTITIES for v in i.variables}
#: Variables :func:`from_env` reads besides those of :data:`TF_TOKEN` and
#: :data:`AWS_ENDPOINT` and URLs with a password (:func:`watched`).
WATCHED_VARIABLES = frozenset(
    {
        *(key.upper() for key in AWS_KEYS),
        *TOKEN_VARIABLES,
        *BODY_VARIABLES,
        *ADDRESS_TOKENS,
        *(address for address, _default in ADDRESS_TOKENS.values()),
    }
)


@dataclass
class Credential:
    """One brokered credential: ``kind`` is ``aws`` (values: the three ``AWS_KEYS``) or
    ``token`` (values: ``{"token": ...}``, a bearer token or a password); ``hosts`` empty:
    a placeholder that is never swapped; ``body``: request-body form or JSON fields the
    placeholder may be swapped in (on its hosts only)."""

    kind: str
    name: str
    values: dict[str, str]
    hosts: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    #: For a secret exchanged for tokens (OAuth): the hosts the tokens it gets are for.
    #: The proxy keeps those tokens and hands back placeholders bound to these hosts.
    issues_for: list[str] = field(default_factory=list)


# -- hosts -------------------------------------------------------------------------

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


def host_pattern(host: str, port: int | None = None) -> str | None:
    """``host`` (``host:port`` with ``port``) as the proxy matches hosts, or None when it
    is not a plain host name or IPv4 address (a wildcard, a space, an IPv6 literal)."""
    name = host.strip().rstrip(".").lower()
    if not _HOSTNAME.fullmatch(name):
        return None
    return f"{name}:{port}" if port else name


def url_host(url: str, default_scheme: str = "https") -> str | None:
    """``host:port`` of an ``http(s)`` URL (the scheme's port unless one is given; a
    bare ``host[:port]`` counts as ``default_scheme``), None for anything else."""
    text = url.strip()
    if "://" not in text:
        text = f"{default_scheme}://{text}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return host_pattern(parts.hostname, port or (443 if parts.scheme == "https" else 80))


def terraform_token_host(variable: str) -> str:
    """The host of a ``TF_TOKEN_`` variable (``TF_TOKEN_app_terraform_io``)."""
    encoded = variable.removeprefix(TF_TOKEN)
    return encoded.replace("__", "\0").replace("_", ".").replace("\0", "-").lower()


def endpoint_hosts(env: Mapping[str, str]) -> list[str]:
    """``host:port`` of every ``AWS_ENDPOINT_URL*`` (an explicit AWS endpoint)."""
    names = sorted(n for n in env if n == AWS_ENDPOINT or n.startswith(f"{AWS_ENDPOINT}_"))
    return [host for name in names if (host := url_host(env[name]))]


def address_host(variable: str, env: Mapping[str, str]) -> str | None:
    """``host:port`` a token of :data:`ADDRESS_TOKENS` belongs to under ``env``."""
    address, default = ADDRESS_TOKENS[variable]
    server = env.get(address) or default
    return url_host(server) if server else None


# -- the environment ------------------------------------------------------------------

_URL_PASSWORD = re.compile(r"\bhttps?://[^\s/@]*:[^\s/@]+@[^\s/]+")


def watched(name: str, value: str) -> bool:
    """:func:`from_env` reads ``name=value`` (a change prepares the broker again)."""
    prefixed = name.startswith((TF_TOKEN, AWS_ENDPOINT))
    return name in WATCHED_VARIABLES or prefixed or bool(_URL_PASSWORD.search(value))


def from_env(env: Mapping[str, str], aws_hosts: list[str]) -> list[Credential]:
    """The brokerable credentials among the variables ``env``."""
    found = []
    keys = {key: env[key.upper()] for key in AWS_KEYS if env.get(key.upper())}
    if AWS_KEYS[0] in keys and AWS_KEYS[1] in keys:  # a whole key pair
        found.append(Credential("aws", AWS_KEYS[0].upper(), keys, list(aws_hosts)))
    for name, value in sorted(env.items()):
        if not value:
            continue
        if name.startswith(TF_TOKEN) and len(name) > len(TF_TOKEN):
            found.append(Credential("token", name, {"token": value}, [terraform_token_host(name)]))
        elif name in TOKEN_VARIABLES:
            found.append(Credential("token", name, {"token": value}, list(TOKEN_VARIABLES[name])))
        elif name in BODY_VARIABLES:
            identity = BODY_VARIABLES[name]
            found.append(
                Credential(
                    "token",
                    name,
                    {"token": value},
                    [identity.host],
                    body=list(identity.fields),
                    issues_for=list(identity.issues_for),
                )
            )
        elif name in ADDRESS_TOKENS and (host := address_host(name, env)):
            found.append(Credential("token", name, {"token": value}, [host]))
        for match in _URL_PASSWORD.finditer(value):
            cred = _url_password(match.group(0), f"{name} URL password")
            if cred is not None:
                found.append(cred)
    return found


def _url_password(url: str, name: str) -> Credential | None:
    """The password of ``url`` bound to its host (None: no password or no host)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    host = url_host(url)
    if not password or not host:
        return None
    return Credential("token", name, {"token": unquote(password)}, [host])
