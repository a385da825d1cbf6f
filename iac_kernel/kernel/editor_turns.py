"""What editors did in the notebook's session, for the next cell to show.

An editor attached through the kernel's ACP endpoint runs its turns in this kernel, on
the notebook's own session, so the history already has them. The notebook only has to
be told: :class:`EditorTurns` watches the current session (an observer sees every event
of every turn), records the turns no cell started, and the next cell shows a short
"From the editor" summary of them before anything else.

The summary goes into the next cell rather than a live display: IOPub output sent
outside an execute request has no cell to land in (JupyterLab drops it or shows it in
the log console), so a live mirror would be unreliable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from iac_kernel.agent.session import AgentSession
from iac_kernel.events import (
    AgentEvent,
    ErrorNotice,
    TextDelta,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
    UserMessage,
)

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
