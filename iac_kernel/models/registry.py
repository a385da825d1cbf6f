"""Which model a session uses: the ids that exist, the pickers' lists, building the model.

Valid ids: ``scripted`` and ``scripted:PATH`` (a script file that exists); a known
Claude model in any provider's spelling (or whatever ``ANTHROPIC_MODEL`` names);
``PROVIDER:MODEL`` for any provider (``ollama:llama3.2:3b``); and a bare id of another
name when the active provider takes any id (the OpenAI-compatible ones, Messages-compatible
profiles, an ``ANTHROPIC_BASE_URL`` gateway). Anything else is refused with the choices
before a session switches to it. Sessions store :func:`canonical_id`, so a resumed
session reaches the same provider whatever the environment says then.

Pickers answer at once: what the active OpenAI-compatible endpoint lists at ``/models``
is fetched in the background, and a provider the user did not pick is never contacted.
The active provider's SDK is imported (and Anthropic's client built) ahead of time.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from iac_kernel.models.base import Model, ModelError
from iac_kernel.models.providers import (
    ANTHROPIC_FAMILY,
    CLAUDE_PRICES,
    PROVIDERS,
    api_key,
    base_url,
    canonical_model,
    claude_available,
    has_key,
    known_active_provider,
    provider_from_env,
)
from iac_kernel.models.scripted import SCRIPTED_MODEL_ID, Script, ScriptedModel

log = logging.getLogger(__name__)

#: Models offered in pickers (ACP config option, ``%model``).
ANTHROPIC_MODELS = list(PROVIDERS["anthropic"].models)
DEFAULT_ANTHROPIC_MODEL = os.environ.get("ANTHROPIC_MODEL", ANTHROPIC_MODELS[0])
#: Seconds a background listing of an endpoint's models may take, and how many it offers.
LIST_TIMEOUT, LIST_LIMIT = 5.0, 50


def default_model_id() -> str:
    """The active provider's default model (Claude for the Anthropic family), else the
    offline scripted model."""
    active = known_active_provider()
    if active is None:
        return SCRIPTED_MODEL_ID
    if active in ANTHROPIC_FAMILY:
        return DEFAULT_ANTHROPIC_MODEL
    return f"{active}:{PROVIDERS[active].models[0]}"


def available_models() -> list[str]:
    """The ids a user can pick from: the active provider's first (its settings' ids, then
    what its endpoint lists), other providers with credentials (their preset ids: only
    the active provider's endpoint is asked), the scripted model."""
    active = known_active_provider()
    ids: list[str] = []
    names = [active] if active else []
    names += [n for n in PROVIDERS if n != active and n not in ANTHROPIC_FAMILY]
    for name in names:
        if name in ANTHROPIC_FAMILY:
            if claude_available():
                ids += ANTHROPIC_MODELS
            continue
        provider = PROVIDERS[name]
        if name != active and not (provider.keys and has_key(provider)):
            continue
        # Only the provider in use is asked for its list: one the user did not pick is
        # never contacted (its key would go out with the request).
        listed = listed_models(name) if name == active else []
        offered = [*provider.models, *listed]
        chosen = os.environ.get("IAC_KERNEL_MODEL", "").strip()
        found = _resolve(chosen) if chosen and name == active else None
        if found is not None and found[0] == name:
            offered.insert(0, found[1])
        ids += [f"{name}:{m}" for m in dict.fromkeys(offered)]
    if active is not None and active not in ANTHROPIC_FAMILY and claude_available():
        ids += ANTHROPIC_MODELS
    ids = list(dict.fromkeys(ids))
    return [*ids, SCRIPTED_MODEL_ID] if ids else [SCRIPTED_MODEL_ID, *ANTHROPIC_MODELS]


def _any_id_provider() -> str | None:
    """The active provider if it takes any model id (not only Claude's)."""
    active = known_active_provider()
    if active is None:
        return None
    if active not in ANTHROPIC_FAMILY:
        return active
    if active == "anthropic" and os.environ.get(PROVIDERS["anthropic"].url_env or ""):
        return active  # a gateway or a Messages-compatible backend
    return None


def resolve(model_id: str) -> tuple[str, str]:
    """(provider, id sent to it) for a model id; ``("scripted", id)`` for scripts.

    Raises :class:`ModelError` listing the choices when nothing takes the id.
    """
    found = _resolve(model_id)
    if found is None:
        raise ModelError(_unknown(repr(model_id)))
    return found


def _resolve(model_id: str) -> tuple[str, str] | None:
    """:func:`resolve` without the error (the error lists the choices, built from this)."""
    name = model_id.strip()
    if name == SCRIPTED_MODEL_ID or name.startswith(SCRIPTED_MODEL_ID + ":"):
        return SCRIPTED_MODEL_ID, name
    prefix, sep, rest = name.partition(":")
    if sep and prefix.lower() in PROVIDERS and rest.strip():
        provider = prefix.lower()
        if provider in ANTHROPIC_FAMILY and not (
            is_known_claude_model(rest) or _any_id_provider() == provider
        ):
            return None
        return provider, rest.strip()
    if is_known_claude_model(name):
        return _family(), name
    anywhere = _any_id_provider()
    return (anywhere, name) if anywhere is not None and name else None


def _family() -> str:
    try:
        return provider_from_env()
    except ValueError:
        return "anthropic"


def canonical_id(model_id: str) -> str:
    """The id a session stores: Claude ids on the Anthropic family and scripts as given,
    anything else as ``provider:model`` so it means the same after a restart."""
    provider, model = resolve(model_id)
    if provider == SCRIPTED_MODEL_ID:
        return model
    if provider in ANTHROPIC_FAMILY and is_known_claude_model(model):
        return model
    return f"{provider}:{model}"


def describe(model_id: str) -> tuple[str, str]:
    """(provider, model) to show a user; never raises."""
    try:
        return resolve(model_id)
    except ModelError:
        return "unknown", model_id


def is_known_claude_model(model_id: str) -> bool:
    """True for a known Claude id in any of the providers' spellings."""
    name = model_id.strip()
    return name == DEFAULT_ANTHROPIC_MODEL or canonical_model(name) in CLAUDE_PRICES


def check_model_id(model_id: str, script: str | None = None) -> None:
    """Raise :class:`ModelError` naming the choices unless ``model_id`` can be used."""
    if not isinstance(model_id, str) or not model_id.strip():
        raise ModelError(_unknown(repr(model_id)))
    provider, model = resolve(model_id)
    if provider == SCRIPTED_MODEL_ID and model.startswith(SCRIPTED_MODEL_ID + ":"):
        path = Path(model.partition(":")[2]).expanduser()
        if not path.is_file():
            raise ModelError(f"cannot read script {path}: no such file (model {model_id!r})")


def _unknown(shown: str) -> str:
    choices = ", ".join([*available_models(), f"{SCRIPTED_MODEL_ID}:PATH", "PROVIDER:MODEL"])
    return f"unknown model {shown}; choose one of: {choices}"


def create_model(model_id: str, script: str | None = None) -> Model:
    """Build the provider for ``model_id`` (checked with :func:`check_model_id`).

    ``scripted`` replays ``script`` (or the packaged default); ``scripted:PATH`` names the
    script inline. Claude ids and Messages-compatible profiles go to the Anthropic
    provider, the OpenAI-compatible providers to :mod:`iac_kernel.models.openai`.
    """
    check_model_id(model_id, script)
    provider, model = resolve(model_id)
    if provider == SCRIPTED_MODEL_ID:
        inline = model.partition(":")[2] or None
        return ScriptedModel(Script.load(inline or script))
    if PROVIDERS[provider].kind == "openai":
        from iac_kernel.models.openai import create_openai_model

        return create_openai_model(provider, model)
    from iac_kernel.models.anthropic import create_anthropic_model

    if provider in ANTHROPIC_FAMILY:
        return create_anthropic_model(model, provider=provider)
    return create_anthropic_model(model, profile=provider)


# --- what an endpoint lists ----------------------------------------------------------------

_lock = threading.Lock()
_found: dict[tuple[str, str], list[str]] = {}
_started: set[tuple[str, str]] = set()


def fetch_models(provider: str, timeout: float = LIST_TIMEOUT) -> list[str]:
    """List the endpoint's models now (blocking); [] when it does not answer."""
    import httpx  # only when a listing is wanted: start-up does not pay for it

    spec = PROVIDERS[provider]
    url = base_url(spec) or ""
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
        _found[(provider, url)] = sorted(ids)[:LIST_LIMIT]
    return _found[(provider, url)]


def listed_models(provider: str) -> list[str]:
    """What the endpoint listed so far; starts the listing in the background once."""
    spec = PROVIDERS[provider]
    if spec.kind != "openai" or (api_key(spec) is None and spec.name != "openai"):
        return []  # without its key the endpoint would only refuse
    key = (provider, base_url(spec) or "")
    with _lock:
        if key in _found:
            return list(_found[key])
        if key in _started:
            return []
        _started.add(key)
    threading.Thread(target=fetch_models, args=(provider,), name="list-models", daemon=True).start()
    return []


def forget_listings() -> None:
    """Drop every listing (a changed endpoint; tests)."""
    with _lock:
        _found.clear()
        _started.clear()


# --- switching provider mid-session -------------------------------------------------------


def switch_note(messages: list[dict[str, Any]], provider: str, model_id: str) -> str | None:
    """What a session keeps when it switches ``messages`` to ``provider``, in one line
    (None with no history): text, tool calls and results always go across; Claude's
    signed thinking is valid only for Claude and other providers' reasoning carries no
    signature Claude could check, so those blocks are not sent, and the note says how many."""
    if not messages:
        return None
    calls = signed = unsigned = 0
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                calls += 1
            elif kind == "redacted_thinking" or (kind == "thinking" and block.get("signature")):
                signed += 1
            elif kind == "thinking":
                unsigned += 1
    spec = PROVIDERS.get(provider)
    title = spec.title if spec else provider
    line = (
        f"Switched to {model_id}: the conversation so far ({len(messages)} messages, "
        f"{calls} tool calls with their results) goes with it."
    )
    if spec is None:  # the scripted model replays its script and reads no history
        return line
    if spec.kind == "anthropic":
        dropped = unsigned
        why = "reasoning from another provider carries no signature Claude can verify"
    else:
        dropped = signed + unsigned
        why = f"{title} cannot take Claude's signed thinking"
        if unsigned:
            why = f"{title} gets no earlier turns' thinking"
    if dropped:
        line += f" {dropped} thinking block(s) are not sent ({why}); they stay in the history."
    return line


# --- warming up ----------------------------------------------------------------------------


def warm_anthropic() -> bool:
    """Import the active provider's SDK (and build Anthropic's default client), blocking;
    True if it did."""
    active = known_active_provider()
    openai_kind = active is not None and PROVIDERS[active].kind == "openai"
    if not openai_kind and (not claude_available() or active not in (None, *ANTHROPIC_FAMILY)):
        return False  # nothing to reach; a Messages-compatible profile builds its own client
    try:
        if openai_kind:
            import iac_kernel.models.openai  # noqa: F401
        else:
            from iac_kernel.models.anthropic import prepare_client

            prepare_client()
    except Exception:  # a bad configuration is reported when a model is built
        log.debug("model warm-up failed", exc_info=True)
        return False
    return True


def start_warm_up() -> threading.Thread | None:
    """:func:`warm_anthropic` in a daemon thread (None without credentials)."""
    if known_active_provider() is None and not claude_available():
        return None
    thread = threading.Thread(target=warm_anthropic, name="anthropic-warm-up", daemon=True)
    thread.start()
    return thread
