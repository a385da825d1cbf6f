"""The session manager of a Jupyter server's ACP endpoint: the user's store, new
sessions only inside the server's ``root_dir``, and sessions let go when the last
connection that opened them ends (as ``iac-kernel acp`` lets go when it exits), so a
notebook can take them over."""

from __future__ import annotations

import contextlib
import logging
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from iac_kernel.agent.manager import SessionManager
from iac_kernel.agent.session import AgentSession
from iac_kernel.config import Settings
from iac_kernel.sessions.store import SessionNotFoundError

log = logging.getLogger(__name__)

#: The sessions the connection being served opened. Set in the connection's task; the
#: SDK runs each request in a task created from it, so the handlers see it.
_claims: ContextVar[set[str] | None] = ContextVar("iac_server_claims", default=None)


class RootedManager(SessionManager):
    """A :class:`SessionManager` shared by the server's connections.

    New sessions start inside ``root_dir``; loading, listing and forking stay as they
    are (the store is the user's, and this server runs as that user).
    """

    def __init__(self, settings: Settings, root_dir: str, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.root_dir = os.path.realpath(root_dir)
        self._connections: list[set[str]] = []

    def new(self, cwd: str, **meta: Any) -> AgentSession:
        cwd = self._check_cwd(cwd)
        if not inside(cwd, self.root_dir):
            raise ValueError(f"cwd {cwd!r} is outside the Jupyter server's root_dir")
        return _claim(super().new(cwd, **meta))

    def load(self, session_id: str) -> AgentSession:
        return _claim(super().load(session_id))

    def fork(self, session_id: str) -> AgentSession:
        return _claim(super().fork(session_id))

    def connection(self) -> set[str]:
        """Start counting the sessions the current task's connection opens."""
        claims: set[str] = set()
        self._connections.append(claims)
        _claims.set(claims)
        return claims

    async def release(self, claims: set[str]) -> None:
        """The connection ended (its turns already cancelled): close the sessions it
        opened that no other connection has open."""
        with contextlib.suppress(ValueError):
            self._connections.remove(claims)
        for session_id in sorted(claims):
            if any(session_id in other for other in self._connections):
                continue
            with contextlib.suppress(SessionNotFoundError):
                await self.close(session_id)


def _claim(session: AgentSession) -> AgentSession:
    claims = _claims.get()
    if claims is not None:
        claims.add(session.session_id)
    return session


def inside(path: str, root: str) -> bool:
    """Whether ``path`` (symlinks resolved) is ``root`` or below it."""
    real = Path(os.path.realpath(path))
    return real == Path(root) or Path(root) in real.parents


def make_manager(root_dir: str) -> RootedManager:
    """The server's manager, with settings from the server's environment."""
    problems: list[str] = []
    settings = Settings.from_env(problems=problems)
    for line in problems:
        log.warning("setting ignored: %s", line)
    holder = f"jupyter server (pid {os.getpid()})"
    return RootedManager(settings, root_dir, holder=holder, origin="acp")
