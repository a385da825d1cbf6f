"""A notebook session's MCP servers from the ``.mcp.json`` in its folder.

:func:`follow_session` is a kernel state listener: when a session becomes current it
gets a manager and the project file's servers start in the background (the session's
next turn waits for them). A malformed file is a problem the next turn reports, not an
error that stops the kernel.
"""

from __future__ import annotations

from typing import Any

from iac_kernel.mcp.config import McpConfigError, from_project_file
from iac_kernel.mcp.manager import McpManager


def follow_session(session: Any) -> None:
    """Start the ``.mcp.json`` servers of a session that has no MCP manager yet."""
    if session is None or getattr(session, "closed", True) or session.mcp is not None:
        return
    manager = McpManager(session.tools)
    session.mcp = manager
    try:
        specs = from_project_file(session.cwd)
    except McpConfigError as exc:
        manager.problems.append(f"MCP servers not started: {exc}")
        return
    if specs:
        manager.start_soon(specs)
