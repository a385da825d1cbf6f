"""The permission gate: decides in code (never in the prompt) whether a tool call may run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.agent.events import Diff
from iac_kernel.tools.base import Category, Tool, ToolContext

ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"
REJECT_ALWAYS = "reject_always"
CANCELLED = "cancelled"

OPTION_NAMES = {
    ALLOW_ONCE: "Allow once",
    ALLOW_ALWAYS: "Allow always",
    REJECT_ONCE: "Reject once",
    REJECT_ALWAYS: "Reject always",
}
ALL_OPTIONS = [ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS]
PER_CALL_OPTIONS = [ALLOW_ONCE, REJECT_ONCE]

DENIED_MESSAGE = "Permission denied."

CATEGORY_REASONS = {
    Category.READ: "It reads files.",
    Category.WRITE: "It changes files.",
    Category.EXECUTE: "It runs a command or a sub-agent.",
}


@dataclass
class PermissionRequest:
    """What a front end shows the user when a tool call needs approval."""

    call_id: str
    tool_name: str
    title: str
    kind: str
    input: dict[str, Any]
    #: Option ids the user may pick, in display order.
    options: list[str]
    #: Why this call needs approval, in words for the user.
    reason: str
    diff: Diff | None = None


#: Front ends answer a request with one of ``request.options`` or ``"cancelled"``.
AskPermission = Callable[[PermissionRequest], Awaitable[str]]


@dataclass
class Decision:
    allowed: bool
    #: Set when not allowed: ``denied`` (user or rule) or ``cancelled`` (the turn was cancelled).
    outcome: str = ""
    message: str = ""


@dataclass
class PermissionGate:
    """Per-session permission state: the mode and the user's remembered answers."""

    mode: str = "default"
    #: tool name -> "allow" | "reject", from allow_always / reject_always.
    remembered: dict[str, str] = field(default_factory=dict)

    async def check(
        self,
        tool: Tool,
        args: dict[str, Any],
        ctx: ToolContext,
        request: PermissionRequest,
        ask: AskPermission | None,
    ) -> Decision:
        """Decide whether the call may run, asking the user when the rules say so."""
        from iac_kernel.tools.paths import is_inside

        outside = [p for p in tool.paths(args, ctx) if not is_inside(p, ctx.cwd)]
        per_call = bool(outside) or tool.is_dangerous(args)

        if self.remembered.get(tool.name) == "reject":
            return Decision(False, "denied", f"{DENIED_MESSAGE} (rejected always in this session)")
        if tool.category is Category.READ and not outside:
            return Decision(True)
        if self.mode == "read_only" and tool.category is not Category.READ:
            return Decision(False, "denied", f"{DENIED_MESSAGE} The session is in read_only mode.")
        if not per_call:
            if self.remembered.get(tool.name) == "allow" or self.mode == "bypass":
                return Decision(True)
            if self.mode == "accept_edits" and tool.category is Category.WRITE:
                return Decision(True)

        if outside:
            request.reason = "It touches a path outside the working directory: " + ", ".join(
                str(p) for p in outside
            )
        elif per_call:
            request.reason = "This command changes real infrastructure or data; approve each call."
        else:
            request.reason = CATEGORY_REASONS[tool.category]
        request.options = list(PER_CALL_OPTIONS if per_call else ALL_OPTIONS)
        if ask is None:
            return Decision(False, "denied", f"{DENIED_MESSAGE} No one is there to approve it.")

        answer = await ask(request)
        if answer == CANCELLED:
            return Decision(False, "cancelled", "Cancelled.")
        if answer not in request.options:
            # An answer we did not offer is never an approval.
            return Decision(False, "denied", DENIED_MESSAGE)
        if answer == ALLOW_ALWAYS:
            self.remembered[tool.name] = "allow"
        elif answer == REJECT_ALWAYS:
            self.remembered[tool.name] = "reject"
        if answer in (ALLOW_ONCE, ALLOW_ALWAYS):
            return Decision(True)
        return Decision(False, "denied", DENIED_MESSAGE)
