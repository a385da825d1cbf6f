"""A session's MCP servers: started with the session, stopped when it closes.

The manager keeps the session's tool list (the list the agent loop is built from) in
step with its servers: each server's tools are :class:`~iac_kernel.mcp.tool.McpTool`
entries in that list. Starting never raises: a server that fails is kept with its
reason, reported once as a notice before the next turn (:meth:`before_turn`) and in
:meth:`statuses` (ACP ``_meta``, ``%mcp``, ``/mcp``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from iac_kernel.mcp.config import ServerSpec
from iac_kernel.tools.base import Tool

if TYPE_CHECKING:  # the mcp SDK is imported only when a session uses a server
    from iac_kernel.mcp.client import McpServer

log = logging.getLogger(__name__)


class McpManager:
    """The MCP servers of one session."""

    def __init__(self, tools: list[Tool]) -> None:
        #: The session's tool list, changed in place.
        self.tools = tools
        self.servers: dict[str, McpServer] = {}
        #: Problems found before any server ran (e.g. a bad ``.mcp.json``).
        self.problems: list[str] = []
        self._pending: asyncio.Task[None] | None = None
        self._later: list[ServerSpec] = []
        self._reported: set[str] = set()
        self._closed = False

    # -- starting and stopping -------------------------------------------------------------

    async def start(self, specs: list[ServerSpec]) -> None:
        """Start ``specs`` (all at once); a server of the same name is replaced unless it
        runs with the same spec."""
        await self.ready()
        fresh = []
        for spec in specs:
            old = self.servers.get(spec.name)
            if old is not None and old.running and old.spec == spec:
                continue
            if old is not None:
                await old.stop()
            from iac_kernel.mcp.client import McpServer

            server = McpServer(spec)
            self.servers[spec.name] = server
            fresh.append(server)
        if fresh:
            await asyncio.gather(*(server.start() for server in fresh))
        self._sync()
        if self._closed:  # closed while starting: do not leave processes behind
            await self.stop()

    def start_soon(self, specs: list[ServerSpec]) -> None:
        """Start ``specs`` in the background (or before the next turn when no event
        loop runs yet); :meth:`ready` waits for them."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._later.extend(specs)
            return
        previous = self._pending

        async def run() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await self.start(specs)

        self._pending = asyncio.ensure_future(run())

    async def ready(self) -> None:
        """Wait for servers started with :meth:`start_soon`."""
        if self._later:
            later, self._later = self._later, []
            self.start_soon(later)
        pending = self._pending
        if pending is not None and pending is not asyncio.current_task():
            await asyncio.wait([pending])
            if self._pending is pending:
                self._pending = None

    async def add(self, spec: ServerSpec) -> McpServer:
        await self.start([spec])
        return self.servers[spec.name]

    async def remove(self, name: str) -> bool:
        await self.ready()
        server = self.servers.pop(name, None)
        if server is None:
            return False
        await server.stop()
        self._sync()
        return True

    async def stop(self) -> None:
        """Stop every server (the session is closing)."""
        self._closed = True
        pending, self._pending = self._pending, None
        if pending is not None and pending is not asyncio.current_task():
            await asyncio.wait([pending])
        for server in list(self.servers.values()):
            await server.stop()
        self.servers.clear()
        self._sync()

    # -- what the session and the front ends see ---------------------------------------------

    async def before_turn(self) -> list[str]:
        """Wait for starting servers; the problems not reported yet, one line each."""
        await self.ready()
        notices = []
        for problem in self.problems:
            if problem not in self._reported:
                self._reported.add(problem)
                notices.append(problem)
        for server in self.servers.values():
            line = server.status_line()
            if server.state == "failed" and line not in self._reported:
                self._reported.add(line)
                notices.append(line + ". Its tools are not available; the session goes on.")
        return notices

    def statuses(self) -> list[dict[str, Any]]:
        """One entry per server: name, transport, status, tools, error, origin, and the
        spec version agreed with it (``protocol``, once it answered)."""
        out = []
        for server in self.servers.values():
            entry: dict[str, Any] = {
                "name": server.name,
                "transport": server.spec.transport,
                "status": server.state,
                "origin": server.spec.origin,
                "tools": [t.name for t in self.tools if _owned_by(t, server)],
            }
            if server.protocol:
                entry["protocol"] = server.protocol
            if server.error:
                entry["error"] = server.error
            out.append(entry)
        return out

    def _sync(self) -> None:
        """Replace the MCP tools in the session's tool list by the current servers' tools."""
        self.tools[:] = [t for t in self.tools if not _is_mcp_tool(t)]
        if not self.servers:
            return
        from iac_kernel.mcp.tool import McpTool

        taken = {t.name for t in self.tools}
        for server in self.servers.values():
            for remote in server.tools:
                tool = McpTool(server, remote)
                if tool.name in taken:
                    log.warning(
                        "MCP tool %s of %s hides another tool; skipped", tool.name, server.name
                    )
                    continue
                taken.add(tool.name)
                self.tools.append(tool)


def _is_mcp_tool(tool: Tool) -> bool:
    return getattr(tool, "server", None) is not None and tool.name.startswith("mcp__")


def _owned_by(tool: Tool, server: McpServer) -> bool:
    return _is_mcp_tool(tool) and getattr(tool, "server", None) is server
