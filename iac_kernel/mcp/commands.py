"""``%mcp`` (notebook) and ``/mcp`` (ACP slash command): list, add, remove servers.

``list`` (or nothing) shows each server with its state, tools or failure; ``add NAME
COMMAND [ARG...]`` / ``add NAME URL [--sse]`` starts one for the session; ``remove NAME``
stops it; ``trust`` shows the commands of the folder's ``.mcp.json`` and ``trust HASH``
trusts that exact content and starts its servers (see :mod:`iac_kernel.mcp.trust`).
The answer is Markdown; failures are answers too (the session goes on), except a
malformed line, which raises :class:`McpCommandError`.
"""

from __future__ import annotations

from typing import Any

from iac_kernel.mcp.config import PROJECT_FILE, McpConfigError, from_add_line
from iac_kernel.mcp.manager import McpManager
from iac_kernel.mcp.trust import (
    SHORT,
    is_trusted,
    read_project,
    show_servers,
    store_path,
    trust,
    untrusted_notice,
)

USAGE = (
    "usage: mcp [list] | mcp add NAME COMMAND [ARG...] | mcp add NAME URL [--sse] | "
    "mcp remove NAME | mcp trust [HASH]"
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
    if verb == "trust":
        return await _trust(session, rest)
    raise McpCommandError(f"unknown mcp command {verb!r}; {USAGE}")


async def _trust(session: Any, code: str) -> str:
    """``trust``: show the project file's servers and the code that trusts them;
    ``trust CODE``: trust exactly that content (read once) and start its servers."""
    if " " in code:
        raise McpCommandError(USAGE)
    project = read_project(session.cwd)
    if project is None:
        raise McpCommandError(f"no {PROJECT_FILE} in {session.cwd}")
    try:
        lines = show_servers(project)
        specs = project.specs()
    except McpConfigError as exc:
        raise McpCommandError(str(exc)) from None
    store = store_path(session)
    trusted = is_trusted(project, store)
    if not code:
        head = f"`{PROJECT_FILE}` (sha256 `{project.short}`) starts these servers on this machine:"
        if trusted:
            tail = "This exact file is trusted already."
        else:
            tail = (
                f"Not started: trust this exact file with `mcp trust {project.short}` "
                "(`%mcp` in a notebook, `/mcp` in an editor)."
            )
        return "\n".join([head, "", *lines, "", tail])
    if len(code) < SHORT or not project.sha256.startswith(code.lower()):
        raise McpCommandError(
            f"{PROJECT_FILE} is not the file that code was shown for (it changed, or the code "
            "is mistyped); run `mcp trust` again to review it"
        )
    if not trusted:
        try:
            trust(project, store)
        except OSError as exc:
            raise McpCommandError(f"cannot record the trust: {exc}") from None
    manager = manager_of(session)
    notice = untrusted_notice(project)
    manager.problems[:] = [p for p in manager.problems if p != notice]
    await manager.start(specs)
    return f"Trusted `{PROJECT_FILE}` (sha256 `{project.short}`).\n\n" + describe(manager)


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
