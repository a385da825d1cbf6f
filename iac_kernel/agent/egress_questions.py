"""The questions about a sandbox's network egress: may a sandboxed command of this tool
call reach a host that is not on the ``egress_allow`` setting?

The answers are the session's, kept on the gate (``PermissionGate.egress_hosts``):
"Allow once" covers the rest of the call, "always" the session; rejections likewise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from iac_kernel.agent.permissions import (
    ALL_OPTIONS,
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    CANCELLED,
    DENIED_MESSAGE,
    REJECT_ALWAYS,
    AskPermission,
    Decision,
    PermissionGate,
    PermissionRequest,
    answered,
)
from iac_kernel.textsafe import code_span, printable


def egress_request(host: str, port: int, call_id: str, tool_name: str) -> PermissionRequest:
    """The question a front shows about reaching ``host:port``."""
    shown = code_span(printable(f"{host}:{port}"))
    return PermissionRequest(
        call_id=call_id,
        tool_name=tool_name,
        title=f"{tool_name}: network access to {printable(host)}",
        kind="fetch",
        input={"egress_host": host, "port": port},
        options=list(ALL_OPTIONS),
        reason=(
            f"A sandboxed command wants to connect to {shown}, a host not on the "
            "egress_allow setting (add it there to allow it in every session)."
        ),
        labels={
            ALLOW_ONCE: f"Allow {host} for this command",
            ALLOW_ALWAYS: f"Allow {host} for this session",
            REJECT_ALWAYS: f"Reject {host} for this session",
        },
    )


async def check_egress(
    gate: PermissionGate,
    host: str,
    port: int,
    call_id: str,
    tool_name: str,
    ask: AskPermission | None,
) -> Decision:
    """May a sandbox of this call reach ``host``? The session's answer, the ``bypass``
    mode, or else the user's."""
    remembered = gate.egress_hosts.get(host)
    if remembered == "allow" or (remembered is None and gate.mode == "bypass"):
        return Decision(True)
    if remembered == "reject":
        return Decision(False, "denied", f"{DENIED_MESSAGE} (rejected for this session)")
    request = egress_request(host, port, call_id, tool_name)
    if ask is None:
        return Decision(False, "denied", f"{DENIED_MESSAGE} No one is there to approve it.")
    answer = await ask(request)
    request.asked = answered(request, answer)
    if answer in (ALLOW_ALWAYS, REJECT_ALWAYS):
        gate.egress_hosts[host] = "allow" if answer == ALLOW_ALWAYS else "reject"
    if answer in (ALLOW_ONCE, ALLOW_ALWAYS):
        return Decision(True)
    return Decision(False, "denied", "Cancelled." if answer == CANCELLED else DENIED_MESSAGE)


def asker(
    gate: PermissionGate, call_id: str, tool_name: str, ask: AskPermission | None
) -> Callable[[str, int], Awaitable[tuple[bool, str]]]:
    """The ``ToolContext.ask_egress`` for one tool call: decided by :func:`check_egress`."""

    async def ask_egress(host: str, port: int) -> tuple[bool, str]:
        decision = await check_egress(gate, host, port, call_id, tool_name, ask)
        return decision.allowed, decision.message

    return ask_egress
