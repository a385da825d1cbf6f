"""Changing a session's modes, models and config options from ACP.

Every change goes through :class:`~iac_kernel.agent.session.AgentSession`, so it changes
behaviour; a bad id or value is -32602 naming the field. What the options are, and how
answers show them, is :mod:`iac_kernel.acp.session_state` (built without the SDK).
"""

from __future__ import annotations

from typing import Any

from iac_kernel.acp import errors
from iac_kernel.acp.session_state import BOOLEANS, CONFIG_IDS, LIMITS
from iac_kernel.agent.session import AgentSession


def apply(session: AgentSession, config_id: str, value: Any) -> None:
    """Change one option; -32602 for an unknown id or a bad value."""
    if config_id not in CONFIG_IDS:
        raise errors.invalid_field(
            "configId", f"unknown config option {config_id!r}; known: {', '.join(CONFIG_IDS)}"
        )
    if config_id in BOOLEANS:
        value = _on_off(config_id, value)
    elif isinstance(value, bool) or not isinstance(value, str | int):
        raise errors.invalid_field(
            "value", f"{config_id} = {value!r} is not valid (expects a string)"
        )
    elif config_id in LIMITS:
        text = str(value).strip()
        if not text.isdigit() or int(text) < 1:
            raise errors.invalid_field(
                "value", f"{config_id} = {value!r} is not valid (expects a whole number, 1 or more)"
            )
        value = int(text)
    else:
        value = str(value).strip()
    try:
        session.set_config(config_id, value)
    except ValueError as exc:
        raise errors.invalid_field("value", str(exc)) from None


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
