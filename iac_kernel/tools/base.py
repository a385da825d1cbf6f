"""The tool interface shared by every tool, and the context a call runs in."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.events import Diff
from iac_kernel.guard.exec_request import AskExec


class Category(enum.Enum):
    """How risky a tool is; the permission gate decides by this."""

    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"


class ToolError(Exception):
    """A tool call failed; the message goes back to the model as a tool error."""


@dataclass
class ToolResult:
    content: str
    is_error: bool = False
    raw_output: Any = None
    diff: Diff | None = None
    #: The known values ``content`` was masked with (None: not known): a load masks the
    #: stored result again only when something else is known then.
    masked_with: frozenset[str] | None = None


@dataclass
class ToolContext:
    """Where and how a tool call runs."""

    cwd: Path
    settings: Any  # iac_kernel.config.Settings (kept loose to avoid an import cycle)
    #: Runs a sub-agent turn for the ``agent`` tool; supplied by the agent loop.
    run_subagent: Callable[[str], Awaitable[str]] | None = None
    #: Extra environment for commands.
    env: dict[str, str] = field(default_factory=dict)
    #: Asks the permission gate whether a guarded program may run an argv (exec time);
    #: supplied by the agent loop. None: changing commands are refused.
    ask_exec: AskExec | None = None
    #: Asks the permission gate whether a sandbox may reach a host not on
    #: ``egress_allow`` (``(host, port) -> (allowed, message)``). None: refused.
    ask_egress: Callable[[str, int], Awaitable[tuple[bool, str]]] | None = None
    #: Live output while a command runs: called with each decoded, redacted chunk (the
    #: agent loop supplies it and turns it into ``ToolCallOutput`` events).
    on_output: Callable[[str], None] | None = None
    #: What :meth:`Tool.review` prepared before the question (e.g. the approved bytes of
    #: a saved plan); the approval is bound to it. Set by the agent loop.
    review: Any = None
    #: Writes one audit record of an infrastructure change (an apply) in the session
    #: store; supplied by the agent loop. None: not recorded.
    audit: Callable[[dict[str, Any]], None] | None = None
    #: Asks the user a question (``ask_user``): ``(question, fields) -> ToolResult``, the
    #: fields as :func:`iac_kernel.tools.ask_user.question_fields` gives them; supplied
    #: by the agent loop (:mod:`iac_kernel.agent.questions`). None: nobody can answer.
    ask_user: Callable[[str, list[dict[str, Any]]], Awaitable[ToolResult]] | None = None
    #: Forwards an MCP server's ``elicitation/create`` (its params as the spec's JSON) to
    #: the user; returns the spec's ``ElicitResult`` JSON. The event, for URL mode, is set
    #: when the server says the elicitation completed. Supplied by the agent loop
    #: (:mod:`iac_kernel.agent.elicitation`). None: every elicitation is declined.
    elicit: Callable[[dict[str, Any], asyncio.Event | None], Awaitable[dict[str, Any]]] | None = (
        None
    )


class Tool:
    """Base class: subclasses set the class attributes and implement :meth:`run`."""

    name: str = ""
    description: str = ""
    input_schema: dict[str, Any] = {}
    #: ACP tool kind: read, edit, search, execute, fetch, other.
    kind: str = "other"
    category: Category = Category.READ

    def definition(self) -> dict[str, Any]:
        """The tool as the Messages API expects it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def title(self, args: dict[str, Any]) -> str:
        """A short human title, e.g. ``bash: terraform plan``."""
        return self.name

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        """Filesystem paths the call touches (for locations and the outside-cwd rule)."""
        return []

    async def review(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """For calls whose approval is bound to what the user reviewed (a saved plan):
        prepared before the question, shown in it (``summary()`` -> {"text", ...}), and
        handed to :meth:`run` as ``ctx.review``. Raising refuses the call. None: no review."""
        return None

    def refusal_record(self, args: dict[str, Any], error: str) -> dict[str, Any] | None:
        """For audited tools: the audit record of a call refused because its review
        failed (None: such calls are not audited)."""
        return None

    def preview(self, args: dict[str, Any], ctx: ToolContext) -> Diff | None:
        """For edit tools: the change the call would make, shown before it is approved."""
        return None

    def is_dangerous(self, args: dict[str, Any]) -> bool:
        """True when the call needs a per-call approval with no "always" shortcut."""
        return self.per_call_reason(args) is not None

    def per_call_reason(self, args: dict[str, Any]) -> str | None:
        """Why the call needs a per-call approval (shown in the question), or None."""
        return None

    def ask_reason(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """Why a routine question (not per call) asks about this call, in words naming
        what it runs; None leaves the category's words ("It runs a command…")."""
        return None

    def gate_reason(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        """What the gate asks before the call: (per call?, why). A tool may leave to
        exec-time questions what they will ask anyway (bash: a sandboxed apply)."""
        reason = self.per_call_reason(args)
        return reason is not None or self.is_dangerous(args), reason

    def asked_at_exec(self, args: dict[str, Any], ctx: ToolContext) -> bool:
        """True when everything this call runs gets its own exec-time question (a bash
        ``terraform apply``): the gate then does not ask before the call too."""
        return False

    #: True when "Allow always" remembers command prefixes rather than the whole tool.
    remembers_prefixes: bool = False

    def command_prefixes(
        self, args: dict[str, Any], ctx: ToolContext | None = None
    ) -> list[str] | None:
        """For prefix tools: what "Allow always" would remember for this call
        (``["terraform plan"]``); None when no "always" answer can be offered."""
        return None

    def literal_commands(self, args: dict[str, Any]) -> list[list[str]]:
        """The exact argvs a per-call approval of this call covers (the user saw them
        literally); a guarded program running one of them is not asked again."""
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise NotImplementedError
