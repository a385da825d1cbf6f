"""A kernel that always answers: shell requests served while a turn runs or waits.

ipykernel runs one shell message at a time on the main shell (an ``asyncio.Lock``); a turn
is one long execute_request, so a second client's ``kernel_info_request`` (a page reload,
a console) would wait until the turn ends. While the lock is held, :class:`ConsoleMixin`
dispatches these requests at once instead (as ipykernel already does for comm
messages): kernel_info, complete, inspect, is_complete, history, comm_info and connect,
plus execute requests whose cell is made only of ``%permissions`` and ``%output ID``
lines (look at and answer the pending question, read a call's output).

Such a request gets its reply and an ``idle`` status with its own parent (JupyterLab waits
for both), then a ``busy`` status with the running cell's parent, so the kernel still
shows busy while the turn goes on.
"""

from __future__ import annotations

import re
from typing import Any

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


class ConsoleMixin:
    """Mixed into :class:`~iac_kernel.kernel.kernel.IacKernel` (an ipykernel Kernel)."""

    session: Any
    _main_asyncio_lock: Any

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

    async def _dispatch_now(self, msg: Any) -> None:
        kernel: Any = self
        running_parent = kernel.get_parent("shell")
        running_ident = kernel._get_shell_context_var(kernel._shell_parent_ident)
        try:
            await kernel.dispatch_shell(msg, subshell_id=None, concurrent=True)
            request = kernel.get_parent("shell")
            if request is not running_parent:
                kernel._publish_status("idle", "shell", parent=request)
        finally:
            kernel.set_parent(running_ident, running_parent, channel="shell")
            if running_parent:
                kernel._publish_status("busy", "shell", parent=running_parent)
