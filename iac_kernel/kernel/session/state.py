"""The kernel's sessions (the current one, created on first use; switching, listing) and
the notebook turns running in them.

One kernel drives one session at a time. It is created lazily in the kernel's working
directory (Jupyter starts kernels in the notebook's folder), titled after the notebook
when jupyter-server says which one (``JPY_SESSION_NAME``), otherwise after the first
prompt, with origin ``kernel``. It lives in the shared on-disk store, so an editor's
``session/list`` shows it (and cannot take it while this kernel holds its lock).
``%new``, ``%load`` and ``%fork`` switch to another session and release the old one.

Interrupt. The kernelspec uses ``interrupt_mode: signal``. ipykernel would turn SIGINT into a
KeyboardInterrupt somewhere inside the event loop, which cannot stop an awaited turn and
can kill the loop; the kernel installs its own SIGINT handler instead, which calls
:meth:`RunningTurns.interrupt`: every running turn is cancelled on its own loop, ends with
stop reason ``cancelled`` and a valid history, and its cell ends with an ``error`` reply
(so "Run all" stops there, as Jupyter users expect). A SIGINT with no turn is ignored.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.agent.manager import SessionManager
from iac_kernel.agent.session import AgentSession
from iac_kernel.config import PERMISSION_UIS, Settings
from iac_kernel.events import Usage
from iac_kernel.kernel.render.turn import CallDisplays
from iac_kernel.mcp.trust import follow_session
from iac_kernel.sessions.store import SessionLockedError, SessionMeta, SessionNotFoundError

#: A session id prefix must be at least this long to pick a session.
MIN_PREFIX = 4


class SessionError(Exception):
    """A session command failed (not found, ambiguous, locked, busy); the text says why."""


class KernelState:
    """What a kernel remembers between cells."""

    def __init__(
        self,
        settings: Settings,
        cwd: str,
        *,
        notebook: str | None = None,
        permission_ui: str = "auto",
    ):
        self.cwd = os.path.realpath(cwd)
        #: The notebook's folder (where Jupyter started the kernel): ``%cwd`` leaves it.
        self.notebook_dir = self.cwd
        #: Runbook parameters from parameters cells (kernel/parameters.py), and whether
        #: the agent has yet to see them (they go with the next prompt).
        self.parameters: dict[str, Any] = {}
        self.parameters_unsent = False
        self.notebook = notebook
        holder = f"iac-kernel Jupyter kernel (pid {os.getpid()}"
        holder += f", notebook {notebook})" if notebook else ")"
        self.manager = SessionManager(settings, holder=holder, origin="kernel")
        #: Called with the new current session whenever it changes (the ACP endpoint
        #: advertises it, the editor-turn mirror follows it).
        self.listeners: list[Callable[[AgentSession | None], None]] = [follow_session]
        self._current: AgentSession | None = None
        if permission_ui not in PERMISSION_UIS:
            permission_ui = "auto"
        self.permission_ui = permission_ui

    @property
    def current(self) -> AgentSession | None:
        return self._current

    @current.setter
    def current(self, session: AgentSession | None) -> None:
        changed = session is not self._current
        self._current = session
        if changed:
            for listener in list(self.listeners):
                listener(session)

    @property
    def settings(self) -> Settings:
        """The defaults new sessions start from (``%config`` changes them too)."""
        return self.manager.settings

    def notebook_title(self) -> str | None:
        if not self.notebook:
            return None
        name = Path(self.notebook).name
        return name[:-6] if name.endswith(".ipynb") else name

    def session(self) -> AgentSession:
        """The current session, created in the kernel's cwd on first use."""
        if self.current is None or self.current.closed:
            self.current = self._create()
        return self.current

    def _create(self, title: str | None = None) -> AgentSession:
        meta: dict[str, str] = {}
        if not title and self.notebook_title():
            title = self._unused_title(self.notebook_title() or "")
        if title:
            meta["title"] = title
        if self.notebook:
            meta["notebook"] = self.notebook
        try:
            return self.manager.new(self.cwd, **meta)
        except ValueError as exc:
            raise SessionError(str(exc)) from None

    def _unused_title(self, title: str) -> str:
        """``title``, or ``title (2)``, ``(3)``… when a session of this folder has it (a
        restarted kernel starts a new session; it must not look like the old one)."""
        try:
            taken = {meta.title for meta in self.manager.list(self.cwd)}
        except OSError:
            return title
        if title not in taken:
            return title
        number = 2
        while f"{title} ({number})" in taken:
            number += 1
        return f"{title} ({number})"

    async def _switch(self, session: AgentSession) -> AgentSession:
        old, self.current = self.current, session
        if old is not None and old is not session and not old.closed:
            await self.manager.close(old.session_id)
        return session

    def _check_idle(self) -> None:
        if self.current is not None and self.current.busy:
            raise SessionError("a turn is running in this session; wait for it or interrupt it")

    async def new(self, title: str | None = None) -> AgentSession:
        self._check_idle()
        return await self._switch(self._create(title))

    async def load(self, id_or_prefix: str) -> AgentSession:
        self._check_idle()
        session_id = self.resolve(id_or_prefix)
        if self.current is not None and self.current.session_id == session_id:
            return self.current
        try:
            session = self.manager.load(session_id)
        except SessionNotFoundError:
            raise SessionError(f"no session {session_id} in the store") from None
        except SessionLockedError as exc:
            raise SessionError(str(exc)) from None
        return await self._switch(session)

    async def fork(self) -> AgentSession:
        self._check_idle()
        source = self.session()
        try:
            fork = self.manager.fork(source.session_id)
        except SessionNotFoundError:
            raise SessionError(f"no session {source.session_id} in the store") from None
        return await self._switch(fork)

    def resolve(self, id_or_prefix: str) -> str:
        """A full session id from an id or a unique prefix of one."""
        wanted = id_or_prefix.strip()
        if not wanted:
            raise SessionError("give a session id (see %sessions)")
        ids = [meta.session_id for meta in self.manager.list()]
        if wanted in ids:
            return wanted
        if len(wanted) < MIN_PREFIX:
            raise SessionError(f"session id prefix {wanted!r} is too short (use {MIN_PREFIX}+)")
        found = [i for i in ids if i.startswith(wanted)]
        if not found:
            raise SessionError(f"no session matches {wanted!r} (see %sessions all)")
        if len(found) > 1:
            raise SessionError(f"{wanted!r} matches {len(found)} sessions; give more of the id")
        return found[0]

    def sessions(self, everywhere: bool = False) -> list[SessionMeta]:
        return self.manager.list(None if everywhere else self.cwd)

    def session_ids(self) -> list[str]:
        return [meta.session_id for meta in self.manager.list()]

    async def close(self) -> None:
        await self.manager.close_all()
        self.current = None


@dataclass(eq=False)
class RunningTurn:
    """One cell's turn while it runs."""

    session: AgentSession
    loop: asyncio.AbstractEventLoop
    #: The execute_request running the turn, and the notebook cell it came from.
    msg_id: str = ""
    cell_id: str | None = None
    #: The cell's execution count (a page loaded mid-turn shows it when the turn ends).
    execution_count: int = 0
    #: The turn's usage so far (after each model call).
    usage: Usage | None = None
    #: Each tool call's displays in their latest form (the status comm's ``call_card``).
    displays: CallDisplays = field(default_factory=CallDisplays)


class RunningTurns:
    """The running turns; safe to read from any thread (SIGINT, the status comm)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: set[RunningTurn] = set()

    def add(self, turn: RunningTurn) -> None:
        with self._lock:
            self._turns.add(turn)

    def discard(self, turn: RunningTurn) -> None:
        with self._lock:
            self._turns.discard(turn)

    def snapshot(self) -> list[RunningTurn]:
        with self._lock:
            return list(self._turns)

    def runs(self, session: AgentSession) -> bool:
        """True when a notebook turn runs in ``session`` (not an editor's)."""
        return any(turn.session is session for turn in self.snapshot())

    def call_card(
        self, call_id: str | None, display_id: str | None
    ) -> tuple[str, list[dict]] | None:
        """The displays of a call of a running turn, named by its id or by one of its
        display ids: ``(call id, outputs)``, or None when no running turn has it."""
        for turn in self.snapshot():
            found = turn.displays.find(call_id, display_id)
            if found is not None:
                return found
        return None

    def interrupt(self) -> bool:
        """Cancel every running turn on its own loop; False when none runs."""
        running = self.snapshot()
        for turn in running:
            turn.loop.call_soon_threadsafe(turn.session.cancel)
        return bool(running)
