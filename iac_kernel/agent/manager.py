"""The registry of live sessions in one process, on top of the store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from iac_kernel.agent.session import AgentSession
from iac_kernel.config import Settings
from iac_kernel.sessions.store import (
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    collector_paused,
)
from iac_kernel.tools.base import Tool


def _default_tools() -> list[Tool]:
    from iac_kernel.tools.registry import build_tools

    return build_tools()


class SessionManager:
    """Creates, loads, forks and closes sessions; at most one runtime per session id."""

    def __init__(
        self,
        settings: Settings,
        *,
        holder: str,
        origin: str = "acp",
    ):
        self.settings = settings
        self.store = SessionStore(settings.sessions_dir)
        self.holder = holder
        self.origin = origin
        self.sessions: dict[str, AgentSession] = {}

    def _check_cwd(self, cwd: str) -> str:
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise ValueError(f"cwd must be an absolute path, got {cwd!r}")
        if not Path(cwd).is_dir():
            raise ValueError(f"cwd {cwd!r} is not a directory")
        return os.path.normpath(cwd)

    def new(self, cwd: str, **meta: Any) -> AgentSession:
        """A new session in ``cwd`` (absolute, existing directory)."""
        cwd = self._check_cwd(cwd)
        meta.setdefault("origin", self.origin)
        meta.setdefault("mode", self.settings.mode)
        stored_meta = self.store.create(cwd, **meta)
        try:
            return self._open(stored_meta.session_id)
        except BaseException:
            self.store.remove(stored_meta.session_id)  # no orphan in the list
            raise

    def get(self, session_id: str) -> AgentSession:
        """A session this process already runs; SessionNotFoundError otherwise."""
        try:
            return self.sessions[session_id]
        except (KeyError, TypeError):
            raise SessionNotFoundError(session_id) from None

    def load(self, session_id: str) -> AgentSession:
        """The live session, or load it from disk (repairing it) and take its lock.

        Raises SessionNotFoundError, or SessionLockedError naming the process that holds it.
        """
        if session_id in self.sessions:
            return self.sessions[session_id]
        return self._open(session_id)

    def _open(self, session_id: str) -> AgentSession:
        writer = self.store.open_writer(session_id, self.holder)
        try:
            with collector_paused():
                stored = self.store.load(writer)
                session = AgentSession(writer, stored, self.settings, _default_tools())
        except BaseException:
            writer.close()
            raise
        self.sessions[session_id] = session
        return session

    def fork(self, session_id: str) -> AgentSession:
        """An independent copy of a stored or live session, persisted under a new id."""
        if not self.store.exists(session_id):
            raise SessionNotFoundError(session_id)
        meta = self.store.fork(session_id, origin=self.origin)
        try:
            return self._open(meta.session_id)
        except BaseException:
            self.store.remove(meta.session_id)
            raise

    def list(self, cwd: str | None = None) -> list[SessionMeta]:
        return self.store.list(cwd)

    async def close(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            raise SessionNotFoundError(session_id)
        await session.close()

    async def close_all(self) -> None:
        for session_id in list(self.sessions):
            await self.close(session_id)
