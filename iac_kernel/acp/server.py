"""Serve ACP over one reader/writer pair with the SDK's JSON-RPC connection.

Transport-agnostic: ``iac-kernel acp`` passes stdio, the kernel's endpoint passes a
unix socket connection. The session manager outlives the connection; closing the
sessions is the caller's decision.
"""

from __future__ import annotations

import asyncio
import logging

from acp.connection import Connection

from iac_kernel.acp.agent import IacAgent
from iac_kernel.acp.channel import ClientChannel
from iac_kernel.acp.routes import Dispatcher
from iac_kernel.acp.transport import LineTransport, Writer
from iac_kernel.sessions.manager import SessionManager

log = logging.getLogger(__name__)


async def serve(reader: asyncio.StreamReader, writer: Writer, manager: SessionManager) -> None:
    """Answer ACP messages from ``reader`` on ``writer`` until the input ends.

    Turns this connection started are cancelled (and end with a valid history) when it
    ends; the sessions stay open in ``manager``.
    """
    agent = IacAgent(manager)
    conn = Connection(Dispatcher(agent), LineTransport(reader, writer), listening=False)
    agent.attach(ClientChannel(conn))
    try:
        await conn.main_loop()
    finally:
        try:
            await agent.shutdown()
        finally:
            await conn.close()
