"""One sandboxed call's right to the network: host names, then the resolved address."""

from __future__ import annotations

import asyncio
import glob
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

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

#: Asks the permission gate about one host: returns (allowed, message when not).
AskEgress = Callable[[str, int], Awaitable[tuple[bool, str]]]


@dataclass
class Decision:
    allow: bool
    address: str | None = None
    reason: str = ""

    def wire(self) -> dict[str, Any]:
        return {"allow": self.allow, "address": self.address, "reason": self.reason}


@dataclass
class EgressCall:
    """The egress policy of one bash call (its shell and the guarded programs it runs)."""

    settings: Any
    ask: AskEgress | None = None
    loop: asyncio.AbstractEventLoop | None = None
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
