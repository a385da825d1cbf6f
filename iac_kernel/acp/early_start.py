"""Serving the first requests of ``iac-kernel acp`` while the ACP SDK still imports.

:class:`EarlyStart` reads stdin on the main thread while :class:`~iac_kernel.acp.sdk.Loader`
imports the agent core and then the SDK in the background. It answers a plainly valid
``initialize`` at once, and then plainly valid ``session/new`` requests as soon as the
core is in: the session is created by the same :class:`~iac_kernel.sessions.manager.SessionManager`
code the SDK path uses and described by :mod:`iac_kernel.acp.session_state` (what
:mod:`iac_kernel.acp.early` accepts and why). It stops, leaving the unread rest in
:attr:`EarlyStart.buffer` for the SDK's connection, when the SDK is loaded, at the first
message it cannot answer, or at end of input.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iac_kernel.acp import early

if TYPE_CHECKING:
    from iac_kernel.acp.sdk import Loader
    from iac_kernel.agent.session import AgentSession
    from iac_kernel.sessions.manager import SessionManager

log = logging.getLogger(__name__)

#: What an early ``session/new`` needs, imported by the loader before the SDK: creating
#: and describing a session then imports nothing more (a test checks), so the main
#: thread never waits on an import lock the SDK import holds.
CORE_MODULES = (
    "iac_kernel.config",
    "iac_kernel.sessions.manager",
    "iac_kernel.acp.session_state",
    "iac_kernel.tools.registry",
    "iac_kernel.guard.sandbox",
)
#: Bytes read while waiting for the SDK before the reader takes over.
EARLY_MAX = 1024 * 1024


class EarlyStart:
    """Reads ``in_fd`` and answers what it safely can on ``out_fd`` until the SDK is in."""

    def __init__(
        self,
        in_fd: int,
        out_fd: int,
        loader: Loader,
        make_manager: Callable[[], SessionManager],
    ) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.loader = loader
        self.make_manager = make_manager
        self.buffer = b""
        self.eof = False
        #: The ``initialize`` request answered early, replayed into the agent later.
        self.initialize: dict | None = None
        #: Sessions created for early ``session/new`` requests, with their answers.
        self.sessions: list[tuple[AgentSession, dict[str, Any]]] = []
        #: The manager, once an early ``session/new`` needed it.
        self.manager: SessionManager | None = None

    def run(self) -> None:
        # The loader wakes the wait for input when the SDK is in, so a client that sent
        # nothing more (it waits for the new session's commands) is served at once.
        wake_read, wake_write = os.pipe()
        self.loader.on_loaded.append(lambda: _poke(wake_write))
        try:
            self._run(wake_read)
        finally:
            self.loader.on_loaded.clear()
            os.close(wake_read)
            os.close(wake_write)

    def _run(self, wake_fd: int) -> None:
        while not self.loader.loaded.is_set() and not self.eof:
            newline = self.buffer.find(b"\n")
            if newline < 0:
                if len(self.buffer) > EARLY_MAX or not self._read(wake_fd):
                    return
                continue
            line = self.buffer[:newline]
            if line.strip() and not self._answer(line):
                return
            self.buffer = self.buffer[newline + 1 :]

    def _answer(self, line: bytes) -> bool:
        """Answer ``line`` if it is one of the requests answered early."""
        if self.initialize is None:
            message = early.parse_initialize(line)
            if message is None:
                return False
            write_all(self.out_fd, early.answer_bytes(message["id"]))
            self.initialize = message
            return True
        message = early.parse_new_session(line)
        result = None if message is None else self._new_session(message["params"]["cwd"])
        if message is None or result is None:
            return False
        write_all(self.out_fd, early.answer_bytes(message["id"], result))
        return True

    def _new_session(self, cwd: str) -> dict[str, Any] | None:
        """A new session's answer; ``None`` leaves the request to the SDK, which answers
        a failure (a bad ``cwd``, a store it may not use) with the JSON-RPC error naming
        it. Nothing raised here may end the process: this path only saves time."""
        if not self.loader.core_ready() or self.loader.loaded.is_set():
            return None
        from iac_kernel.acp.session_state import new_session_answer

        try:
            if self.manager is None:
                self.manager = self.make_manager()
            session = self.manager.new(cwd)
        except Exception as exc:  # e.g. StoreLinkError: the index replaced by a link
            log.info("session/new left to the SDK: %s", exc)
            return None
        answer = new_session_answer(session)
        self.sessions.append((session, answer))
        return answer

    def _read(self, wake_fd: int) -> bool:
        """Read what ``in_fd`` has; False at end of input or when woken by the loader."""
        try:
            ready, _, _ = select.select([self.in_fd, wake_fd], [], [])
        except (OSError, ValueError):
            ready = [self.in_fd]
        if self.in_fd not in ready:
            return False
        try:
            data = os.read(self.in_fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True


def _poke(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, b"x")


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
