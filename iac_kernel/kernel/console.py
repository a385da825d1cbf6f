"""A kernel that always answers: shell requests served while a turn runs or waits.

ipykernel runs one shell message at a time on the main shell (an ``asyncio.Lock``); a turn
is one long execute_request, so a second client's ``kernel_info_request`` (a page reload,
a console) would wait until the turn ends. While the lock is held, :class:`ConsoleMixin`
dispatches these requests at once instead (as ipykernel already does for comm
messages): kernel_info, complete, inspect, is_complete, history, comm_info and connect,
plus execute requests whose cell is made only of ``%permissions`` and ``%output ID``
lines (look at and answer the pending question, read a call's output).

The mixin also answers what those views ask: :meth:`ConsoleMixin.session_info` (the status
bar), :meth:`ConsoleMixin.full_output` (``%output`` and the status comm) and the pending
questions' buttons for ``%permissions``.

Such a request gets its reply and an ``idle`` status with its own parent (JupyterLab waits
for both), then a ``busy`` status with the running cell's parent, so the kernel still
shows busy while the turn goes on.
"""

from __future__ import annotations

import contextvars
import re
from typing import Any

from iac_kernel.agent.loop import CANCELLED_RESULT
from iac_kernel.agent.permissions import DENIED_MESSAGE
from iac_kernel.events import Usage
from iac_kernel.kernel import completion
from iac_kernel.kernel.status import kernel_session_info

CONCURRENT_REQUESTS = frozenset(
    {
        "kernel_info_request",
        "complete_request",
        "inspect_request",
        "is_complete_request",
        "history_request",
        "comm_info_request",
        "connect_request",
    }
)
CONSOLE_LINE = re.compile(r"^\s*(%permissions\s*|%output\s+\S+\s*)$")


#: Set while a request is served during a turn (see :meth:`ConsoleMixin._abort_queues`).
_SERVING_NOW: contextvars.ContextVar[bool] = contextvars.ContextVar("iac_serving", default=False)


def console_cell(code: str) -> bool:
    """True for a cell of ``%permissions`` / ``%output ID`` lines only."""
    lines = [line for line in code.splitlines() if line.strip()]
    return bool(lines) and all(CONSOLE_LINE.match(line) for line in lines)


def tool_output(messages: list[dict[str, Any]], call_id: str) -> str | None:
    """The whole result the model got for ``call_id``, from the session's history."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                value = block.get("content")
                if isinstance(value, list):
                    return "".join(b.get("text", "") for b in value if isinstance(b, dict))
                return str(value if value is not None else "")
    return None


def history_outcome(state: Any, call_id: str, session_id: str) -> str | None:
    """``done``/``failed``/``denied``/``not_run`` for a call in a stored session's history,
    or ``None`` when the session or the call is not there."""
    if not re.fullmatch(r"[A-Za-z0-9-]{1,64}", session_id):
        return None  # not a session id: never a path into the store
    session = state.current
    try:
        if session is not None and session.session_id == session_id:
            messages = session.conversation.messages
        else:
            messages = state.manager.store.read(session_id).messages
    except Exception:  # unknown, unreadable or malformed id: nobody knows
        return None
    asked = any(
        block.get("type") == "tool_use" and block.get("id") == call_id
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict)
    )
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                text = tool_output([message], call_id) or ""
                if text.startswith(DENIED_MESSAGE):
                    return "denied"
                return "failed" if block.get("is_error") else "done"
    return "not_run" if asked else None


class ConsoleMixin:
    """Mixed into :class:`~iac_kernel.kernel.kernel.IacKernel` (an ipykernel Kernel)."""

    session: Any
    _main_asyncio_lock: Any
    state: Any
    questions: Any
    tool_cards: dict[str, Any]
    cell_history: Any
    running: Any
    last_turn: tuple[str, Usage] | None

    def session_info(self) -> dict[str, Any]:
        """What the status bar shows (see :mod:`~iac_kernel.kernel.status`)."""
        running = self.running.snapshot()
        turns = [
            {"msgId": t.msg_id, "cellId": t.cell_id, "executionCount": t.execution_count}
            for t in running
            if t.msg_id
        ]
        info = kernel_session_info(self.state, self.questions, bool(running), turns)
        live = [t.usage for t in running if getattr(t, "usage", None) is not None]
        if live and info.get("sessionId") is not None:
            # Mid-turn: the session's total so far includes the turn's finished model calls.
            total, turn = Usage(), Usage()
            for usage in live:
                turn.add(usage)
            total.add(self.state.current.usage)
            total.add(turn)
            info["usage"], info["turnUsage"] = total.to_dict(), turn.to_dict()
        elif not running and self.last_turn and self.last_turn[0] == info.get("sessionId"):
            # The last turn's usage, as the metadata of its answer carries it without the
            # extension (with it, this is where the status bar reads it: kernel/turn.py).
            info["turnUsage"] = self.last_turn[1].to_dict()
        return info

    def call_outcome(self, call_id: str, session_id: str) -> dict[str, Any]:
        """What became of a call whose card a notebook saved while it asked: this kernel's
        card when it has one, else what the session's history says: ``done``, ``failed``,
        ``denied``, or ``not_run`` (asked, never answered); ``None`` when nobody knows."""
        card = self.tool_cards.get(call_id)
        if card is not None and card.status != "awaiting_permission":
            return {"card": card.payload(), "outcome": card.status}
        if any(q.request.call_id == call_id for q in self.questions.questions.values()):
            return {"card": None, "outcome": "awaiting_permission"}
        return {"card": None, "outcome": history_outcome(self.state, call_id, session_id)}

    def full_output(self, call_id: str) -> tuple[str | None, str | None]:
        """Everything a tool call returned, from the session's history; for an interrupted
        call, what it printed before the interrupt."""
        call_id = call_id.strip()
        card = self.tool_cards.get(call_id)
        session = self.state.current
        found = None
        if session is not None and not session.closed:
            found = tool_output(session.conversation.messages, call_id)
        if card is not None and card.live and (found is None or found == CANCELLED_RESULT):
            return card.output if card.output is not None else card.live, None
        if found is not None:
            return found, None
        if card is not None and card.output is not None:
            return card.output, None
        return None, f"no tool call {call_id!r} in this session (ids are on the cards)"

    def _pending_bundles(self) -> list[tuple[dict[str, Any], str]]:
        """The waiting questions' buttons and display ids, for %permissions."""
        return [
            (question.bundle(), question.display_id)
            for question in list(self.questions.questions.values())
            if question.bundle is not None
        ]

    async def shell_main(self, subshell_id: str | None, msg: Any) -> None:  # type: ignore[override]
        lock = getattr(self, "_main_asyncio_lock", None)
        if subshell_id is None and lock is not None and lock.locked() and self.session:
            if self._answer_now(msg):
                await self._dispatch_now(msg)
                return
        await super().shell_main(subshell_id, msg)  # type: ignore[misc]

    def _answer_now(self, msg: Any) -> bool:
        try:
            _idents, frames = self.session.feed_identities(msg, copy=False)
            parsed = self.session.deserialize(frames, content=False, copy=False)
        except Exception:
            return False
        msg_type = parsed["header"].get("msg_type")
        if msg_type in CONCURRENT_REQUESTS:
            return True
        if msg_type != "execute_request":
            return False
        try:
            content = self.session.unpack(parsed["content"])
        except Exception:
            return False
        return isinstance(content, dict) and console_cell(str(content.get("code", "")))

    def _abort_queues(self, subshell_id: str | None = None) -> None:
        """A failing console cell (``%output no-such-id``) served during a turn must not
        abort the cells queued behind the turn, as a failing cell with ``stop_on_error``
        does."""
        if _SERVING_NOW.get():
            return
        super()._abort_queues(subshell_id)  # type: ignore[misc]

    async def _dispatch_now(self, msg: Any) -> None:
        kernel: Any = self
        running_parent = kernel.get_parent("shell")
        running_ident = kernel._get_shell_context_var(kernel._shell_parent_ident)
        token = _SERVING_NOW.set(True)
        try:
            await kernel.dispatch_shell(msg, subshell_id=None, concurrent=True)
            request = kernel.get_parent("shell")
            if request is not running_parent:
                kernel._publish_status("idle", "shell", parent=request)
        finally:
            _SERVING_NOW.reset(token)
            kernel.set_parent(running_ident, running_parent, channel="shell")
            if running_parent:
                kernel._publish_status("busy", "shell", parent=running_parent)

    # -- completion, inspection, history, debugging ----------------------------------------

    async def do_history(self, hist_access_type: str, output: bool, raw: bool, **kw: Any) -> Any:  # type: ignore[override]
        return self.cell_history.reply(hist_access_type, output, raw, **kw)

    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:  # type: ignore[override]
        return completion.complete(code, cursor_pos, self.state)

    async def do_is_complete(self, code: str) -> dict[str, Any]:  # type: ignore[override]
        return completion.is_complete(code)

    async def do_inspect(  # type: ignore[override]
        self, code: str, cursor_pos: int | None, detail_level: int = 0, omit_sections: Any = ()
    ) -> dict[str, Any]:
        return completion.inspect(code, cursor_pos)

    async def do_debug_request(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "response",
            "request_seq": msg.get("seq"),
            "success": False,
            "command": msg.get("command"),
            "message": "iac-kernel cells are prompts; there is no debugger",
        }
