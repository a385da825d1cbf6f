"""The kernel's side of editor hand-over: its ACP endpoint, and what editors did in the
notebook's session for the next cell to show.

:class:`EditorLink` starts the endpoint (:mod:`iac_kernel.acp.serve.endpoint`) on the kernel's
asyncio loop, keeps the runtime file's session list equal to the notebook's current
session, and removes the runtime file when the kernel stops. ``IAC_KERNEL_ENDPOINT=off``
runs the kernel without an endpoint (editors then get "session in use" for its session).

An editor attached through the endpoint runs its turns in this kernel, on the notebook's
own session, so the history already has them. The notebook only has to be told:
:class:`EditorTurns` watches the current session (an observer sees every event of every
turn), records the turns no cell started, and the next cell shows a short "From the
editor" summary of them before anything else. The summary goes into the next cell rather
than a live display: IOPub output sent outside an execute request has no cell to land in
(JupyterLab drops it or shows it in the log console), so a live mirror would be
unreliable.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from iac_kernel.acp.attach.runtime import RuntimeDirError
from iac_kernel.acp.serve.endpoint import Endpoint, start_endpoint
from iac_kernel.agent.session import AgentSession
from iac_kernel.config import FALSE_WORDS
from iac_kernel.events import (
    AgentEvent,
    ErrorNotice,
    TextDelta,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
    UserMessage,
)
from iac_kernel.kernel.session.state import KernelState
from iac_kernel.models.registry import start_warm_up

log = logging.getLogger(__name__)

ENV_SWITCH = "IAC_KERNEL_ENDPOINT"
#: Characters of an answer shown in the summary (the history keeps all of it).
ANSWER_LIMIT = 1500
PROMPT_LIMIT = 300


@dataclass
class EditorTurn:
    prompt: str
    text: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    failed_tools: int = 0
    errors: list[str] = field(default_factory=list)
    stop_reason: str | None = None

    @property
    def answer(self) -> str:
        return "".join(self.text).strip()

    @property
    def finished(self) -> bool:
        return self.stop_reason is not None


class EditorTurns:
    """Records the turns of the watched session that no notebook cell started."""

    def __init__(self, is_notebook_turn: Callable[[AgentSession], bool]) -> None:
        self.is_notebook_turn = is_notebook_turn
        self.session: AgentSession | None = None
        self.turns: list[EditorTurn] = []
        self._recording: EditorTurn | None = None
        self._observer: Callable[[AgentEvent], None] | None = None

    def watch(self, session: AgentSession | None) -> None:
        """Follow ``session`` (the notebook's current one) instead of the previous one."""
        if session is self.session:
            return
        if self.session is not None and self._observer in self.session.observers:
            self.session.observers.remove(self._observer)
        self.session, self.turns, self._recording, self._observer = session, [], None, None
        if session is not None:

            def observe(event: AgentEvent) -> None:
                self._see(session, event)

            self._observer = observe
            session.observers.append(observe)

    def _see(self, session: AgentSession, event: AgentEvent) -> None:
        if isinstance(event, UserMessage):
            if self.is_notebook_turn(session):
                self._recording = None
            else:
                self._recording = EditorTurn(event.text)
                self.turns.append(self._recording)
            return
        turn = self._recording
        if turn is None:
            return
        if isinstance(event, TextDelta):
            turn.text.append(event.text)
        elif isinstance(event, ToolCallStarted):
            turn.tools.append(event.title or event.name)
        elif isinstance(event, ToolCallResult) and event.status == "failed":
            turn.failed_tools += 1
        elif isinstance(event, ErrorNotice):
            turn.errors.append(event.message)
        elif isinstance(event, TurnEnded):
            turn.stop_reason = str(event.stop_reason)
            self._recording = None

    def take(self, session: AgentSession | None) -> list[EditorTurn]:
        """The finished editor turns of ``session`` not shown yet (a running one waits
        for the next cell)."""
        if session is None or session is not self.session:
            return []
        done = [turn for turn in self.turns if turn.finished]
        self.turns = [turn for turn in self.turns if not turn.finished]
        return done


def summary_markdown(turns: list[EditorTurn]) -> str:
    """The "From the editor" note for ``turns``."""
    count = "a turn" if len(turns) == 1 else f"{len(turns)} turns"
    parts = [f"**From the editor** ({count} since the last cell, now in this session's history):"]
    for turn in turns:
        lines = [f"**Prompt:** {_clip(turn.prompt, PROMPT_LIMIT)}", ""]
        lines += (_clip(turn.answer, ANSWER_LIMIT) or "_(no answer text)_").splitlines()
        if turn.tools:
            calls = ", ".join(f"`{title}`" for title in turn.tools)
            failed = f" ({turn.failed_tools} failed)" if turn.failed_tools else ""
            lines += ["", f"_Tools: {calls}{failed}_"]
        lines += [f"_{message}_" for message in turn.errors]
        if turn.stop_reason not in (None, "end_turn"):
            lines += ["", f"_Turn ended: {turn.stop_reason}_"]
        parts.append("\n".join(f"> {line}" if line else ">" for line in lines))
    return "\n\n".join(parts)


def summary_plain(turns: list[EditorTurn]) -> str:
    out = ["From the editor:"]
    for turn in turns:
        out.append(f"Prompt: {_clip(turn.prompt, PROMPT_LIMIT)}")
        out.append(_clip(turn.answer, ANSWER_LIMIT) or "(no answer text)")
        if turn.tools:
            out.append("Tools: " + ", ".join(turn.tools))
        if turn.stop_reason not in (None, "end_turn"):
            out.append(f"Turn ended: {turn.stop_reason}")
    return "\n".join(out)


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


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
        return os.environ.get(ENV_SWITCH, "on").strip().lower() not in FALSE_WORDS

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
