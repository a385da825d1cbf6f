"""Control of a session shared by several connections: one controller (a lease), the
others observe.

Each connection that has a session open (created, loaded, resumed or forked it) is a
member of that session. The first member holds the lease; the others observe: they get
every ``session/update`` of the controller's turns (the prompt as
``user_message_chunk`` first), not its permission questions, and their steering
requests (prompt, cancel, mode, model, options) are refused. An observer takes the
lease with ``_iac/session/control`` (``{"sessionId", "claim": true}``) while no turn
runs; the lease is free again when its holder closes the session or its connection
ends, and a free lease goes to the first member that prompts or claims it. A member
that loses the lease to a claim is told (:func:`tell_lost`).

The members are the agent process's (every connection of a Jupyter server).
"""

from __future__ import annotations

import logging
from typing import Any

from iac_kernel.acp.protocol.client_features import ClientFeatures
from iac_kernel.acp.protocol.notices import CLAIMED, lost_updates

__all__ = ["LEASES", "Leases", "Mirrored", "tell_lost"]

log = logging.getLogger(__name__)


async def tell_lost(channel: Any, session_id: str) -> None:
    """Tell a client that another one claimed ``session_id`` (the lease-lost updates)."""
    notices = getattr(channel, "features", ClientFeatures()).notices
    for params in lost_updates(session_id, CLAIMED, notices):
        await channel.forward_update(params)


class Leases:
    """Members and lease holder of each open session."""

    def __init__(self) -> None:
        #: Session id -> {member: its channel}, in joining order.
        self._members: dict[str, dict[Any, Any]] = {}
        self._holders: dict[str, Any] = {}

    def join(self, session_id: str, member: Any, channel: Any) -> None:
        """``member`` has the session open; it holds the lease if nobody does."""
        self._members.setdefault(session_id, {})[member] = channel
        self._holders.setdefault(session_id, member)

    def leave(self, session_id: str, member: Any) -> None:
        members = self._members.get(session_id, {})
        members.pop(member, None)
        if not members:
            self._members.pop(session_id, None)
        if self._holders.get(session_id) is member:
            del self._holders[session_id]

    def leave_all(self, member: Any) -> None:
        for session_id in [s for s, m in self._members.items() if member in m]:
            self.leave(session_id, member)

    def holder(self, session_id: str) -> Any:
        return self._holders.get(session_id)

    def may_steer(self, session_id: str, member: Any) -> bool:
        """Whether ``member`` controls the session, taking a free lease if it can."""
        holder = self._holders.get(session_id)
        if holder is None:
            self._holders[session_id] = member
            return True
        return holder is member

    def claim(self, session_id: str, member: Any) -> Any:
        """``member`` takes the lease; the channel of the member that lost it (None when
        the lease was free or already ``member``'s)."""
        former = self._holders.get(session_id)
        self._holders[session_id] = member
        if former is None or former is member:
            return None
        log.info("control of %s passes to another client", session_id)
        return self._members.get(session_id, {}).get(former)

    def observers(self, session_id: str, member: Any) -> list[Any]:
        """The channels of the session's other members."""
        members = self._members.get(session_id, {})
        return [channel for other, channel in members.items() if other is not member]


#: The agent process's sessions (every connection's).
LEASES = Leases()


class Mirrored:
    """A turn's channel: the controller's updates, copied to the session's observers.

    An observer that is gone is skipped (its own channel logs it)."""

    def __init__(self, channel: Any, session_id: str, member: Any) -> None:
        self.channel = channel
        self.session_id = session_id
        self.member = member

    async def update(
        self, session_id: str, update: Any, extra: dict[str, Any] | None = None
    ) -> None:
        await self.channel.update(session_id, update, extra)
        for other in LEASES.observers(self.session_id, self.member):
            await other.update(session_id, update, extra)

    async def forward_update(self, params: dict[str, Any]) -> None:
        await self.channel.forward_update(params)
        for other in LEASES.observers(self.session_id, self.member):
            await other.forward_update(params)

    async def observers_update(self, update: Any) -> None:
        """An update for the observers only (the prompt the controller sent)."""
        for other in LEASES.observers(self.session_id, self.member):
            await other.update(self.session_id, update)

    @property
    def features(self) -> ClientFeatures:
        """What the controller's client declared (schema 1.25 capabilities)."""
        return getattr(self.channel, "features", ClientFeatures())

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        return await self.channel.request(method, params)
