"""The Anthropic SDK clients models use: one per provider configuration and event loop.

Building an ``AsyncAnthropic`` costs 20-35 ms (TLS context, certificate store) and about
0.9 MB, so every model (and so every session) of a process shares the client of its
configuration: provider, constructor arguments and the environment the SDK reads
(credentials, endpoints, proxies, CA bundles). A client's pooled connections belong to
the event loop that opened them, so loops never share one. :func:`prepare_client`
builds the default client ahead of time (in a background thread at start-up).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import weakref
from collections.abc import Callable
from typing import Any

import anthropic

from iac_kernel.models.credentials import provider_from_env
from iac_kernel.redact import redact

_SECRET_ARG = re.compile(r"key|token|secret|credential", re.IGNORECASE)


def build_client(provider: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Construct an SDK client; configuration problems become a readable ValueError."""
    try:
        return factory(**kwargs)
    except (ValueError, TypeError, anthropic.AnthropicError) as exc:
        message = redact(str(exc))
        for name, value in kwargs.items():
            if isinstance(value, str) and len(value) >= 4 and _SECRET_ARG.search(name):
                message = message.replace(value, f"[REDACTED:{name}]")
        raise ValueError(f"cannot set up the {provider} client: {message}") from None


# --- shared clients ------------------------------------------------------------------------

#: Environment the SDK clients read when built (credentials, endpoints, proxies, CAs).
_CLIENT_ENV = ("ANTHROPIC_", "AWS_", "CLOUD_ML_", "GOOGLE_", "SSL_CERT_", "REQUESTS_CA_")
_PROXY_ENV = frozenset(
    {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy"}
    | {"all_proxy", "no_proxy"}
)
FACTORIES = {
    "anthropic": "AsyncAnthropic",
    "bedrock": "AsyncAnthropicBedrock",
    "vertex": "AsyncAnthropicVertex",
}
_shared_lock = threading.Lock()
#: Clients by event loop, then by configuration: a client's pooled connections belong
#: to the loop that opened them, so loops never share one.
_shared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]] = (
    weakref.WeakKeyDictionary()
)
#: Clients built ahead of time outside any loop (:func:`prepare_client`), unused so far:
#: the first loop that asks for the configuration takes it.
_unbound: dict[tuple[Any, ...], Any] = {}


def shared_client(provider: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """The SDK client for this provider configuration, shared by every model (and so
    every session) of the running event loop; built on first use. Building one costs
    20-35 ms (TLS context, certificate store) and ~0.9 MB.

    Outside a running loop, or with unhashable options, a new client is built."""
    key = _client_key(provider, factory, kwargs)
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if key is None or loop is None:
        return build_client(provider, factory, kwargs)
    with _shared_lock:
        pool = _shared.setdefault(loop, {})
        client = pool.get(key) or _unbound.pop(key, None)
        if client is None:
            client = build_client(provider, factory, kwargs)
        pool[key] = client
        return client


def prepare_client(provider: str | None = None, **client_kwargs: Any) -> None:
    """Build the client :func:`create_anthropic_model` will use with these arguments
    now (e.g. in a background thread at start), so the first prompt does not pay."""
    chosen = (provider or provider_from_env()).strip().lower()
    if chosen not in FACTORIES:
        return
    client_kwargs["max_retries"] = 0
    factory = getattr(anthropic, FACTORIES[chosen])
    key = _client_key(chosen, factory, client_kwargs)
    if key is None:
        return
    # Built under the lock: a session asking meanwhile waits for this client instead of
    # building a second one.
    with _shared_lock:
        if key not in _unbound:
            _unbound[key] = build_client(chosen, factory, client_kwargs)


def _client_key(provider: str, factory: Any, kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    env = tuple(
        sorted(
            (name, value)
            for name, value in os.environ.items()
            if name.startswith(_CLIENT_ENV) or name in _PROXY_ENV
        )
    )
    key = (provider, factory, tuple(sorted(kwargs.items())), env)
    try:
        hash(key)
    except TypeError:
        return None
    return key
