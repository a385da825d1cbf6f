"""A live session: one conversation with its loop, settings, permissions and store writer.

Both front ends drive sessions through this class only, so the kernel and the ACP server
share the loop, the tools, the permission rules and the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iac_kernel.agent import history
from iac_kernel.agent.loop import AgentLoop, Conversation, build_system_prompt
from iac_kernel.agent.permissions import AskPermission, PermissionGate
from iac_kernel.config import MODES, Settings, path_list
from iac_kernel.events import (
    AgentEvent,
    Emit,
    ErrorNotice,
    TurnEnded,
    Usage,
    UserMessage,
    send,
)
from iac_kernel.models.base import Model, ModelError
from iac_kernel.models.providers import RunningCost, turn_cost
from iac_kernel.models.registry import (
    canonical_id,
    create_model,
    default_model_id,
    describe,
    switch_note,
)
from iac_kernel.models.scripted import ScriptError
from iac_kernel.sessions.audit import AuditLog
from iac_kernel.sessions.store import SessionWriter, StoredSession, git_root, now_iso
from iac_kernel.terraform.review import masked
from iac_kernel.textsafe import readable
from iac_kernel.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from iac_kernel.mcp.manager import McpManager

log = logging.getLogger(__name__)

TITLE_LENGTH = 60


class SessionBusyError(RuntimeError):
    """A turn is already running on this session (we never run two loops on one history)."""


class SessionClosedError(RuntimeError):
    """The session was closed; its history stays on disk."""


Observer = Callable[[AgentEvent], None]


class AgentSession:
    """One session, owned by this process (it holds the store lock)."""

    def __init__(
        self,
        writer: SessionWriter,
        stored: StoredSession,
        settings: Settings,
        tools: list[Tool],
    ):
        self.writer = writer
        self.meta = writer.meta
        self.session_id = writer.session_id
        self.cwd = Path(self.meta.cwd)
        self.settings = settings.copy()
        if self.meta.mode in MODES:
            self.settings.mode = self.meta.mode
        self.settings.model = _canonical(
            self.meta.model or self.settings.model or default_model_id()
        )
        if not self.meta.model and not stored.messages:  # a new session stores its model
            self.writer.update(model=self.settings.model)
        self.tools = tools
        self.gate = PermissionGate(mode=self.settings.mode)
        self.conversation = Conversation(list(stored.messages), stored.summary, stored.keep_from)
        self.repairs = list(stored.repairs)
        self.usage = Usage()
        #: List-price cost of the turns run since the session was opened (ACP usage_update).
        self.cost = RunningCost()
        self.observers: list[Observer] = []
        self._model: Model | None = None
        self._task: asyncio.Task[TurnEnded] | None = None
        self._closed = False
        #: Notes for the next turn (what a model switch did to the history).
        self.notes: list[str] = []
        #: The session's MCP servers (their tools live in ``self.tools``); set by the
        #: front end that configures them (ACP mcpServers, a notebook's .mcp.json).
        self.mcp: McpManager | None = None

    # -- state ---------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return str(self.settings.model)

    @property
    def provider(self) -> str:
        """The provider the session's model runs on (``scripted`` offline)."""
        return describe(self.model_id)[0]

    @property
    def mode(self) -> str:
        return self.settings.mode

    @property
    def title(self) -> str | None:
        return self.meta.title

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def closed(self) -> bool:
        return self._closed

    def model(self) -> Model:
        """The session's model provider, built on first use."""
        if self._model is None:
            self._model = create_model(self.model_id, self.settings.script)
        return self._model

    # -- settings --------------------------------------------------------------------------

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
        self.settings.mode = mode
        self.gate.mode = mode
        self.writer.update(mode=mode)

    def set_model(self, model_id: str) -> str | None:
        """Switch models, possibly to another provider; raises ValueError when the model
        cannot be built. Returns the note on what the history keeps (also shown at the
        start of the next turn), or None when there is no history yet.

        A relative ``scripted:PATH`` is taken from the session's cwd and stored absolute,
        so the session still finds its script when resumed from another directory.
        """
        name, sep, path = model_id.partition(":")
        if sep and name == "scripted" and path and not Path(path).expanduser().is_absolute():
            model_id = f"scripted:{self.cwd / path}"
        try:
            model_id = canonical_id(model_id)
            model = create_model(model_id, self.settings.script)
        except (ScriptError, ModelError) as exc:
            raise ValueError(str(exc)) from None
        before = self.provider
        self.settings.model = model_id
        self._model = model
        self.writer.update(model=model_id)
        if self.provider == before:
            return None
        note = switch_note(self.conversation.messages, self.provider, model_id)
        if note:
            self.notes = [note]
        return note

    def set_config(self, key: str, value: Any) -> None:
        """Change one setting at run time (``model`` and ``mode`` included)."""
        if key == "mode":
            self.set_mode(str(value))
        elif key == "model":
            self.set_model(str(value))
        elif key == "script":
            path = Path(str(value)).expanduser()
            self.settings.set("script", str(path if path.is_absolute() else self.cwd / path))
            self._model = None
        elif key == "sessions_dir":
            raise ValueError("sessions_dir cannot change for a live session")
        else:
            self.settings.set(key, value)

    def set_cwd(self, cwd: str) -> None:
        """Move the session to another directory (the next turn works there); the stored
        metadata follows, so editors listing that folder find the session."""
        if self.busy:
            raise SessionBusyError(f"session {self.session_id} is running a turn")
        self.cwd = Path(cwd)
        self.writer.update(cwd=cwd, git_root=git_root(cwd))

    # -- turns ------------------------------------------------------------------------------

    async def prompt(
        self, blocks: list[dict[str, Any]], emit: Emit, ask: AskPermission | None
    ) -> TurnEnded:
        """Run one turn. Raises SessionBusyError if one is running, SessionClosedError if closed."""
        if self._closed:
            raise SessionClosedError(f"session {self.session_id} is closed")
        if self.busy:
            raise SessionBusyError(f"session {self.session_id} is already running a turn")

        async def fan_out(event: AgentEvent) -> None:
            for observer in list(self.observers):
                try:
                    observer(event)
                except Exception:
                    log.exception("session observer failed")
            await send(emit, event)

        # Readable: a lone surrogate in a prompt is stored exactly, but titles and
        # observers (front ends) get valid text.
        text = readable(
            "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text").strip()
        )
        if not self.meta.title and text:
            self.writer.update(title=_title_from(text))
        for observer in list(self.observers):
            observer(UserMessage(text))
        if self.mcp is not None:
            for notice in await self.mcp.before_turn():
                await fan_out(ErrorNotice(notice))
        notes, self.notes = self.notes, []
        for note in notes:
            await fan_out(ErrorNotice(note))
        try:
            model = self.model()
        except (ScriptError, ModelError) as exc:
            await fan_out(ErrorNotice(f"Model error: {exc}"))
            ended = TurnEnded("end_turn", Usage())
            await fan_out(ended)
            return ended
        loop = AgentLoop(
            model=model,
            tools=self.tools,
            gate=self.gate,
            settings=self.settings,
            cwd=self.cwd,
            system_prompt=build_system_prompt(
                self.cwd, path_list(self.settings.additional_directories)
            ),
            conversation=self.conversation,
            persist=self.writer,
            audit=self.audit,
        )
        self._task = asyncio.ensure_future(loop.run_turn(blocks, fan_out, ask))
        try:
            ended = await self._task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # our caller is being cancelled, not just the turn
            # cancel() came before the turn's task first ran: keep the prompt, end cancelled.
            loop.record_prompt(blocks)
            ended = TurnEnded("cancelled", Usage())
            await fan_out(ended)
        self.usage.add(ended.usage)
        self.cost.add(self.turn_cost(ended.usage), ended.usage)
        return ended

    def turn_cost(self, usage: Usage) -> float | None:
        """The list-price cost of ``usage`` on the session's model (the footer's figure),
        ``None`` where no honest figure exists."""
        return turn_cost(*describe(self.model_id), usage)

    def audit(self, record: dict[str, Any]) -> None:
        """Add one change's record (masked) to the team store's audit trail."""
        from iac_kernel.team.audit import trail  # SQLAlchemy: loaded by the first record

        full = {
            "session_id": self.session_id,
            "cwd": str(self.cwd),
            "origin": self.meta.origin,
            "recorded_at": now_iso(),
            **record,
        }
        problem = trail(AuditLog(self.writer.store.root)).append(masked(full, self.cwd))
        if problem:  # kept meanwhile; said once, at the next turn
            log.warning("%s", problem)
            self.notes.append(problem)

    def cancel(self) -> bool:
        """Cancel the running turn (it then ends ``cancelled``); False if none runs."""
        if not self.busy or self._task is None:
            return False
        if not self._task.cancelling():
            self._task.cancel()
        return True

    async def wait_idle(self) -> None:
        if self._task is not None and not self._task.done():
            await asyncio.wait([self._task])

    def replay(self) -> list[AgentEvent]:
        """The history as events (prompts, answers, thoughts, tool calls), masked with
        what is known now."""
        tools = {tool.name: tool for tool in self.tools}
        ctx = ToolContext(cwd=self.cwd, settings=self.settings)
        return list(history.replay(self.conversation.messages, tools, ctx, self.writer.marks))

    async def close(self) -> None:
        """Stop any turn, release the store lock; history stays on disk."""
        if self._closed:
            return
        self._closed = True
        if self.cancel():
            await self.wait_idle()
        if self.mcp is not None:
            await self.mcp.stop()
        self.writer.close()


def _title_from(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "session"
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


def _canonical(model_id: str) -> str:
    try:
        return canonical_id(model_id)
    except ModelError:
        return model_id  # reported when the model is built
