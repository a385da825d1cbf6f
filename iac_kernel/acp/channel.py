"""The agent's calls to the client (``session/update``, ``session/request_permission``)
over the SDK's JSON-RPC :class:`~acp.connection.Connection`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from acp.connection import Connection
from acp.meta import CLIENT_METHODS
from acp.schema import SessionNotification
from acp.utils import serialize_params

from iac_kernel.acp.client_features import ClientFeatures
from iac_kernel.acp.transport import LineTransport

log = logging.getLogger(__name__)

UPDATE = CLIENT_METHODS["session_update"]


class ClientChannel:
    """Sends to one connected client. A vanished client is logged once, not raised, for
    notifications: a turn must still finish and persist a valid history."""

    def __init__(self, conn: Connection, transport: LineTransport | None = None) -> None:
        self.conn = conn
        #: ``conn``'s transport, for :meth:`forward_updates` (without it: one at a time).
        self.transport = transport
        self._gone = False
        #: What the client declared in ``initialize`` (set when it arrives).
        self.features = ClientFeatures()

    async def update(
        self, session_id: str, update: Any, extra: dict[str, Any] | None = None
    ) -> None:
        """Send one update; ``extra`` adds fields of schema 1.25 that the SDK's models lack
        (``messageId``, a tool call's ``name``), sent as raw JSON."""
        params = serialize_params(SessionNotification(session_id=session_id, update=update))
        if extra:
            params["update"].update(extra)
        await self.forward_update(params)

    async def forward_update(self, params: dict[str, Any]) -> None:
        """Send ``session/update`` params as they are (e.g. relayed from a kernel)."""
        await self._updates(self.conn.send_notification(UPDATE, params))

    async def forward_updates(
        self, params: Iterable[dict[str, Any]], copy: Callable[[bytes], None] | None = None
    ) -> None:
        """Many ``session/update`` params in order (a ``session/load`` replay), straight
        onto the transport the connection writes to: the same lines, without a round
        through the connection for each. ``copy`` gets each line (only with a
        transport)."""
        if self.transport is None:
            for each in params:
                await self.forward_update(each)
            return
        await self._updates(self.transport.send_notifications(UPDATE, params, copy))

    async def forward_lines(self, chunks: Iterable[bytes]) -> None:
        """Updates already encoded as lines (a cached replay); needs :attr:`transport`."""
        assert self.transport is not None
        await self._updates(self.transport.send_lines(chunks))

    @property
    def gone(self) -> bool:
        """True once a send found the client gone."""
        return self._gone

    async def _updates(self, sending: Awaitable[None]) -> None:
        try:
            await sending
        except (ConnectionError, OSError) as exc:
            self.lost(exc)

    def lost(self, exc: BaseException) -> None:
        """Note that the client is gone (a send failed with ``exc``): later updates for
        it are dropped."""
        if not self._gone:
            log.info("client gone; dropping session updates (%s)", exc)
        self._gone = True

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Another notification to the client (``elicitation/complete``); dropped when
        the client is gone."""
        try:
            await self.conn.send_notification(method, params)
        except (ConnectionError, OSError) as exc:
            log.info("client gone; dropping %s (%s)", method, exc)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """A request to the client; raises RequestError or ConnectionError."""
        try:
            return await self.conn.send_request(method, params)
        except OSError as exc:
            raise ConnectionError(str(exc)) from None
