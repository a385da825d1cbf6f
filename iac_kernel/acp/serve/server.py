"""Serve ACP over one reader/writer pair.

Transport-agnostic: ``iac-kernel acp`` passes stdio, the kernel's endpoint a unix socket
connection, the Jupyter server's WebSocket its frames. The session manager outlives the
connection; closing the sessions is the caller's decision.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from iac_kernel.acp.approvals import Decisions
from iac_kernel.acp.routes import Dispatcher
from iac_kernel.acp.wire.channel import ClientChannel
from iac_kernel.acp.wire.connection import Connection
from iac_kernel.acp.wire.transport import LineTransport, Writer

if TYPE_CHECKING:
    from iac_kernel.acp.agent import IacAgent
    from iac_kernel.agent.manager import SessionManager


async def serve(
    reader: asyncio.StreamReader,
    writer: Writer,
    manager: SessionManager | Callable[[], SessionManager],
    *,
    allow_bypass: bool = True,
    approvals: Decisions | None = None,
) -> None:
    """Answer ACP messages from ``reader`` on ``writer`` until the input ends.

    ``manager`` is the session manager, or what makes it when the agent is made (after
    the ``initialize`` answer: ``iac-kernel acp``'s own). ``allow_bypass=False`` refuses
    every request that would set bypass mode; ``approvals`` is the connection's approver
    (``_iac/approvals/*``, :mod:`iac_kernel.acp.approvals`), if it has one. Turns this
    connection started are cancelled (and end with a valid history) when it ends; the
    sessions stay open.
    """

    def make_agent(channel: ClientChannel) -> IacAgent:
        from iac_kernel.acp.agent import IacAgent  # the agent core: after the handshake

        return IacAgent(manager() if callable(manager) else manager, channel)

    dispatcher = Dispatcher(make_agent, allow_bypass=allow_bypass, approvals=approvals)
    conn = Connection(dispatcher, LineTransport(reader, writer))
    dispatcher.channel = ClientChannel(conn)
    try:
        await conn.main_loop()
    finally:
        try:
            await dispatcher.shutdown()
        finally:
            await conn.close()
