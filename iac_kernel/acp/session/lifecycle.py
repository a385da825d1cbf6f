"""Session life-cycle steps the ACP agent shares: what a request that opens a session
says (cwd, MCP servers, additional directories), applying it, and ``session/delete``."""

from __future__ import annotations

import os
from typing import Any

from iac_kernel.acp.protocol import errors
from iac_kernel.agent.manager import SessionManager
from iac_kernel.agent.session import AgentSession
from iac_kernel.mcp.commands import manager_of
from iac_kernel.mcp.config import McpConfigError, ServerSpec, from_acp


def opening(params: Any) -> tuple[str, list[ServerSpec], list[str]]:
    """What a request that opens a session (new, load, resume, fork) says: its ``cwd``
    (normalised; ``session/list``'s too), ``mcpServers`` and ``additionalDirectories``
    (missing lists = none); one -32602 naming every field that is wrong."""
    params = params if isinstance(params, dict) else {}
    problems: dict[str, str] = {}
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        problems["cwd"] = f"cwd must be an absolute path, got {cwd!r}"
    specs: list[ServerSpec] = []
    servers = params.get("mcpServers")
    try:
        if servers is not None and not isinstance(servers, list):
            raise McpConfigError("must be a list of MCP servers")
        specs = from_acp(servers, cwd if isinstance(cwd, str) else None)
    except McpConfigError as exc:
        problems["mcpServers"] = str(exc)
    dirs: list[str] = []
    try:
        dirs = _directories(params.get("additionalDirectories"))
    except ValueError as exc:
        problems["additionalDirectories"] = str(exc)
    if problems:
        raise errors.invalid_fields(problems)
    return os.path.normpath(cwd), specs, dirs


def _directories(dirs: Any) -> list[str]:
    """``additionalDirectories`` normalised; ValueError unless each is an absolute path
    of an existing directory."""
    if dirs is None:
        return []
    if not isinstance(dirs, list):
        raise ValueError("must be a list of absolute paths")
    out: list[str] = []
    for item in dirs:
        if not isinstance(item, str) or not os.path.isabs(item) or "\0" in item:
            raise ValueError(f"each must be an absolute path, got {item!r}")
        if not os.path.isdir(item):
            raise ValueError(f"not a directory: {item}")
        if os.pathsep in item or "," in item:
            raise ValueError(f"a path with {os.pathsep!r} or ',' is not supported: {item}")
        out.append(os.path.normpath(item))
    return out


def set_dirs(session: AgentSession, dirs: list[str]) -> None:
    """Make ``dirs`` the session's additional workspace roots (replacing any): tools use
    them like the cwd and the sandbox binds them writable. The store's metadata keeps
    them (``session/list`` reports them); as the schema says for load and resume, a
    request without them activates none."""
    session.set_config("additional_directories", os.pathsep.join(dirs))
    if list(session.meta.additional_directories) != dirs:
        session.writer.update(additional_directories=list(dirs))


async def start_mcp(session: AgentSession, specs: list[ServerSpec]) -> None:
    """Start the servers with the session; failures are reported in ``_meta``, not raised."""
    if specs:
        await manager_of(session).start(specs)


async def delete_stored(manager: Any, session_id: Any, *, attached: bool) -> None:
    """Delete a stored session, or raise -32602 saying who holds it.

    ``manager`` is the connection's session manager; the kernel's endpoint passes a view
    of the kernel's sessions, whose sessions are never deleted from an editor.
    """
    if not isinstance(session_id, str) or not manager.store.exists(session_id):
        raise errors.session_not_found()
    if attached or not isinstance(manager, SessionManager):
        raise errors.invalid_field(
            "session_id", "Session is in use by a Jupyter kernel; close it there first"
        )
    live = manager.sessions.get(session_id)
    if live is not None:
        if live.busy:
            raise errors.session_busy()
        await manager.close(session_id)
    holder = manager.store.lock_holder(session_id)
    if holder is not None:
        who = holder.get("holder") or f"pid {holder.get('pid')}"
        raise errors.invalid_field("session_id", f"Session is in use by {who}")
    manager.store.remove(session_id)
