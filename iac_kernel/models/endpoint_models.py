"""The model ids an OpenAI-compatible endpoint lists at ``GET {base_url}/models``.

Pickers must answer at once, so :func:`cached` never waits: the first call starts a
background fetch (one per endpoint and process) and answers what is known so far. An
endpoint that does not answer (or has no such route) simply adds nothing.
"""

from __future__ import annotations

import logging
import threading

from iac_kernel.models.providers import PROVIDERS, api_key, base_url

log = logging.getLogger(__name__)

#: Seconds a background listing may take.
TIMEOUT = 5.0
#: At most this many ids are offered from one endpoint.
LIMIT = 50

_lock = threading.Lock()
_found: dict[tuple[str, str], list[str]] = {}
_started: set[tuple[str, str]] = set()


def fetch(provider: str, timeout: float = TIMEOUT) -> list[str]:
    """List the endpoint's models now (blocking); [] when it does not answer."""
    import httpx  # only when a listing is wanted: start-up does not pay for it

    spec = PROVIDERS[provider]
    url = base_url(spec) or "https://api.openai.com/v1"
    key = api_key(spec)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.get(url.rstrip("/") + "/models", headers=headers, timeout=timeout)
        response.raise_for_status()
        data = response.json().get("data", [])
        ids = [str(item["id"]) for item in data if isinstance(item, dict) and item.get("id")]
    except Exception as exc:  # any failure only means "nothing to add"
        log.debug("listing models of %s failed: %s", provider, type(exc).__name__)
        ids = []
    with _lock:
        _found[(provider, url)] = sorted(ids)[:LIMIT]
    return _found[(provider, url)]


def cached(provider: str) -> list[str]:
    """What the endpoint listed so far; starts the listing in the background once."""
    spec = PROVIDERS[provider]
    if spec.kind != "openai" or (api_key(spec) is None and spec.name != "openai"):
        return []  # without its key the endpoint would only refuse
    key = (provider, base_url(spec) or "https://api.openai.com/v1")
    with _lock:
        if key in _found:
            return list(_found[key])
        if key in _started:
            return []
        _started.add(key)
    threading.Thread(target=fetch, args=(provider,), name="list-models", daemon=True).start()
    return []


def forget() -> None:
    """Drop every listing (tests; a changed endpoint)."""
    with _lock:
        _found.clear()
        _started.clear()
