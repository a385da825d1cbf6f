"""A notebook session's MCP servers from the ``.mcp.json`` in its folder.

:func:`follow_session` is a kernel state listener: when a session becomes current it
gets a manager and, when the user trusted the file's exact content
(:mod:`iac_kernel.mcp.trust`), the project file's servers start in the background (the
session's next turn waits for them). A new or changed file starts nothing: the next turn
and ``%mcp`` say how to review and trust it (``%mcp trust``). A malformed file is a
problem the next turn reports, not an error that stops the kernel.
"""

from __future__ import annotations

from typing import Any

from iac_kernel.mcp.config import McpConfigError
from iac_kernel.mcp.manager import McpManager
from iac_kernel.mcp.trust import is_trusted, read_project, store_path, untrusted_notice


def follow_session(session: Any) -> None:
    """Start the trusted ``.mcp.json`` servers of a session that has no MCP manager yet."""
    if session is None or getattr(session, "closed", True) or session.mcp is not None:
        return
    manager = McpManager(session.tools)
    session.mcp = manager
    project = read_project(session.cwd)
    if project is None:
        return
    try:
        specs = project.specs()
    except McpConfigError as exc:
        manager.problems.append(f"MCP servers not started: {exc}")
        return
    if not specs:
        return
    if not is_trusted(project, store_path(session)):
        manager.problems.append(untrusted_notice(project))
        return
    manager.start_soon(specs)
