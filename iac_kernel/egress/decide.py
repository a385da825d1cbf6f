"""One sandboxed call's right to the network: host names, then the resolved address; and,
for a guarded program's run, its right to use brokered credentials, one cloud operation at
a time (:meth:`EgressCall.judge`)."""

from __future__ import annotations

import asyncio
import glob
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.egress.addon_operations import READ
from iac_kernel.egress.policy import (
    address_refusal,
    host_allowed,
    ip_literal,
    is_local_name,
    normal_host,
    private_rules,
    resolve,
    split_list,
)

log = logging.getLogger(__name__)

#: Asks the permission gate about one host: returns (allowed, message when not). The
#: agent's asker also has an ``operation(operation, run)`` coroutine method with the same
#: answer, for cloud operations judged at the wire (:meth:`EgressCall.judge`).
AskEgress = Callable[[str, int], Awaitable[tuple[bool, str]]]
#: Receives one audit record (a dict) per changing or secret-returning operation judged.
AuditSink = Callable[[dict[str, Any]], None]


@dataclass
class Decision:
    allow: bool
    address: str | None = None
    reason: str = ""

    def wire(self) -> dict[str, Any]:
        return {"allow": self.allow, "address": self.address, "reason": self.reason}


@dataclass(frozen=True)
class GuardedRun:
    """One guarded program's run, as its own relay knows it: the only connections on which
    the broker swaps a placeholder for a real credential. ``approved``: the user approved
    this very exec (a change or a secret read), so its operations need no second question;
    a run that started unasked (a read) may only read."""

    program: str
    argv: tuple[str, ...]
    approved: bool

    @property
    def shown(self) -> str:
        return " ".join(self.argv)[:200]


@dataclass
class EgressCall:
    """The egress policy of one bash call's shell, or of one guarded run (``run``)."""

    settings: Any
    ask: AskEgress | None = None
    loop: asyncio.AbstractEventLoop | None = None
    #: The guarded run this relay serves (None: the call's shell, which never gets a
    #: brokered credential swapped, whatever it presents).
    run: GuardedRun | None = None
    audit: AuditSink | None = None
    _allowed: set[str] = field(default_factory=set)
    _refused: dict[str, str] = field(default_factory=dict)
    _lock: asyncio.Lock | None = None

    async def decide(self, host: str, port: int, protected: Iterable[int]) -> Decision:
        """May this call connect to ``host:port``, and to which address."""
        protected = set(protected)
        # An address, or a name that is loopback by definition: checked before asking.
        if ip_literal(host) is not None or is_local_name(host):
            early = await self._address(host, port, protected)
            if not early.allow:
                return early
        allowed, message = await self._host(normal_host(host), port)
        if not allowed:
            return Decision(False, reason=message)
        return await self._address(host, port, protected)

    async def judge(self, operation: dict[str, Any]) -> Decision:
        """May this connection's request use a brokered credential for ``operation``
        (``service``, ``operation``, ``resource``, ``access``: read, change or secret, as
        the broker's addon read it from the request)? Reads of a guarded run pass; a
        change or a secret read passes when the user approved the run, else it is asked,
        bound to that one request; the shell never gets a credential."""
        if self.run is None:
            return Decision(
                False,
                reason="brokered credentials are used only by a guarded program's own run; "
                "this connection came from the shell",
            )
        access = operation.get("access")
        if access == READ:
            return Decision(True)
        if self.run.approved:
            await self._record(operation, "allowed", "approved with the command")
            return Decision(True)
        ask = getattr(self.ask, "operation", None)
        if ask is None:
            allowed, message = False, "no one is there to approve it"
        else:
            allowed, message = await ask(operation, self.run)
        await self._record(operation, "allowed" if allowed else "rejected", message)
        return Decision(allowed, reason="" if allowed else f"{describe(operation)}: {message}")

    async def _record(self, operation: dict[str, Any], outcome: str, message: str) -> None:
        if self.audit is None or self.run is None:
            return
        entry = {
            "kind": "cloud_operation",
            "operation": describe(operation),
            "access": operation.get("access"),
            "host": operation.get("host"),
            "method": operation.get("method"),
            "request_sha256": operation.get("digest"),
            "command": self.run.shown,
            "outcome": outcome,
        }
        if message:
            entry["message"] = message
        try:  # off the loop: the store's transaction (a few ms) waits on the disk or server
            await asyncio.to_thread(self.audit, entry)
        except Exception:  # the record's trouble must not change the decision
            log.exception("could not write the audit record of a cloud operation")

    async def _host(self, name: str, port: int) -> tuple[bool, str]:
        allow = split_list(getattr(self.settings, "egress_allow", ""))
        if host_allowed(name, allow) or name in self._allowed:
            return True, ""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one question per host, however many connections wait
            if name in self._allowed:
                return True, ""
            if name in self._refused:
                return False, self._refused[name]
            if self.ask is None:
                message = f"{name} is not on egress_allow and no one is there to approve it"
            else:
                allowed, message = await self.ask(name, port)
                if allowed:
                    self._allowed.add(name)
                    return True, ""
            message = f"connection to {name} refused: {message or 'not approved'}"
            self._refused[name] = message
            return False, message

    async def _address(self, host: str, port: int, protected: set[int]) -> Decision:
        rules = private_rules(getattr(self.settings, "egress_allow_private", ""))
        addresses = await asyncio.to_thread(resolve, host, port)
        if not addresses:
            return Decision(False, reason=f"cannot resolve {normal_host(host)}")
        reasons = []
        for address in addresses:
            why = address_refusal(address, port, rules, protected)
            if why is None:
                return Decision(True, str(address))
            reasons.append(why)
        return Decision(False, reason=f"{normal_host(host)}: {reasons[0]}")


def operation_key(operation: dict[str, Any]) -> str:
    """``iam:CreateAccessKey``: what a session remembers an answer for."""
    return f"{operation.get('service') or '?'}:{operation.get('operation') or '?'}"


def describe(operation: dict[str, Any]) -> str:
    """``iam:CreateAccessKey on user/ci``: the operation as questions and records name it."""
    name = operation_key(operation)
    resource = operation.get("resource")
    return f"{name} on {resource}" if resource else name


def jupyter_ports() -> set[int]:
    """Ports of this user's running Jupyter servers and kernels (runtime files)."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        runtime = jupyter_runtime_dir()
    except Exception:
        return set()
    ports: set[int] = set()
    for path in glob.glob(os.path.join(runtime, "*.json")):
        try:
            with open(path) as fh:
                info = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(info, dict):
            for key, value in info.items():
                if (key == "port" or key.endswith("_port")) and isinstance(value, int):
                    ports.add(value)
    return ports
