"""The sessions a running Jupyter kernel holds that one ACP connection attached to.

A session whose lock a running kernel holds is not loaded here: ``session/load`` and
``resume`` attach to it through the kernel's endpoint (a
:class:`~iac_kernel.acp.attach.proxy.RemoteSession`), and the session's later requests are
forwarded there by the dispatcher (:meth:`AttachedSessions.for_request`), so its turns
run in the kernel. A lock held by a process without an endpoint is an error naming the
holder.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING, Any

from iac_kernel.acp.attach.runtime import find_endpoint
from iac_kernel.acp.protocol import errors
from iac_kernel.agent.session import AgentSession
from iac_kernel.sessions.store import SessionLockedError, SessionNotFoundError

if TYPE_CHECKING:
    from iac_kernel.acp.attach.proxy import RemoteSession
    from iac_kernel.acp.wire.channel import ClientChannel
    from iac_kernel.agent.manager import SessionManager

#: Methods of the editor that go to the kernel as they are, for an attached session.
FORWARDED = frozenset(
    {
        "session/load",
        "session/resume",
        "session/prompt",
        "session/cancel",
        "session/set_mode",
        "session/set_model",
        "session/set_config_option",
        "config/set",
    }
)


class AttachedSessions:
    """One connection's kernel-held sessions, by session id; others open in ``manager``."""

    def __init__(self, manager: SessionManager, channel: ClientChannel) -> None:
        self.manager = manager
        self.channel = channel
        self.remotes: dict[str, RemoteSession] = {}
        self._lock = asyncio.Lock()

    def __contains__(self, session_id: object) -> bool:
        return session_id in self.remotes

    def for_request(self, method: str, params: Any) -> RemoteSession | None:
        """The attached kernel session a request goes to, if it is for one (load and
        resume are decided by :meth:`open_or_forward`)."""
        if method not in FORWARDED or method in ("session/load", "session/resume"):
            return None
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        return self.remotes.get(session_id) if isinstance(session_id, str) else None

    async def detach(self, session_id: Any) -> bool:
        """Detach from ``session_id`` (the kernel keeps it); False when not attached."""
        remote = self.remotes.pop(session_id, None) if isinstance(session_id, str) else None
        if remote is None:
            return False
        await remote.close()
        return True

    async def detach_all(self) -> None:
        """The connection ended: the kernels cancel the turns of that connection."""
        for remote in list(self.remotes.values()):
            await remote.close()
        self.remotes.clear()

    async def open_or_forward(
        self,
        method: str,
        cwd: str,
        session_id: str,
        dirs: list[str] | None = None,
    ) -> AgentSession | dict[str, Any]:
        """The session opened here, or the kernel's answer to ``method`` when a running
        kernel holds it. If the kernel has let it go meanwhile (the notebook switched
        sessions), open it again: its lock is free now. ``dirs``: the request's
        ``additionalDirectories``, passed on to the kernel."""
        for attempt in (1, 2):
            opened = await self._open(session_id)
            if isinstance(opened, AgentSession):
                return opened
            params: dict[str, Any] = {"cwd": cwd, "sessionId": session_id, "mcpServers": []}
            if dirs:
                params["additionalDirectories"] = dirs
            try:
                return await opened.forward(method, params)
            except Exception:  # RequestError; ``released``: the kernel let it go
                if not opened.released or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _open(self, session_id: str) -> AgentSession | RemoteSession:
        remote = self.remotes.get(session_id) if isinstance(session_id, str) else None
        if remote is not None and not remote.gone:
            return remote
        # manager.load is synchronous on purpose: two concurrent loads of one id cannot
        # interleave, so the second finds the first's runtime.
        try:
            return self.manager.load(session_id)
        except (SessionNotFoundError, TypeError):
            raise errors.session_not_found() from None
        except SessionLockedError as exc:
            remote = await self._attach(session_id, exc)
            if remote is None:
                raise errors.invalid_field("session_id", f"Session is in use: {exc}") from None
            return remote

    async def _attach(self, session_id: str, locked: SessionLockedError) -> RemoteSession | None:
        """Attach to the kernel that holds ``session_id``; ``None`` if no running kernel
        on this host advertises it (then the lock's holder is someone else)."""
        from iac_kernel.acp.attach.proxy import AttachError, RemoteSession  # uses the SDK

        pid, host = locked.holder.get("pid"), locked.holder.get("host")
        if type(pid) is not int or host != socket.gethostname():
            return None
        info = find_endpoint(session_id, pid)
        if info is None:
            return None
        async with self._lock:
            existing = self.remotes.get(session_id)
            if existing is not None and not existing.gone:
                return existing
            try:
                remote = await RemoteSession.attach(session_id, info, self.channel)
            except AttachError as exc:
                raise errors.invalid_field("session_id", f"Session is in use: {exc}") from None
            remote.on_gone = self._forget
            self.remotes[session_id] = remote
            return remote

    def _forget(self, remote: RemoteSession) -> None:
        if self.remotes.get(remote.session_id) is remote:
            del self.remotes[remote.session_id]
