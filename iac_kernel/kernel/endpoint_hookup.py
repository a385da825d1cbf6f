"""The kernel's side of editor hand-over: its ACP endpoint and the editor-turn mirror.

:class:`EditorLink` starts the endpoint (:mod:`iac_kernel.acp.endpoint`) on the kernel's
asyncio loop, keeps the runtime file's session list equal to the notebook's current
session, follows that session with :class:`~iac_kernel.kernel.editor_turns.EditorTurns`,
and removes the runtime file when the kernel stops. ``IAC_KERNEL_ENDPOINT=off`` runs
the kernel without an endpoint (editors then get "session in use" for its session).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
from collections.abc import Callable

from iac_kernel.acp.endpoint import Endpoint, start_endpoint
from iac_kernel.acp.runtime import RuntimeDirError
from iac_kernel.agent.session import AgentSession
from iac_kernel.kernel.editor_turns import EditorTurn, EditorTurns
from iac_kernel.kernel.state import KernelState
from iac_kernel.models.warm import start_warm_up

log = logging.getLogger(__name__)

ENV_SWITCH = "IAC_KERNEL_ENDPOINT"
OFF = ("0", "off", "false", "no")


class EditorLink:
    """One kernel's endpoint and mirror."""

    def __init__(
        self, state: KernelState, is_notebook_turn: Callable[[AgentSession], bool]
    ) -> None:
        self.state = state
        self.endpoint: Endpoint | None = None
        self.turns = EditorTurns(is_notebook_turn)
        self._task: asyncio.Task[None] | None = None
        self._warm_started = False
        state.listeners.append(self._session_changed)

    @property
    def enabled(self) -> bool:
        return os.environ.get(ENV_SWITCH, "on").strip().lower() not in OFF

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the endpoint once ``loop`` (the kernel's main loop) runs (the ACP SDK is
        imported when an editor first connects); with Anthropic credentials, import that
        SDK and build its client in the background so the first prompt does not wait."""
        if not self._warm_started:
            self._warm_started = True
            start_warm_up()
        if self.enabled and self._task is None:
            self._task = loop.create_task(self._start())

    async def _start(self) -> None:
        try:
            self.endpoint = await start_endpoint(
                self.state.manager, cwd=self.state.cwd, sessions=self._session_ids()
            )
        except (OSError, RuntimeDirError) as exc:
            log.warning("the kernel runs without an ACP endpoint: %s", exc)
            return
        except Exception:
            log.exception("the kernel runs without an ACP endpoint")
            return
        # do_shutdown removes it too; this covers an exit without a shutdown request.
        atexit.register(self.endpoint.remove_files)
        log.info("ACP endpoint on %s", self.endpoint.socket_path)

    def _session_ids(self) -> list[str]:
        current = self.state.current
        return [current.session_id] if current is not None and not current.closed else []

    def _session_changed(self, session: AgentSession | None) -> None:
        self.turns.watch(session)
        if self.endpoint is None:
            return
        try:
            self.endpoint.set_sessions(self._session_ids())
        except OSError as exc:
            log.warning("could not update the endpoint's runtime file: %s", exc)

    def editor_turns(self) -> list[EditorTurn]:
        """Editor turns on the current session since the last cell (then forgotten)."""
        return self.turns.take(self.state.current)

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self.endpoint is not None:
            await self.endpoint.close()
