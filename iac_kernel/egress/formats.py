"""The credential file formats: each file parsed in full or refused, and rewritten with
placeholders (:data:`FORMATS`, each a :class:`Format`: ``parse`` finds every credential
or raises :class:`Unparsable`; ``rewrite`` puts the placeholders in).

AWS credentials and config, git credentials, ``.netrc``, terraform's
``credentials.tfrc.json`` and CLI configuration, kubeconfigs, docker (and helm registry)
``config.json``, helm ``repositories.yaml``, ``~/.vault-token``, Pulumi's
``credentials.json``, gh's ``hosts.yml``, ``.databrickscfg``. Where each store lives is
:mod:`.stores`; a credential's hosts are :mod:`.credentials`'.
"""

from __future__ import annotations

import base64
import binascii
import configparser
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from iac_kernel.egress.addon_table import AWS_KEYS, host_matches
from iac_kernel.egress.credentials import (
    ADDRESS_TOKENS,
    AWS_HOSTS,
    GITHUB_HOSTS,
    Credential,
    address_host,
    host_pattern,
    url_host,
)
from iac_kernel.egress.secret_check import secret_key, secret_shape

#: The hosts Docker Hub's clients really talk to (its credential's key names the index).
DOCKER_HUB_HOSTS = ("index.docker.io:443", "registry-1.docker.io:443", "auth.docker.io:443")
_DOCKER_HUB_NAMES = {
    "index.docker.io",
    "docker.io",
    "registry-1.docker.io",
    "registry.hub.docker.com",
}
#: Credential files larger than this are not read (their placeholder copy is empty).
MAX_FILE = 1 << 20


class Unparsable(ValueError):
    """A credential file that is not understood in full (the message says why)."""


@dataclass
class Context:
    """What parsing a credential file may need: AWS's hosts, the agent's environment,
    the file's own path (relative paths inside it)."""

    aws_hosts: list[str] = field(default_factory=lambda: list(AWS_HOSTS))
    env: Mapping[str, str] = field(default_factory=dict)
    path: Path | None = None
    #: Read the files a store names (a kubeconfig's ``tokenFile``); off when a
    #: placeholder copy is parsed again to check it.
    follow: bool = True
    #: Host patterns the proxy intercepts (every brokered credential's): a kubeconfig
    #: copy trusts the interception CA for the clusters it names.
    intercepted: list[str] = field(default_factory=list)


@dataclass
class Parsed:
    """A credential file understood in full."""

    found: list[Credential] = field(default_factory=list)
    #: Secret values the file keeps as they are by design (a kubeconfig's client keys).
    kept: list[str] = field(default_factory=list)
    #: Other files it names that hold a credential (a kubeconfig's ``tokenFile``): path
    #: -> the file's text, or None when it cannot be read (its copy is then empty).
    files: dict[Path, str | None] = field(default_factory=dict)
    #: Files it names that stay as they are by design (a kubeconfig's client keys and
    #: certificates, its clusters' CAs).
    given: list[Path] = field(default_factory=list)
    #: One line each: what was found and not brokered (an entry with no host).
    notes: list[str] = field(default_factory=list)
    #: Not a file of this format at all (a certificate beside the kubeconfigs in
    #: ``~/.kube``): left as it is unless it holds a secret-shaped value.
    foreign: bool = False


@dataclass(frozen=True)
class Format:
    """A credential file format: ``parse(text, context)`` (raises :class:`Unparsable`),
    ``rewrite(text, swaps, context)`` (the text with each real value of ``swaps`` replaced
    by its placeholder) and what an empty placeholder copy holds."""

    name: str
    parse: Callable[[str, Context], Parsed]
    rewrite: Callable[[str, Mapping[str, str], Context], str]
    empty: str = ""


def _never(name: str, value: str) -> Credential:
    """A value that cannot be tied to a host: a placeholder that is never swapped."""
    return Credential("token", name, {"token": value}, [])


def _ini(text: str) -> configparser.RawConfigParser:
    # No DEFAULT section (its keys would be inherited by every profile and listed in
    # none), duplicates refused.
    parser = configparser.RawConfigParser(default_section="\0", strict=True)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise Unparsable(f"not an INI file ({_where(exc)})") from None
    return parser


_INI_LINE = re.compile(r"^(\s*[^\s#;\[][^=:]*?\s*[=:]\s*)(.*?)(\s*)$")


def _rewrite_ini(text: str, swaps: Mapping[str, str], _context: Context) -> str:
    """Every ``key = value`` line whose value is a real one gets its placeholder."""
    lines = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        found = _INI_LINE.match(body)
        if found and found.group(2) in swaps:
            body = found.group(1) + swaps[found.group(2)] + found.group(3)
        lines.append(body + line[len(line.rstrip("\r\n")) :])
    return "".join(lines)


def aws_profiles(text: str, context: Context, config: bool = False) -> Parsed:
    """Static keys of the profiles of an AWS credentials (or ``config``) file; an AWS key
    that is not part of a whole pair gets a placeholder that is never swapped."""
    parser = _ini(text)
    parsed = Parsed()
    for section in parser.sections():
        profile = section.removeprefix("profile ") if config else section
        values = {}
        for option in AWS_KEYS:
            if parser.has_option(section, option) and parser.get(section, option).strip():
                values[option] = parser.get(section, option).strip()
        legacy = parser.get(section, "aws_security_token", fallback="").strip()
        if legacy and "aws_session_token" not in values:
            values["aws_session_token"] = legacy
        elif legacy:
            parsed.found.append(_never(f"aws profile {profile} aws_security_token", legacy))
        if values.get("aws_access_key_id") and values.get("aws_secret_access_key"):
            name = f"aws profile {profile}"
            parsed.found.append(Credential("aws", name, values, list(context.aws_hosts)))
        elif values:
            parsed.notes.append(f"aws profile {profile}: no whole key pair, never swapped")
            for option, value in values.items():
                parsed.found.append(_never(f"aws profile {profile} {option}", value))
    return parsed


def git_credentials(text: str, _context: Context | None = None) -> Parsed:
    """Passwords of a git credential store (one ``scheme://user:password@host`` URL a
    line; a line that is not such a URL makes the file unparsable). A username shaped
    like a token is brokered too."""
    parsed = Parsed()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        url = line.strip()
        try:
            parts = urlsplit(url)
            hostname, port = parts.hostname, parts.port
        except ValueError:
            raise Unparsable(f"line {number} is not a URL") from None
        if not parts.scheme or not hostname or "://" not in url:
            raise Unparsable(f"line {number} is not a URL")
        if "%" in hostname:  # git's store helper writes a port as host%3aport
            hostname = unquote(hostname)
            name, _, written = hostname.rpartition(":")
            if name and written.isdigit():
                hostname, port = name, int(written)
        host = host_pattern(hostname, port)
        where = host or hostname
        if parts.password:
            _bound(parsed, f"git credentials for {where}", unquote(parts.password), host)
        if parts.username and secret_shape(unquote(parts.username)):
            _bound(parsed, f"git credentials user for {where}", unquote(parts.username), host)
    return parsed


def _rewrite_git_credentials(text: str, swaps: Mapping[str, str], _context: Context) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        url = line.strip()
        scheme, sep, rest = url.partition("://")
        netloc, slash, path = rest.partition("/")
        userinfo, at, hostport = netloc.rpartition("@")
        if sep and at:
            user, colon, password = userinfo.partition(":")
            user = quote(swaps.get(unquote(user), unquote(user)), safe="") if user else user
            if colon:
                password = quote(swaps.get(unquote(password), unquote(password)), safe="")
            url = f"{scheme}://{user}{colon}{password}@{hostport}{slash}{path}"
        lines.append(url + ("\n" if line.endswith("\n") else ""))
    return "".join(lines)


@dataclass
class _Word:
    text: str
    start: int
    end: int


def _netrc_words(text: str) -> Iterator[_Word]:
    """The words of a ``.netrc`` as curl and Python read them: blank-separated, ``"..."``
    quoted with ``\\`` escapes, a line starting with ``#`` a comment; a ``macdef``
    body (from the line after its name to the next empty line) is skipped. Anything
    these readers could take two ways (a word starting with ``#`` mid-line, a quote
    inside a word) makes the file unparsable."""
    index, size, line_start, macro = 0, len(text), True, False
    while index < size:
        char = text[index]
        if char == "\n":
            index, line_start = index + 1, True
            if macro:  # skip the body: to the next empty line
                found = text.find("\n\n", index - 1)
                index, macro = (size if found < 0 else found + 2), False
            continue
        if char.isspace():
            index += 1
            continue
        if char == "#":
            if not line_start:
                raise Unparsable("a word starting with # after a keyword")
            found = text.find("\n", index)
            index = size if found < 0 else found
            continue
        line_start = False
        start = index
        if char == '"':
            index, word = index + 1, []
            while index < size and text[index] != '"':
                if text[index] == "\\" and index + 1 < size:
                    index += 1
                word.append(text[index])
                index += 1
            if index >= size:
                raise Unparsable("an unclosed quote")
            index += 1
            value = "".join(word)
        else:
            while index < size and not text[index].isspace():
                if text[index] in '"\\':
                    raise Unparsable("a quote or backslash inside a word")
                index += 1
            value = text[start:index]
        yield _Word(value, start, index)
        if value == "macdef" and text[start] != '"':
            macro = True


def _netrc_entries(text: str) -> Iterator[tuple[str | None, str, _Word]]:
    """(machine or None for ``default``, keyword, value word) of every value."""
    words = list(_netrc_words(text))
    machine: str | None = None
    started = False
    index = 0
    while index < len(words):
        word = words[index].text
        if word == "default":
            machine, started = None, True
            index += 1
            continue
        if word not in ("machine", "login", "password", "account", "macdef"):
            raise Unparsable("a word that is no keyword where one belongs")
        if index + 1 >= len(words):
            raise Unparsable(f"{word} without a value")
        value = words[index + 1]
        if word == "machine":
            machine, started = value.text, True
        elif word != "macdef":
            if not started:
                raise Unparsable(f"{word} before any machine")
            yield machine, word, value
        index += 2


def netrc(text: str, _context: Context | None = None) -> Parsed:
    """Passwords (and accounts, and logins shaped like a token) of a ``.netrc``: bound to
    their machine; the ``default`` entry's (a password for every host) and a machine
    that is no plain host name get placeholders that are never swapped."""
    parsed = Parsed()
    for machine, keyword, value in _netrc_entries(text):
        host = host_pattern(machine) if machine is not None else None
        where = machine if machine is not None else "default"
        secret = keyword in ("password", "account") or secret_shape(value.text)
        if not secret:
            continue
        hosts = [host] if host and keyword != "account" else []
        name = f"netrc {where}" + ("" if keyword == "password" else f" {keyword}")
        parsed.found.append(Credential("token", name, {"token": value.text}, hosts))
        if not hosts:
            parsed.notes.append(f"{name}: never swapped")
    return parsed


def _rewrite_netrc(text: str, swaps: Mapping[str, str], _context: Context) -> str:
    pieces, last = [], 0
    for _machine, _keyword, value in _netrc_entries(text):
        if value.text in swaps:
            fake = swaps[value.text]
            if any(c.isspace() or c in '"\\#' for c in fake):  # one word again
                fake = '"' + fake.replace("\\", "\\\\").replace('"', '\\"') + '"'
            pieces += [text[last : value.start], fake]
            last = value.end
    return "".join(pieces) + text[last:]


def _where(exc: BaseException) -> str:
    """Where a parser failed (its error's kind and line): never the library's message,
    which may quote the text (a secret) it choked on."""
    mark = getattr(exc, "problem_mark", None)  # PyYAML
    line = getattr(exc, "lineno", None) or getattr(exc, "line", None)
    line = mark.line + 1 if mark is not None else line
    return type(exc).__name__ + (f", line {line}" if isinstance(line, int) else "")


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError) as exc:
        raise Unparsable(f"not JSON ({_where(exc)})") from None


def _yaml(text: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise Unparsable("PyYAML is not installed") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # a safe loader
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise Unparsable(f"not YAML ({_where(exc)})") from None


def _dump_yaml(data: Any) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False)


#: The most nodes a JSON or YAML credential file may have (aliases can multiply them).
_MAX_NODES = 100_000


def _swapped(data: Any, swaps: Mapping[str, str], budget: list[int] | None = None) -> Any:
    """``data`` with every string (keys too) that is a real value replaced."""
    budget = [_MAX_NODES] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        raise Unparsable("too many nodes")
    if isinstance(data, str):
        return swaps.get(data, data)
    if isinstance(data, dict):
        return {_swapped(k, swaps, budget): _swapped(v, swaps, budget) for k, v in data.items()}
    if isinstance(data, list):
        return [_swapped(v, swaps, budget) for v in data]
    return data


def _mapping(value: Any, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Unparsable(f"{what} is not a mapping")
    return value


def _string(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Unparsable(f"{what} is not a string")
    return value


def terraform_credentials(text: str, _context: Context | None = None) -> Parsed:
    """Tokens of ``credentials.tfrc.json`` (``{"credentials": {host: {"token": ...}}}``)."""
    return _terraform_tokens(_mapping(_json(text), "the file").get("credentials"))


def _terraform_tokens(blocks: Any) -> Parsed:
    """The tokens of ``{host: {"token": ...}}`` credentials blocks (one, or HCL's list)."""
    parsed = Parsed()
    for block in blocks if isinstance(blocks, list) else [blocks]:
        for host, entry in _mapping(block, "credentials").items():
            token = _string(_mapping(entry, f"credentials {host}").get("token"), f"{host} token")
            if token:
                _bound(parsed, f"terraform {host}", token, host_pattern(host))
    return parsed


def _bound(parsed: Parsed, name: str, value: str, *hosts: str | None) -> None:
    """Add a token credential for ``hosts`` (those that are None dropped; none left: a
    placeholder that is never swapped, noted)."""
    kept = sorted({h for h in hosts if h})
    parsed.found.append(Credential("token", name, {"token": value}, kept))
    if not kept:
        parsed.notes.append(f"{name}: no host it belongs to, never swapped")


def _rewrite_json(text: str, swaps: Mapping[str, str], _context: Context) -> str:
    return json.dumps(_swapped(_json(text), swaps), indent=2) + "\n"


def _hcl_value(value: Any) -> Any:
    """A python-hcl2 value without the quotes and markers some of its versions keep."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, dict):
        return {_hcl_value(k): _hcl_value(v) for k, v in value.items() if not k.startswith("__")}
    if isinstance(value, list):
        return [_hcl_value(v) for v in value]
    return value


def terraform_cli_config(text: str, _context: Context | None = None) -> Parsed:
    """Tokens of terraform's CLI configuration (``credentials "host" { token = "..." }``)."""
    import hcl2

    try:
        data = _hcl_value(hcl2.loads(text)) if text.strip() else {}
    except Exception as exc:  # python-hcl2 raises lark's errors and others
        raise Unparsable(f"not HCL ({_where(exc)})") from None
    return _terraform_tokens(data.get("credentials"))


def _rewrite_quoted(text: str, swaps: Mapping[str, str], _context: Context) -> str:
    """Every ``"value"`` string literal that is a real value gets its placeholder."""
    return re.sub(r'"([^"\\\n]*)"', lambda m: f'"{swaps.get(m.group(1), m.group(1))}"', text)


def _named(data: dict, key: str, inner: str) -> dict[str, dict]:
    """A kubeconfig list of ``{name, <inner>: {...}}`` as name -> inner mapping."""
    items = data.get(key) or []
    if not isinstance(items, list):
        raise Unparsable(f"{key} is not a list")
    found: dict[str, dict] = {}
    for item in items:
        item = _mapping(item, f"an entry of {key}")
        found[_string(item.get("name"), f"a name in {key}")] = _mapping(item.get(inner), inner)
    return found


#: kubeconfig user fields that carry a bearer credential sent to the API server.
_KUBE_BEARER = ("token",)
#: auth-provider configuration values sent to the API server as a bearer token.
_KUBE_PROVIDER_BEARER = ("access-token", "id-token")


def kubeconfig(text: str, context: Context) -> Parsed:
    """Bearer tokens and basic-auth passwords of a kubeconfig's users, bound to the
    ``server`` (host:port) of every cluster a context pairs the user with (a user no
    context names: never swapped); ``tokenFile`` files likewise; other secret values of
    an ``auth-provider`` or an ``exec`` plugin's environment get placeholders that are
    never swapped. Client certificates and keys are kept (they cannot be brokered:
    TLS client authentication is end to end)."""
    data = _mapping(_yaml(text), "the file")
    parsed = Parsed()
    clusters = _named(data, "clusters", "cluster")
    users = _named(data, "users", "user")
    contexts = _named(data, "contexts", "context")
    servers: dict[str, set[str]] = {}
    for entry in contexts.values():
        cluster = clusters.get(_string(entry.get("cluster"), "context cluster"))
        user = _string(entry.get("user"), "context user")
        server = url_host(_string(cluster.get("server"), "server")) if cluster else None
        if user and server:
            servers.setdefault(user, set()).add(server)
    for name, user in users.items():
        hosts = sorted(servers.get(name, ()))
        label = f"kubeconfig user {name}"
        for key in _KUBE_BEARER:
            value = _string(user.get(key), f"{label} {key}")
            if value:
                _bound(parsed, f"{label} {key}", value, *hosts)
        password = _string(user.get("password"), f"{label} password")
        if password:
            _bound(parsed, f"{label} password", password, *hosts)
        for key in ("client-certificate", "client-key"):
            named = _string(user.get(key), f"{label} {key}")
            if named:
                parsed.given.append(_beside(named, context))
        token_file = _string(user.get("tokenFile"), f"{label} tokenFile")
        if token_file and context.follow:
            path = _beside(token_file, context)
            token, reason = read_text(path)
            parsed.files[path] = token
            if token is not None and token.strip():
                _bound(parsed, f"{label} tokenFile", token.strip(), *hosts)
            elif reason:
                parsed.notes.append(f"{label} tokenFile {path}: {reason}, its copy is empty")
        provider = _mapping(user.get("auth-provider"), f"{label} auth-provider")
        for key, value in _mapping(provider.get("config"), "auth-provider config").items():
            if not isinstance(value, str):
                continue
            if value and key in _KUBE_PROVIDER_BEARER:
                _bound(parsed, f"{label} auth-provider {key}", value, *hosts)
            elif value and (secret_key(key) or secret_shape(value)):
                parsed.found.append(_never(f"{label} auth-provider {key}", value))
        plugin = _mapping(user.get("exec"), f"{label} exec")
        for item in plugin.get("env") or []:
            item = _mapping(item, "exec env")
            value = _string(item.get("value"), "exec env value")
            if value and (secret_key(str(item.get("name", ""))) or secret_shape(value)):
                parsed.found.append(_never(f"{label} exec env {item.get('name')}", value))
        key_data = _string(user.get("client-key-data"), f"{label} client-key-data")
        if key_data:
            parsed.kept.append(key_data)
    for name, cluster in clusters.items():
        named = _string(cluster.get("certificate-authority"), f"cluster {name} CA")
        if named:
            parsed.given.append(_beside(named, context))
    return parsed


def _beside(name: str, context: Context) -> Path:
    """The path a kubeconfig names (relative to the kubeconfig's folder)."""
    path = Path(os.path.expanduser(name))
    if not path.is_absolute() and context.path is not None:
        path = context.path.parent / path
    return path


_KUBECONFIG_KEYS = re.compile(
    r"""(?m)^\s*["']?(clusters|users|contexts|current-context|apiVersion|kind)["']?\s*:"""
)


def maybe_kubeconfig(text: str, context: Context) -> Parsed:
    """A file beside the kubeconfigs in ``~/.kube``: a kubeconfig when it looks like one
    (then parsed in full or refused), else :attr:`Parsed.foreign`."""
    if not _KUBECONFIG_KEYS.search(text):
        return Parsed(foreign=True)
    return kubeconfig(text, context)


def _tls_server(cluster: dict) -> str | None:
    """host:port of a cluster reached over verified TLS (https, verification on)."""
    server = cluster.get("server")
    if not isinstance(server, str) or not server.strip().startswith("https://"):
        return None
    return None if cluster.get("insecure-skip-tls-verify") else url_host(server)


def _rewrite_kubeconfig(text: str, swaps: Mapping[str, str], context: Context) -> str:
    """The copy: real values swapped; a cluster whose server the proxy intercepts loses
    its CA (the client trusts the interception CA through ``SSL_CERT_FILE`` instead)."""
    data = _mapping(_yaml(text), "the file")
    for cluster in _named(data, "clusters", "cluster").values():
        host, _, port = (_tls_server(cluster) or "").rpartition(":")
        if host and any(host_matches(p, host, int(port)) for p in context.intercepted):
            cluster.pop("certificate-authority", None)
            cluster.pop("certificate-authority-data", None)
    return _dump_yaml(_swapped(data, swaps))


def registry_hosts(key: str) -> list[str]:
    """The hosts a docker registry credential (keyed by ``key``) is sent to: Docker
    Hub's key names the index, requests go to its registry and auth hosts."""
    text = key.strip()
    host = url_host(text)
    if host is None:
        return []
    if host.rpartition(":")[0] in _DOCKER_HUB_NAMES:
        return list(DOCKER_HUB_HOSTS)
    return [host]


def _docker_auth(value: str, what: str) -> tuple[str, str]:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise Unparsable(f"{what} auth is not base64 of user:password") from None
    user, colon, password = decoded.partition(":")
    if not colon:
        raise Unparsable(f"{what} auth is not base64 of user:password")
    return user, password


#: docker auths fields: header credentials, and the identity token sent in a body.
_DOCKER_FIELDS = ("password", "registrytoken", "identitytoken")


def docker_config(text: str, _context: Context | None = None) -> Parsed:
    """Credentials of a docker ``config.json`` (also helm's registry config): each
    ``auths`` entry's password (``auth`` is base64 of ``user:password``), registry token
    and identity token, bound to the registry's host (Docker Hub: its registry and auth
    hosts); the identity token is an OAuth refresh token, swapped in a body's
    ``refresh_token`` field. ``credsStore``/``credHelpers`` name programs (not brokered)."""
    data = _mapping(_json(text), "the file")
    parsed = Parsed()
    for key, entry in _mapping(data.get("auths"), "auths").items():
        entry = _mapping(entry, f"auths {key}")
        hosts = registry_hosts(key)
        if not hosts:
            parsed.notes.append(f"docker auths {key[:40]}: no host, never swapped")
        auth = _string(entry.get("auth"), f"{key} auth")
        values = []
        if auth:
            user, password = _docker_auth(auth, key)
            values.append(("password", password))
            if secret_shape(user):
                values.append(("user", user))
        for name in _DOCKER_FIELDS:
            value = _string(entry.get(name), f"{key} {name}")
            if value:
                values.append((name, value))
        for name, value in values:
            body = ["refresh_token"] if name == "identitytoken" else []
            label = f"docker {key} {name}"
            parsed.found.append(Credential("token", label, {"token": value}, list(hosts), body))
    return parsed


def _rewrite_docker(text: str, swaps: Mapping[str, str], _context: Context) -> str:
    data = _mapping(_json(text), "the file")
    for key, entry in _mapping(data.get("auths"), "auths").items():
        entry = _mapping(entry, f"auths {key}")
        auth = _string(entry.get("auth"), "auth")
        if auth:
            user, password = _docker_auth(auth, key)
            plain = f"{swaps.get(user, user)}:{swaps.get(password, password)}"
            entry["auth"] = base64.b64encode(plain.encode()).decode()
    return json.dumps(_swapped(data, swaps), indent=2) + "\n"


def helm_repositories(text: str, _context: Context | None = None) -> Parsed:
    """Passwords of helm's ``repositories.yaml``, bound to each repository URL's host."""
    data = _mapping(_yaml(text), "the file")
    parsed = Parsed()
    repos = data.get("repositories") or []
    if not isinstance(repos, list):
        raise Unparsable("repositories is not a list")
    for repo in repos:
        repo = _mapping(repo, "a repository")
        password = _string(repo.get("password"), "password")
        name = _string(repo.get("name"), "name")
        if password:
            url = _string(repo.get("url"), "url")
            _bound(parsed, f"helm repository {name}", password, url_host(url))
    return parsed


def _rewrite_yaml(text: str, swaps: Mapping[str, str], _context: Context) -> str:
    return _dump_yaml(_swapped(_yaml(text), swaps))


def vault_token(text: str, context: Context) -> Parsed:
    """``~/.vault-token``: one token, bound to ``VAULT_ADDR``'s host (the same as
    ``VAULT_TOKEN``'s); with none it has no host and the file is refused (empty copy)."""
    token = text.strip()
    if not token:
        return Parsed()
    if any(c.isspace() for c in token):
        raise Unparsable("more than one word")
    host = address_host("VAULT_TOKEN", context.env)
    if host is None:
        address = ADDRESS_TOKENS["VAULT_TOKEN"][0]
        raise Unparsable(f"{address} names no http(s) host to bind the token to")
    return Parsed([Credential("token", "vault token", {"token": token}, [host])])


def _rewrite_whole(text: str, swaps: Mapping[str, str], _context: Context) -> str:
    token = text.strip()
    return text.replace(token, swaps[token]) if token in swaps else text


#: Pulumi Cloud's console URL and the API host its CLI talks to.
_PULUMI_HOSTS = {"app.pulumi.com": ("app.pulumi.com:443", "api.pulumi.com:443")}


def pulumi_credentials(text: str, _context: Context | None = None) -> Parsed:
    """Access tokens of Pulumi's ``credentials.json`` (``accessTokens`` and
    ``accounts.*.accessToken``), bound to each backend URL's host."""
    data = _mapping(_json(text), "the file")
    parsed = Parsed()
    tokens = [(url, t) for url, t in _mapping(data.get("accessTokens"), "accessTokens").items()]
    for url, account in _mapping(data.get("accounts"), "accounts").items():
        tokens.append((url, _mapping(account, f"account {url}").get("accessToken")))
    for url, token in tokens:
        token = _string(token, f"{url} token")
        if token:
            host = url_host(url, "https") if url.startswith(("http://", "https://")) else None
            name = host.rpartition(":")[0] if host else ""
            _bound(parsed, f"pulumi {url}", token, *(_PULUMI_HOSTS.get(name) or (host,)))
    return parsed


def gh_hosts(text: str, _context: Context | None = None) -> Parsed:
    """OAuth tokens of gh's ``hosts.yml`` (``HOST: {oauth_token, users: {U: {oauth_token}}}``),
    bound to that host (github.com: GitHub's hosts)."""
    data = _mapping(_yaml(text), "the file")
    parsed = Parsed()
    for host, entry in data.items():
        entry = _mapping(entry, f"host {host}")
        found = [entry.get("oauth_token")]
        for user in _mapping(entry.get("users"), "users").values():
            found.append(_mapping(user, "a user").get("oauth_token"))
        name = str(host)
        hosts = GITHUB_HOSTS if name == "github.com" else (host_pattern(name),)
        for token in found:
            token = _string(token, f"{name} oauth_token")
            if token:
                _bound(parsed, f"gh {name}", token, *hosts)
    return parsed


#: .databrickscfg keys sent to the workspace host in a header.
_DATABRICKS_HEADER = ("token", "password")


def databricks_config(text: str, _context: Context | None = None) -> Parsed:
    """Tokens and passwords of ``.databrickscfg`` profiles, bound to the profile's
    ``host``; other secret values get placeholders that are never swapped."""
    parser = _ini(text)
    parsed = Parsed()
    for section in parser.sections():
        host = url_host(parser.get(section, "host", fallback=""))
        for key, value in parser.items(section):
            value = value.strip()
            if value and key in _DATABRICKS_HEADER:
                _bound(parsed, f"databricks {section} {key}", value, host)
            elif value and (secret_key(key) or secret_shape(value)):
                parsed.found.append(_never(f"databricks {section} {key}", value))
    return parsed


#: Every credential file format the broker reads, by name.
FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("aws-credentials", lambda t, c: aws_profiles(t, c), _rewrite_ini),
        Format("aws-config", lambda t, c: aws_profiles(t, c, config=True), _rewrite_ini),
        Format("git-credentials", git_credentials, _rewrite_git_credentials),
        Format("netrc", netrc, _rewrite_netrc),
        Format("terraform-credentials", terraform_credentials, _rewrite_json, "{}\n"),
        Format("terraform-cli-config", terraform_cli_config, _rewrite_quoted),
        Format("kubeconfig", kubeconfig, _rewrite_kubeconfig),
        Format("kubeconfig?", maybe_kubeconfig, _rewrite_kubeconfig),
        Format("docker-config", docker_config, _rewrite_docker, "{}\n"),
        Format("helm-repositories", helm_repositories, _rewrite_yaml),
        Format("vault-token", vault_token, _rewrite_whole),
        # A file holding one token (a kubeconfig's tokenFile): bound where the file
        # naming it says.
        Format("token-file", lambda text, context: Parsed(), _rewrite_whole),
        Format("pulumi-credentials", pulumi_credentials, _rewrite_json, "{}\n"),
        Format("gh-hosts", gh_hosts, _rewrite_yaml),
        Format("databricks", databricks_config, _rewrite_ini),
    )
}


def read_text(path: Path, limit: int = MAX_FILE) -> tuple[str | None, str | None]:
    """(the text of the regular file at ``path``, None) or (None, why it cannot be
    read: missing, not a regular file, too large, not UTF-8, binary). A FIFO or a
    device never blocks nor is read; symlinks are followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        if info.st_size > limit:
            return None, f"larger than {limit} bytes"
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    finally:
        os.close(fd)
    if len(data) > limit:
        return None, f"larger than {limit} bytes"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    if "\0" in text:
        return None, "binary (a NUL byte)"
    return text, None
