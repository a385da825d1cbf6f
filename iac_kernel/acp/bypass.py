"""Requests that raise a session to ``bypass`` mode, for fronts where that needs the
owner's opt-in (the Jupyter server's WebSocket: ``c.IacKernelServer.allow_remote_bypass``).

Every route to the mode is covered: ``session/set_mode``, ``session/set_config_option``
and its alias ``config/set`` with ``configId = mode``, and a ``/mode bypass`` slash
command in a prompt. The check runs in the dispatcher, before a request is routed or
forwarded to the kernel that holds the session.
"""

from __future__ import annotations

from typing import Any

from acp import RequestError

from iac_kernel.acp import commands, errors

BYPASS = "bypass"
OPT_IN = "c.IacKernelServer.allow_remote_bypass = True"


def bypass_field(method: str, params: Any) -> str | None:
    """The field of ``params`` that asks for bypass mode, or None."""
    if not isinstance(params, dict):
        return None
    if method == "session/set_mode":
        return "modeId" if _is_bypass(params.get("modeId")) else None
    if method in ("session/set_config_option", "config/set"):
        mode = str(params.get("configId", "")).strip() == "mode"
        return "value" if mode and _is_bypass(params.get("value")) else None
    if method == "session/prompt" and isinstance(params.get("prompt"), list):
        blocks = [b for b in params["prompt"] if isinstance(b, dict)]
        parsed = commands.parse(blocks)
        if parsed is not None and parsed[0] == "mode" and _is_bypass(parsed[1]):
            return "prompt"
    return None


def _is_bypass(value: Any) -> bool:
    return isinstance(value, str) and value.strip() == BYPASS


def refusal(field: str) -> RequestError:
    """-32602 naming the field: bypass from this client needs the owner's opt-in."""
    return errors.invalid_field(
        field,
        "bypass mode cannot be set from a remote client unless the server's owner "
        f"allows it ({OPT_IN} in the Jupyter server's configuration)",
    )
