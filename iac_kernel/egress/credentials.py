"""Which credentials can be brokered, and the hosts each one belongs to.

Found in the agent's environment and the user's credential files:

* AWS static keys (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``
  and every profile of ``~/.aws/credentials`` and ``~/.aws/config``) belong to
  ``*.amazonaws.com`` (and ``.com.cn``) plus the hosts of ``AWS_ENDPOINT_URL`` and
  ``AWS_ENDPOINT_URL_<SERVICE>``; the proxy re-signs their requests (Signature V4);
* ``TF_TOKEN_<host>`` belongs to that host (``_`` is a dot, ``__`` a dash, as terraform
  reads it), ``~/.terraform.d/credentials.tfrc.json`` tokens to their hosts;
* ``GITHUB_TOKEN``/``GH_TOKEN`` to GitHub, ``GITLAB_TOKEN`` to gitlab.com;
* passwords of ``~/.git-credentials`` URLs and ``~/.netrc`` machines to their hosts.

Each is a :class:`Credential`: the real values, and the hosts they may be sent to.
"""

from __future__ import annotations

import configparser
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

AWS_HOSTS = ("*.amazonaws.com", "amazonaws.com", "*.amazonaws.com.cn", "*.api.aws")
GITHUB_HOSTS = ("github.com", "*.github.com", "*.githubusercontent.com")
#: Well-known token variables and the hosts they belong to.
TOKEN_VARIABLES: dict[str, tuple[str, ...]] = {
    "GITHUB_TOKEN": GITHUB_HOSTS,
    "GH_TOKEN": GITHUB_HOSTS,
    "GITLAB_TOKEN": ("gitlab.com",),
    "GITLAB_PRIVATE_TOKEN": ("gitlab.com",),
}
AWS_KEYS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")


@dataclass
class Credential:
    """One brokered credential: ``kind`` is ``aws`` (values: the three ``AWS_KEYS``) or
    ``token`` (values: ``{"token": ...}``, a bearer token or a password)."""

    kind: str
    name: str
    values: dict[str, str]
    hosts: list[str] = field(default_factory=list)


#: Variables :func:`from_env` reads (besides ``TF_TOKEN_*`` and ``AWS_ENDPOINT_URL*``).
WATCHED_VARIABLES = frozenset(
    {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", *TOKEN_VARIABLES}
)


def terraform_token_host(variable: str) -> str:
    """The host of a ``TF_TOKEN_`` variable (``TF_TOKEN_app_terraform_io``)."""
    encoded = variable[len("TF_TOKEN_") :]
    return encoded.replace("__", "\0").replace("_", ".").replace("\0", "-").lower()


def endpoint_hosts(env: Mapping[str, str]) -> list[str]:
    """``host:port`` of every ``AWS_ENDPOINT_URL*`` (an explicit AWS endpoint)."""
    hosts = []
    for name, value in sorted(env.items()):
        if name == "AWS_ENDPOINT_URL" or name.startswith("AWS_ENDPOINT_URL_"):
            parts = urlsplit(value.strip())
            if parts.hostname:
                port = parts.port or (443 if parts.scheme == "https" else 80)
                hosts.append(f"{parts.hostname}:{port}")
    return hosts


def from_env(env: Mapping[str, str], aws_hosts: list[str]) -> list[Credential]:
    """The brokerable credentials among the variables ``env``."""
    found = []
    key_id, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key_id and secret:
        values = {"aws_access_key_id": key_id, "aws_secret_access_key": secret}
        if env.get("AWS_SESSION_TOKEN"):
            values["aws_session_token"] = env["AWS_SESSION_TOKEN"]
        found.append(Credential("aws", "AWS_ACCESS_KEY_ID", values, list(aws_hosts)))
    for name, value in sorted(env.items()):
        if not value:
            continue
        if name.startswith("TF_TOKEN_") and len(name) > len("TF_TOKEN_"):
            host = terraform_token_host(name)
            found.append(Credential("token", name, {"token": value}, [host]))
        elif name in TOKEN_VARIABLES:
            found.append(Credential("token", name, {"token": value}, list(TOKEN_VARIABLES[name])))
    return found


def aws_profiles(text: str, aws_hosts: list[str], config: bool = False) -> list[Credential]:
    """Static keys of the profiles of an AWS credentials (or ``config``) file."""
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    found = []
    for section in parser.sections():
        keys = [k for k in AWS_KEYS if parser.has_option(section, k)]
        values = {k: parser.get(section, k).strip() for k in keys}
        if values.get("aws_access_key_id") and values.get("aws_secret_access_key"):
            profile = section.removeprefix("profile ") if config else section
            found.append(Credential("aws", f"aws profile {profile}", values, list(aws_hosts)))
    return found


def git_credentials(text: str) -> list[Credential]:
    """Passwords of a ``~/.git-credentials`` file (one URL a line)."""
    found = []
    for line in text.splitlines():
        parts = urlsplit(line.strip())
        if parts.hostname and parts.password:
            host = parts.hostname + (f":{parts.port}" if parts.port else "")
            token = unquote(parts.password)
            name = f"git credentials for {host}"
            found.append(Credential("token", name, {"token": token}, [host]))
    return found


_NETRC_WORD = re.compile(r"\S+")


def netrc(text: str) -> list[Credential]:
    """Passwords of a ``.netrc`` file (``machine H login U password P``)."""
    words = _NETRC_WORD.findall(text)
    found, machine = [], None
    for index, word in enumerate(words[:-1]):
        if word == "machine":
            machine = words[index + 1]
        elif word == "default":
            machine = None  # a password for every host cannot be bound to one
        elif word == "password" and machine:
            found.append(
                Credential("token", f"netrc {machine}", {"token": words[index + 1]}, [machine])
            )
    return found


def terraform_credentials(text: str) -> list[Credential]:
    """Tokens of ``credentials.tfrc.json`` (``{"credentials": {host: {"token": ...}}}``)."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    found = []
    entries = data.get("credentials") if isinstance(data, dict) else None
    for host, entry in (entries or {}).items():
        token = entry.get("token") if isinstance(entry, dict) else None
        if isinstance(token, str) and token:
            found.append(Credential("token", f"terraform {host}", {"token": token}, [host]))
    return found
