"""The two lines of the ``mcp`` SDK behind one small connection interface.

* **2.x** (``mcp.Client(..., mode="auto")``): asks ``server/discover`` first and speaks
  the 2026-07-28 spec (no session, no ``initialize``) to a server that answers it, the
  ``initialize`` handshake of the earlier specs to any other;
* **1.x** (``ClientSession`` and ``initialize``): the handshake-era specs only. The
  ``jupyter-ai`` extra resolves this line: Jupyter AI 3.2 needs jupyter-server-mcp 0.3,
  whose fastmcp 3 needs ``mcp<2``.

Only public names of either line are used. Tools and results are read in their wire
form (:func:`wire`: the spec's camelCase fields), which both lines produce alike.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TextIO

import mcp
from mcp import types
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client

from iac_kernel.mcp.config import ServerSpec

#: The installed SDK's major line.
LINE = 2 if hasattr(mcp, "Client") else 1
#: An error answer of the server, or a closed connection (``McpError`` on 1.x).
MCPError: type[Exception] = getattr(mcp, "MCPError", None) or mcp.McpError
#: The HTTP client timeouts of both lines' default client (connect, read of a stream).
HTTP_TIMEOUT, HTTP_READ_TIMEOUT = 30.0, 300.0


def wire(model: Any) -> dict[str, Any]:
    """A tool, result or content block as the spec's JSON (camelCase on both lines)."""
    if isinstance(model, dict):
        return model
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def closed(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection closed (not an error answer of the server).

    By its words ("Connection closed" on both lines): its code, -32000, is also the first
    of the codes servers may use for errors of their own."""
    return isinstance(exc, MCPError) and "closed" in str(exc).lower()


class Connection:
    """An open connection: who answered, in which spec version, and its two requests."""

    def __init__(self, peer: Any, server_info: Any, protocol: str | None) -> None:
        self._peer = peer  # a 2.x ``Client`` or a 1.x ``ClientSession``
        name = getattr(server_info, "name", "") or ""
        version = getattr(server_info, "version", "") or ""
        #: ``name version`` of the server, "" when a 2026-07-28 server does not say.
        self.server_info = f"{name} {version}".strip()
        #: The negotiated spec version (``2026-07-28``, ``2025-11-25``, ...).
        self.protocol = protocol or ""

    async def list_tools(self, pages: int = 100) -> list[types.Tool]:
        """Every tool, page after page (at most ``pages``)."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _page in range(pages):
            if cursor:
                result = await self._peer.list_tools(cursor=cursor)
            else:
                result = await self._peer.list_tools()
            tools.extend(result.tools)
            cursor = wire(result).get("nextCursor")
            if not cursor:
                break
        return tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], read_timeout: float
    ) -> types.CallToolResult:
        if LINE == 2:
            return await self._peer.call_tool(name, arguments, read_timeout_seconds=read_timeout)
        return await self._peer.call_tool(
            name, arguments, read_timeout_seconds=timedelta(seconds=read_timeout)
        )


#: ``on_elicit(params) -> result``: a server's ``elicitation/create`` (both as the spec's
#: JSON); ``on_complete(elicitation_id)``: its ``notifications/elicitation/complete``.
OnElicit = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
OnComplete = Callable[[str], None]


def elicitation_hooks(on_elicit: OnElicit, on_complete: OnComplete) -> dict[str, Any]:
    """The ``elicitation_callback`` and ``message_handler`` of either line's client (the
    same signatures on 1.x and 2.x): the client then declares form and url elicitation."""

    async def elicitation_callback(context: Any, params: Any) -> Any:
        return types.ElicitResult(**(await on_elicit(wire(params))))

    async def message_handler(message: Any) -> None:
        data = wire(message) if hasattr(message, "model_dump") else None
        if isinstance(data, dict) and data.get("method") == COMPLETE:
            found = (data.get("params") or {}).get("elicitationId")
            if isinstance(found, str):
                on_complete(found)

    return {"elicitation_callback": elicitation_callback, "message_handler": message_handler}


COMPLETE = "notifications/elicitation/complete"


async def connect(
    stack: contextlib.AsyncExitStack,
    spec: ServerSpec,
    errlog: TextIO | None,
    hooks: dict[str, Any] | None = None,
) -> Connection:
    """Open the transport of ``spec`` on ``stack`` and agree on a spec version;
    ``hooks`` (:func:`elicitation_hooks`) go to the client."""
    hooks = hooks or {}
    if spec.transport == "stdio":
        params = StdioServerParameters(
            command=spec.command, args=spec.args, env=spec.env or None, cwd=spec.cwd
        )
        transport: Any = stdio_client(params, errlog=errlog) if errlog else stdio_client(params)
    elif spec.transport == "sse":
        transport = sse_client(spec.url, headers=spec.headers)
    else:
        transport = await _streamable_http(stack, spec)
    if LINE == 2:
        client = await stack.enter_async_context(
            mcp.Client(transport, mode="auto", cache=None, **hooks)
        )
        return Connection(client, client.server_info, client.protocol_version)
    read, write, *_ = await stack.enter_async_context(transport)
    session = await stack.enter_async_context(mcp.ClientSession(read, write, **hooks))
    init = await session.initialize()
    return Connection(session, init.serverInfo, str(init.protocolVersion))


async def _streamable_http(stack: contextlib.AsyncExitStack, spec: ServerSpec) -> Any:
    """The streamable HTTP transport (not entered yet), with the spec's headers."""
    from mcp.client import streamable_http

    if LINE == 2:
        if not spec.headers:
            return streamable_http.streamable_http_client(spec.url)
        import httpx2  # the HTTP client of mcp 2.x (one of its dependencies)

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=spec.headers, timeout=httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_READ_TIMEOUT)
            )
        )
        return streamable_http.streamable_http_client(spec.url, http_client=http)
    if not hasattr(streamable_http, "streamable_http_client"):  # mcp before 1.26
        return streamable_http.streamablehttp_client(spec.url, headers=spec.headers)
    http = await stack.enter_async_context(
        streamable_http.create_mcp_http_client(headers=spec.headers)
    )
    return streamable_http.streamable_http_client(spec.url, http_client=http)
