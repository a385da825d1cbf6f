"""A session's modes, models and config options as ACP shows them, and changing them.

Config options (all ``select``, the kind every client supports):

* ``model``: the model id (``scripted``, ``scripted:/path/script.json`` or a Claude id);
* ``mode``: ``default`` (edits and commands ask), ``accept_edits``, ``read_only``, ``bypass``;
* ``max_turn_requests``: model calls per turn before the turn stops with
  ``max_turn_requests``;
* ``max_tokens``: the output token limit of each model call.

The numeric options list common values and accept any positive integer. Every change
goes through :class:`~iac_kernel.agent.session.AgentSession`, so it changes behaviour.
"""

from __future__ import annotations

from typing import Any

from acp.schema import (
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)
from acp.utils import serialize_params

from iac_kernel.acp import errors
from iac_kernel.agent.session import AgentSession
from iac_kernel.config import MODES
from iac_kernel.models.registry import available_models

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
CONFIG_IDS = ("model", "mode", *LIMITS)


def modes_state(session: AgentSession) -> SessionModeState:
    return SessionModeState(
        current_mode_id=session.mode,
        available_modes=[
            SessionMode(id=mode, name=MODE_INFO[mode][0], description=MODE_INFO[mode][1])
            for mode in MODES
        ],
    )


def models_state(session: AgentSession) -> dict[str, Any]:
    """The pre-config-option ``models`` field, for clients that still read it."""
    return {
        "currentModelId": session.model_id,
        "availableModels": [{"modelId": m, "name": _model_name(m)} for m in _models(session)],
    }


def config_options(session: AgentSession) -> list[SessionConfigOptionSelect]:
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
    return options


def session_state(session: AgentSession) -> dict[str, Any]:
    """``modes``, ``configOptions`` and ``models`` for session/new, load, fork, resume."""
    return {
        "modes": serialize_params(modes_state(session)),
        "configOptions": serialized_options(session),
        "models": models_state(session),
    }


def serialized_options(session: AgentSession) -> list[dict[str, Any]]:
    return [serialize_params(option) for option in config_options(session)]


def apply(session: AgentSession, config_id: str, value: Any) -> None:
    """Change one option; -32602 for an unknown id or a bad value."""
    if config_id not in CONFIG_IDS:
        raise errors.invalid_field(
            "configId", f"unknown config option {config_id!r}; known: {', '.join(CONFIG_IDS)}"
        )
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise errors.invalid_field(
            "value", f"{config_id} = {value!r} is not valid (expects a string)"
        )
    text = str(value).strip()
    if config_id in LIMITS:
        if not text.isdigit() or int(text) < 1:
            raise errors.invalid_field(
                "value", f"{config_id} = {value!r} is not valid (expects a whole number, 1 or more)"
            )
        value = int(text)
    else:
        value = text
    try:
        session.set_config(config_id, value)
    except ValueError as exc:
        raise errors.invalid_field("value", str(exc)) from None


def set_mode(session: AgentSession, mode_id: str) -> None:
    try:
        session.set_mode(mode_id)
    except ValueError as exc:
        raise errors.invalid_field("modeId", str(exc)) from None


def set_model(session: AgentSession, model_id: str) -> None:
    try:
        session.set_model(model_id)
    except ValueError as exc:
        raise errors.invalid_field("modelId", str(exc)) from None


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
    return model_id


def _select(
    config_id: str,
    name: str,
    description: str,
    current: str,
    choices: list[tuple[str, str]],
    category: str | None = None,
) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        type="select",
        id=config_id,
        name=name,
        description=description,
        category=category,
        current_value=current,
        options=[SessionConfigSelectOption(value=v, name=label) for v, label in choices],
    )
