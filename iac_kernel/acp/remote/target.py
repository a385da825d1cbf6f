"""Where ``iac-kernel acp --remote URL`` connects, with what, and why it could not.

The URL is a Jupyter server's (or a JupyterHub user server's) ACP endpoint, e.g.
``wss://hub.example.org/user/NAME/iac-kernel/acp``; ``https://`` means ``wss://``.
The token comes from ``IAC_KERNEL_REMOTE_TOKEN`` (else ``JUPYTERHUB_API_TOKEN``) and
goes only in the ``Authorization`` header: a URL carrying credentials is refused, so a
token never lands in argv, shell history or an editor's settings file. Plain ``ws://``
is refused for hosts other than loopback unless allowed explicitly (TLS is expected).
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

TOKEN_VARS = ("IAC_KERNEL_REMOTE_TOKEN", "JUPYTERHUB_API_TOKEN")
#: Query parameters Jupyter servers and JupyterHub take a bearer token from.
TOKEN_PARAMS = frozenset({"token", "access_token"})
#: Query parameters that carry credentials in Jupyter URLs.
SECRET_PARAMS = TOKEN_PARAMS | {"_xsrf"}
#: Hang guard for opening the connection (not a timing assertion).
CONNECT_TIMEOUT = 20.0
#: Largest message accepted from the server (as the line transport's limit).
MAX_MESSAGE = 64 * 1024 * 1024
#: Keep-alive pings, so a dead network path is noticed and the bridge reconnects.
PING_INTERVAL = 20.0


class RemoteError(RuntimeError):
    """A one-line reason the remote endpoint cannot be used (no secrets in it)."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        #: Retrying cannot help (refused token, bad URL).
        self.final = final


@dataclass(frozen=True)
class Target:
    """A checked endpoint URL and the token to present."""

    url: str
    token: str | None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def target(url: str, *, allow_insecure: bool = False, env: Any = None) -> Target:
    """Check ``url`` and pick the token from the environment; raises RemoteError."""
    env = os.environ if env is None else env
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError as exc:
        raise RemoteError(f"invalid --remote URL: {exc}", final=True) from None
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss") or not parts.hostname:
        raise RemoteError(
            "--remote needs a wss:// (or https://) URL such as "
            "wss://hub.example.org/user/NAME/iac-kernel/acp",
            final=True,
        )
    if (
        parts.username
        or parts.password
        or any(
            key.lower() in SECRET_PARAMS
            for key, _ in parse_qsl(parts.query, keep_blank_values=True)
        )
    ):
        raise RemoteError(
            "the --remote URL must not carry credentials; set IAC_KERNEL_REMOTE_TOKEN instead",
            final=True,
        )
    if scheme == "ws" and not allow_insecure and not is_loopback(parts.hostname):
        raise RemoteError(
            f"refusing unencrypted ws:// to {parts.hostname}: use wss:// "
            "(or --allow-insecure on a network you trust)",
            final=True,
        )
    token = next((env[name] for name in TOKEN_VARS if env.get(name)), None)
    return Target(urlunsplit((scheme, parts.netloc, parts.path, parts.query, "")), token)


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def connect(where: Target, extra: dict[str, str] | None = None) -> Any:
    """An open ``WebSocketClientConnection`` to ``where`` (``extra`` headers added; the
    server's answer headers are its ``headers``); raises RemoteError."""
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.websocket import websocket_connect

    request = HTTPRequest(
        where.url,
        headers={**where.headers(), **(extra or {})},
        connect_timeout=CONNECT_TIMEOUT,
        request_timeout=CONNECT_TIMEOUT,
        follow_redirects=False,
    )
    try:
        return await websocket_connect(
            request, max_message_size=MAX_MESSAGE, ping_interval=PING_INTERVAL
        )
    except HTTPClientError as exc:
        raise _refused(where, exc.code) from None
    except ssl.SSLCertVerificationError as exc:
        raise RemoteError(
            f"TLS failed with {_host(where)}: {exc.verify_message or exc.reason} "
            "(SSL_CERT_FILE names the CA to trust for a private certificate)"
        ) from None
    except ssl.SSLError as exc:
        raise RemoteError(f"TLS failed with {_host(where)}: {exc.reason or exc}") from None
    except (OSError, TimeoutError) as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise RemoteError(f"cannot reach {_host(where)}: {reason}") from None


def _refused(where: Target, code: int) -> RemoteError:
    host = _host(where)
    if code in (401, 403):
        why = "no token set (IAC_KERNEL_REMOTE_TOKEN)" if not where.token else "token refused"
        return RemoteError(f"{host} refused the connection ({code}): {why}", final=True)
    if code == 404:
        return RemoteError(
            f"{host} has no iac-kernel endpoint at this path (404): is iac-kernel "
            "installed in that server's environment?",
            final=True,
        )
    if code in (301, 302, 303, 307, 308):
        return RemoteError(
            f"{host} redirected the connection ({code}): is the user's server running?"
        )
    return RemoteError(f"{host} answered HTTP {code} instead of a WebSocket")


def _host(where: Target) -> str:
    parts = urlsplit(where.url)
    return parts.netloc
