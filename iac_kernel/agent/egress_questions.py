"""The questions about a sandbox's network egress: may a sandboxed command of this tool
call reach a host that is not on the ``egress_allow`` setting? And may a guarded program's
run use a brokered credential for a cloud operation that changes something or returns a
secret (``iam:CreateAccessKey on user/ci``), judged at the wire by the broker?

The answers are the session's, kept on the gate (``PermissionGate.egress_hosts``,
``cloud_operations``): for a host, "Allow once" covers the rest of the call; for an
operation, that one request; "always" the session; rejections likewise.
"""

from __future__ import annotations

from typing import Any

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
from iac_kernel.egress.decide import SECRET, GuardedRun, describe, operation_key
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
    if host not in gate.egress_hosts and gate.mode == "bypass":
        return Decision(True)
    request = egress_request(host, port, call_id, tool_name)
    return await _session_answer(gate.egress_hosts, host, request, ask)


async def _session_answer(
    memory: dict[str, str], key: str, request: PermissionRequest, ask: AskPermission | None
) -> Decision:
    """The answer ``memory`` keeps for ``key`` this session, else the user's to
    ``request`` (kept in ``memory`` when the user says "always")."""
    remembered = memory.get(key)
    if remembered == "allow":
        return Decision(True)
    if remembered == "reject":
        return Decision(False, "denied", f"{DENIED_MESSAGE} (rejected for this session)")
    if ask is None:
        return Decision(False, "denied", f"{DENIED_MESSAGE} No one is there to approve it.")
    answer = await ask(request)
    request.asked = answered(request, answer)
    if answer in (ALLOW_ALWAYS, REJECT_ALWAYS):
        memory[key] = "allow" if answer == ALLOW_ALWAYS else "reject"
    if answer in (ALLOW_ONCE, ALLOW_ALWAYS):
        return Decision(True)
    return Decision(False, "denied", "Cancelled." if answer == CANCELLED else DENIED_MESSAGE)


def operation_request(
    operation: dict[str, Any], run: GuardedRun, call_id: str, tool_name: str
) -> PermissionRequest:
    """The question a front shows about one cloud operation of a guarded run."""
    named = printable(describe(operation))
    key = printable(operation_key(operation))
    secret = operation.get("access") == SECRET
    what = "returns a secret or a credential" if secret else "changes something"
    request = f"{operation.get('method', '')} {operation.get('url', '')}".strip()
    return PermissionRequest(
        call_id=call_id,
        tool_name=tool_name,
        title=f"{tool_name}: {named}",
        kind="execute",
        input={
            "cloud_operation": named,
            "program": run.shown,
            "request": printable(request)[:500],
            "request_sha256": operation.get("digest"),
        },
        options=list(ALL_OPTIONS),
        # A change to real infrastructure: per person, never a headless policy's.
        danger=True,
        reason=(
            f"{code_span(printable(run.shown))}, which ran without asking, sends "
            f"{code_span(named)} to {code_span(printable(str(operation.get('host'))))} with "
            f"your brokered credentials; it {what}. Only this request is allowed once."
        ),
        labels={
            ALLOW_ONCE: "Allow this request",
            ALLOW_ALWAYS: f"Allow {key} for this session",
            REJECT_ALWAYS: f"Reject {key} for this session",
        },
    )


async def check_operation(
    gate: PermissionGate,
    operation: dict[str, Any],
    run: GuardedRun,
    call_id: str,
    tool_name: str,
    ask: AskPermission | None,
) -> Decision:
    """May ``run`` use a brokered credential for ``operation``? The session's answer,
    else the user's (in every mode: a change to real infrastructure is never approved by
    ``bypass`` alone)."""
    key = operation_key(operation)
    request = operation_request(operation, run, call_id, tool_name)
    return await _session_answer(gate.cloud_operations, key, request, ask)


class EgressAsker:
    """The ``ToolContext.ask_egress`` of one tool call: hosts (called) and cloud
    operations (:meth:`operation`), both decided through the session's gate."""

    def __init__(
        self, gate: PermissionGate, call_id: str, tool_name: str, ask: AskPermission | None
    ) -> None:
        self.gate, self.call_id, self.tool_name, self.ask = gate, call_id, tool_name, ask

    async def __call__(self, host: str, port: int) -> tuple[bool, str]:
        decision = await check_egress(self.gate, host, port, self.call_id, self.tool_name, self.ask)
        return decision.allowed, decision.message

    async def operation(self, operation: dict[str, Any], run: GuardedRun) -> tuple[bool, str]:
        decision = await check_operation(
            self.gate, operation, run, self.call_id, self.tool_name, self.ask
        )
        return decision.allowed, decision.message


def asker(
    gate: PermissionGate, call_id: str, tool_name: str, ask: AskPermission | None
) -> EgressAsker:
    """The ``ToolContext.ask_egress`` for one tool call."""
    return EgressAsker(gate, call_id, tool_name, ask)
