"""``%mcp`` (notebook) and ``/mcp`` (ACP slash command): list, add, remove servers.

``list`` (or nothing) shows each server with its state, tools or failure; ``add NAME
COMMAND [ARG...]`` / ``add NAME URL [--sse]`` starts one for the session; ``remove NAME``
stops it. The answer is Markdown; failures are answers too (the session goes on),
except a malformed line, which raises :class:`McpCommandError`.
"""

from __future__ import annotations

from typing import Any

from iac_kernel.mcp.config import PROJECT_FILE, McpConfigError, from_add_line
from iac_kernel.mcp.manager import McpManager

USAGE = (
    "usage: mcp [list] | mcp add NAME COMMAND [ARG...] | mcp add NAME URL [--sse] | mcp remove NAME"
)


class McpCommandError(ValueError):
    """The command line is malformed; the message says how to write it."""


def manager_of(session: Any) -> McpManager:
    """The session's manager, created on first use (its tools go in ``session.tools``)."""
    if session.mcp is None:
        session.mcp = McpManager(session.tools)
    return session.mcp


async def run_mcp_command(session: Any, args: str) -> str:
    """Run one ``mcp`` command line against ``session``; Markdown for the user."""
    verb, _, rest = args.strip().partition(" ")
    rest = rest.strip()
    if verb in ("", "list"):
        if rest:
            raise McpCommandError(USAGE)
        if session.mcp is not None:
            await session.mcp.ready()
        return describe(session.mcp)
    if verb == "add":
        try:
            spec = from_add_line(rest, str(session.cwd))
        except McpConfigError as exc:
            raise McpCommandError(f"{exc}\n{USAGE}") from None
        manager = manager_of(session)
        await manager.ready()
        replaced = spec.name in manager.servers
        server = await manager.add(spec)
        if server.running:
            verb_done = "Restarted" if replaced else "Started"
            return f"{verb_done} MCP server `{spec.name}`.\n\n" + describe(manager)
        return f"MCP server `{spec.name}` failed: {server.error}\n\n" + describe(manager)
    if verb == "remove":
        if not rest or " " in rest:
            raise McpCommandError(USAGE)
        if session.mcp is None or not await session.mcp.remove(rest):
            known = ", ".join(session.mcp.servers) if session.mcp else ""
            raise McpCommandError(
                f"no MCP server {rest!r}" + (f" (servers: {known})" if known else "")
            )
        return f"Stopped MCP server `{rest}`."
    raise McpCommandError(f"unknown mcp command {verb!r}; {USAGE}")


def describe(manager: McpManager | None) -> str:
    """The servers as a Markdown list."""
    statuses = manager.statuses() if manager is not None else []
    problems = manager.problems if manager is not None else []
    if not statuses and not problems:
        return (
            f"No MCP servers. Add one with `mcp add NAME COMMAND [ARG...]` or put them in "
            f"`{PROJECT_FILE}`."
        )
    lines = []
    for entry in statuses:
        head = (
            f"- `{entry['name']}` ({entry['transport']}, from {entry['origin']}): {entry['status']}"
        )
        if entry.get("error"):
            head += f": {entry['error']}"
        lines.append(head)
        if entry["tools"]:
            lines.append("  tools: " + ", ".join(f"`{name}`" for name in entry["tools"]))
    lines += [f"- {problem}" for problem in problems]
    return "\n".join(lines)
