"""A session's modes, models and config options: as ACP answers show them, and as
requests change them.

The answers of ``session/new``, ``load``, ``fork`` and ``resume`` carry ``modes``,
``configOptions``, ``models`` and our ``_meta``, built here as plain JSON values, as the
SDK serializes its models (``tests/test_acp_startup.py`` validates them with the SDK's
``NewSessionResponse``): ``session/new`` is answered before the SDK is imported. Every
change goes through :class:`~iac_kernel.agent.session.AgentSession`, so it changes
behaviour; a bad id or value is -32602 naming the field.

Config options (``select``, the kind every client supports):

* ``model``: the model id (``scripted``, ``scripted:/path/script.json`` or a Claude id);
* ``mode``: ``default`` (edits and commands ask), ``accept_edits``, ``read_only``, ``bypass``;
* ``max_turn_requests``: model calls per turn before the turn stops with
  ``max_turn_requests``;
* ``max_tokens``: the output token limit of each model call.

The numeric options list common values and accept any positive integer.

On/off settings are ``boolean`` options (schema 1.25), offered only to a client that
declared ``session.configOptions.boolean`` (``booleans=True``); any client may set them:

* ``web_fetch_allow_private``: web_fetch may read localhost and private addresses;
* ``sandbox_network``: bash commands reach the network through the egress proxy (off:
  the setting's ``none``).
"""

from __future__ import annotations

from typing import Any

from iac_kernel.acp.protocol import errors
from iac_kernel.agent.session import AgentSession
from iac_kernel.config import MODES, Settings
from iac_kernel.models.providers import PROVIDERS
from iac_kernel.models.registry import available_models, describe

MODE_INFO = {
    "default": ("Default", "Reads run freely; edits and commands ask first."),
    "accept_edits": ("Accept edits", "File edits run without asking; commands still ask."),
    "read_only": ("Read only", "Only reads and searches; edits and commands are refused."),
    "bypass": (
        "Bypass permissions",
        "Edits and commands run without asking; commands that change real infrastructure "
        "and paths outside the working directory still ask.",
    ),
}
LIMITS = {
    "max_turn_requests": (
        "Max model calls per turn",
        "The turn stops with max_turn_requests after this many model calls.",
        [5, 10, 25, 50, 100],
    ),
    "max_tokens": (
        "Max output tokens",
        "Output token limit of each model call; a longer answer stops with max_tokens.",
        [1024, 4096, 8192, 16384, 32000],
    ),
}
#: config id -> (name, description, the setting's value when on, when off).
BOOLEANS: dict[str, tuple[str, str, Any, Any]] = {
    "web_fetch_allow_private": (
        "Fetch private addresses",
        "web_fetch may read localhost and private-network addresses (off: public only).",
        True,
        False,
    ),
    "sandbox_network": (
        "Network in bash",
        "Bash commands reach the network through the egress proxy (off: no way out; "
        "guarded programs keep the proxy).",
        Settings.sandbox_network,  # the setting's default ("proxy")
        "none",
    ),
}
CONFIG_IDS = ("model", "mode", *LIMITS, *BOOLEANS)


def session_state(session: AgentSession, booleans: bool = False) -> dict[str, Any]:
    """``modes``, ``configOptions`` and ``models`` for session/new, load, fork, resume
    (``booleans``: the client takes ``boolean`` options)."""
    return {
        "modes": modes_state(session),
        "configOptions": config_options(session, booleans),
        "models": models_state(session),
    }


def new_session_answer(session: AgentSession, booleans: bool = False) -> dict[str, Any]:
    """The whole answer of ``session/new`` (and ``session/fork``): the id, the state and
    the ``_meta``."""
    state = session_state(session, booleans)
    return {"sessionId": session.session_id, **state, **answer_meta(session)}


def modes_state(session: AgentSession) -> dict[str, Any]:
    """``SessionModeState``, serialized."""
    return {
        "currentModeId": session.mode,
        "availableModes": [
            {"id": mode, "name": MODE_INFO[mode][0], "description": MODE_INFO[mode][1]}
            for mode in MODES
        ],
    }


def models_state(session: AgentSession) -> dict[str, Any]:
    """The pre-config-option ``models`` field, for clients that still read it."""
    return {
        "currentModelId": session.model_id,
        "availableModels": [{"modelId": m, "name": _model_name(m)} for m in _models(session)],
    }


def config_options(session: AgentSession, booleans: bool = False) -> list[dict[str, Any]]:
    """The ``select`` config options (``SessionConfigOptionSelect``), serialized, and the
    ``boolean`` ones (``SessionConfigOptionBoolean``) if ``booleans``."""
    options = [
        _select(
            "model",
            "Model",
            "The model that answers in this session.",
            session.model_id,
            [(m, _model_name(m)) for m in _models(session)],
            category="model",
        ),
        _select(
            "mode",
            "Mode",
            "What may run without asking.",
            session.mode,
            [(mode, MODE_INFO[mode][0]) for mode in MODES],
            category="mode",
        ),
    ]
    for key, (name, description, values) in LIMITS.items():
        current = int(getattr(session.settings, key))
        choices = sorted({*values, current})
        options.append(
            _select(key, name, description, str(current), [(str(v), str(v)) for v in choices])
        )
    if booleans:
        for key, (name, description, on, _off) in BOOLEANS.items():
            current_on = getattr(session.settings, key) == on
            options.append(
                {
                    "type": "boolean",
                    "id": key,
                    "name": name,
                    "description": description,
                    "currentValue": current_on,
                }
            )
    return options


def answer_meta(session: AgentSession) -> dict[str, Any]:
    """``_meta`` for a session answer: the state of each MCP server, the guard's status
    and the remembered "allow always" command prefixes (issue 11)."""
    from iac_kernel.guard.sandbox.bwrap import status_text

    meta: dict[str, Any] = {
        "guard": status_text(),
        "rememberedPrefixes": session.gate.remembered_prefixes(),
    }
    if session.mcp is not None:
        meta["mcpServers"] = session.mcp.statuses()
    return {"_meta": {"iac_kernel": meta}}


def mcp_statuses(session: AgentSession) -> list[dict[str, Any]] | None:
    """The state of each of the session's MCP servers (``None`` without any)."""
    return session.mcp.statuses() if session.mcp is not None else None


def _models(session: AgentSession) -> list[str]:
    models = list(available_models())
    if session.model_id not in models:
        models.insert(0, session.model_id)
    return models


def _model_name(model_id: str) -> str:
    if model_id == "scripted":
        return "Scripted (offline)"
    if model_id.startswith("scripted:"):
        return "Scripted: " + model_id.partition(":")[2].rsplit("/", 1)[-1]
    provider, model = describe(model_id)
    if provider in PROVIDERS:
        return f"{model} ({PROVIDERS[provider].title})"
    return model_id


def _select(
    config_id: str,
    name: str,
    description: str,
    current: str,
    choices: list[tuple[str, str]],
    category: str | None = None,
) -> dict[str, Any]:
    option: dict[str, Any] = {"type": "select", "id": config_id, "name": name}
    option["description"] = description
    if category is not None:
        option["category"] = category
    option["currentValue"] = current
    option["options"] = [{"value": v, "name": label} for v, label in choices]
    return option


def apply(session: AgentSession, config_id: str, value: Any, field: str = "value") -> None:
    """Change one option; -32602 for an unknown id or a bad value (named ``field``: the
    request's, e.g. ``modeId`` for ``session/set_mode``)."""
    if config_id not in CONFIG_IDS:
        raise errors.invalid_field(
            "configId", f"unknown config option {config_id!r}; known: {', '.join(CONFIG_IDS)}"
        )
    if config_id in BOOLEANS:
        value = _on_off(config_id, value)
    elif isinstance(value, bool) or not isinstance(value, str | int):
        raise errors.invalid_field(
            field, f"{config_id} = {value!r} is not valid (expects a string)"
        )
    elif config_id in LIMITS:
        text = str(value).strip()
        if not text.isdigit() or int(text) < 1:
            raise errors.invalid_field(
                field, f"{config_id} = {value!r} is not valid (expects a whole number, 1 or more)"
            )
        value = int(text)
    else:
        value = str(value).strip()
    try:
        session.set_config(config_id, value)
    except ValueError as exc:
        raise errors.invalid_field(field, str(exc)) from None


def _on_off(config_id: str, value: Any) -> Any:
    """The setting's value for a ``boolean`` option: from ``true``/``false`` (or, from
    clients without boolean options, ``on``/``off`` or the setting's own words)."""
    on, off = BOOLEANS[config_id][2:]
    if isinstance(value, bool):
        return on if value else off
    words = {"true": on, "on": on, str(on).lower(): on, "false": off, "off": off}
    words[str(off).lower()] = off
    if isinstance(value, str) and value.strip().lower() in words:
        return words[value.strip().lower()]
    raise errors.invalid_field(
        "value", f"{config_id} = {value!r} is not valid (expects true or false)"
    )
