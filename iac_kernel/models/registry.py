"""Pick the model for a session from its settings, and check that a model id exists.

Valid ids: ``scripted`` (the packaged script or the ``script`` setting),
``scripted:PATH`` naming a script file that exists, and known Claude models: the ids in
:data:`KNOWN_CLAUDE_MODELS` (optionally with a ``-YYYYMMDD`` date, ``@YYYYMMDD`` on
Vertex, the Bedrock form ``[region.]anthropic.ID[-DATE]-vN:M``, or the ``[1m]``
long-context suffix) and whatever ``ANTHROPIC_MODEL`` names; ``PROVIDER:MODEL`` for any
provider of :mod:`iac_kernel.models.providers` (``deepseek:deepseek-flash``,
``ollama:llama3.2:3b``), and a bare id of any other name when the active provider takes
any id (the OpenAI-compatible ones, Messages-compatible profiles, an
``ANTHROPIC_BASE_URL`` gateway). Anything else is refused with a message that lists the
choices, before a session switches to it. Sessions store :func:`canonical_id`, so a
resumed session reaches the same provider whatever the environment says then.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from iac_kernel.models import endpoint_models
from iac_kernel.models.base import Model, ModelError
from iac_kernel.models.credentials import has_anthropic_credentials, provider_from_env
from iac_kernel.models.providers import ANTHROPIC_FAMILY, PROVIDERS, has_key, known_active_provider
from iac_kernel.models.scripted import SCRIPTED_MODEL_ID, Script, ScriptedModel

DEFAULT_ANTHROPIC_MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-6")
#: Models offered in pickers (ACP config option, ``%model``).
ANTHROPIC_MODELS = ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5"]
#: Every Claude model id accepted (the pickers show :data:`ANTHROPIC_MODELS`).
KNOWN_CLAUDE_MODELS = frozenset(
    {
        *ANTHROPIC_MODELS,
        "claude-opus-4-7",
        "claude-opus-4-5",
        "claude-opus-4-1",
        "claude-opus-4",
        "claude-opus-4-0",
        "claude-sonnet-4-5",
        "claude-sonnet-4",
        "claude-sonnet-4-0",
        "claude-3-7-sonnet",
        "claude-3-5-haiku",
        "claude-haiku-4",
    }
)
_DATED = re.compile(r"^(?P<base>.+?)(?:[-@]\d{8})?$")
_BEDROCK = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.(?P<id>.+?)(?:-v\d+(?::\d+)?)?$")


def anthropic_available() -> bool:
    """Whether Claude itself can be reached (a Messages-compatible profile is not Claude)."""
    active = known_active_provider()
    if (
        active is not None
        and active not in ANTHROPIC_FAMILY
        and PROVIDERS[active].kind == "anthropic"
    ):
        return has_key(PROVIDERS["anthropic"])
    return has_anthropic_credentials()


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
            if anthropic_available():
                ids += ANTHROPIC_MODELS
            continue
        provider = PROVIDERS[name]
        if name != active and not _has_own_key(name):
            continue
        # Only the provider in use is asked for its list: one the user did not pick is
        # never contacted (its key would go out with the request).
        listed = endpoint_models.cached(name) if name == active else []
        offered = [*provider.models, *listed]
        chosen = os.environ.get("IAC_KERNEL_MODEL", "").strip()
        found = _resolve(chosen) if chosen and name == active else None
        if found is not None and found[0] == name:
            offered.insert(0, found[1])
        ids += [f"{name}:{m}" for m in dict.fromkeys(offered)]
    if active is not None and active not in ANTHROPIC_FAMILY and anthropic_available():
        ids += ANTHROPIC_MODELS
    ids = list(dict.fromkeys(ids))
    return [*ids, SCRIPTED_MODEL_ID] if ids else [SCRIPTED_MODEL_ID, *ANTHROPIC_MODELS]


def _has_own_key(name: str) -> bool:
    key_env = PROVIDERS[name].key_env
    return bool(key_env and os.environ.get(key_env))


def _any_id_provider() -> str | None:
    """The active provider if it takes any model id (not only Claude's)."""
    active = known_active_provider()
    if active is None:
        return None
    if active not in ANTHROPIC_FAMILY:
        return active
    if active == "anthropic" and os.environ.get("ANTHROPIC_BASE_URL"):
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
    if name.lower().endswith("[1m]"):
        name = name[:-4]
    if name == DEFAULT_ANTHROPIC_MODEL:
        return True
    bedrock = _BEDROCK.match(name)
    if bedrock:
        name = bedrock.group("id")
    match = _DATED.match(name)
    return bool(match) and match.group("base") in KNOWN_CLAUDE_MODELS


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
    provider, the OpenAI-compatible providers to :mod:`iac_kernel.models.openai_model`.
    """
    check_model_id(model_id, script)
    provider, model = resolve(model_id)
    if provider == SCRIPTED_MODEL_ID:
        inline = model.partition(":")[2] or None
        return ScriptedModel(Script.load(inline or script))
    if PROVIDERS[provider].kind == "openai":
        from iac_kernel.models.openai_model import create_openai_model

        return create_openai_model(provider, model)
    from iac_kernel.models.anthropic import create_anthropic_model

    if provider in ANTHROPIC_FAMILY:
        return create_anthropic_model(model, provider=provider)
    return create_anthropic_model(model, profile=provider)
