"""The agent's calls to its client (``session/update``, ``session/request_permission``)
over one :class:`~iac_kernel.acp.wire.connection.Connection`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable
from typing import Any

from iac_kernel.acp.protocol.client_features import ClientFeatures
from iac_kernel.acp.wire.connection import Connection

log = logging.getLogger(__name__)

UPDATE = "session/update"


class ClientChannel:
    """Sends to one connected client. A vanished client is logged once, not raised, for
    notifications: a turn must still finish and persist a valid history."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        #: True once a send found the client gone (said once in the log).
        self.gone = False
        #: What the client declared in ``initialize`` (set when it arrives): what it
        #: takes, and who it is (``clientInfo``, for audit records).
        self.features = ClientFeatures()
        self.client_info: Any = None

    async def update(
        self, session_id: str, update: Any, extra: dict[str, Any] | None = None
    ) -> None:
        """Send one update (an SDK model, as ``serialize_params`` puts it in its
        ``SessionNotification``); ``extra`` adds fields of schema 1.25 that the SDK's
        models lack (``messageId``, a tool call's ``name``), sent as raw JSON."""
        wire = update.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude_defaults=True
        )
        if extra:
            wire.update(extra)
        await self.forward_update({"sessionId": session_id, "update": wire})

    async def forward_update(self, params: dict[str, Any]) -> None:
        """Send ``session/update`` params as they are (e.g. relayed from a kernel)."""
        await self._updates(self.conn.send_notification(UPDATE, params))

    async def forward_updates(self, params: Iterable[dict[str, Any]]) -> None:
        """Many ``session/update`` params in order (a ``session/load`` replay), straight
        onto the connection's transport: the same lines, without a round through the
        connection for each."""
        await self._updates(self.conn.transport.send_notifications(UPDATE, params))

    async def _updates(self, sending: Awaitable[None]) -> None:
        try:
            await sending
        except (ConnectionError, OSError) as exc:
            if not self.gone:
                log.info("client gone; dropping session updates (%s)", exc)
            self.gone = True

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
