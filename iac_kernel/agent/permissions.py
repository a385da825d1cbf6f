"""The permission gate: decides in code (never in the prompt) whether a tool call may run,
and whatever the call then does that needs a person: a changing command a guarded program
execs, a sandbox reaching a host not on the ``egress_allow`` setting, a guarded run using
a brokered credential for a cloud operation that changes something or returns a secret
(``iam:CreateAccessKey on user/ci``, judged at the wire by the broker).

The answers about hosts and operations are the session's, kept on the gate
(``egress_hosts``, ``cloud_operations``): for a host, "Allow once" covers the rest of the
call; for an operation, that one request; "always" the session; rejections likewise.
"""

from __future__ import annotations

import os
import pwd
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.agent.forms import Form, typed_confirmation
from iac_kernel.config import path_list
from iac_kernel.egress.addon_operations import SECRET
from iac_kernel.egress.decide import GuardedRun, describe, operation_key
from iac_kernel.events import Diff
from iac_kernel.guard.approval.request import ExecRequest
from iac_kernel.sessions.meta import now_iso
from iac_kernel.textsafe import code_span, printable
from iac_kernel.tools.base import Category, Tool, ToolContext, is_inside

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
    #: Option id -> label, for options whose label says more than OPTION_NAMES
    #: ("Allow always: `terraform plan`"). Front ends show ``label(option)``.
    labels: dict[str, str] = field(default_factory=dict)
    #: A structured review of a guarded command (e.g. a plan summary), for front ends.
    review: Any = None
    #: A per-call approval by a person (infrastructure change, path outside the folder):
    #: front ends show it as destructive and no headless policy approves it. A compound
    #: command offered without "always" is not one by itself.
    danger: bool = False
    #: What the user fills in (a typed confirmation, the agent's own question), for
    #: fronts that render forms; see :mod:`iac_kernel.agent.forms`.
    form: Form | None = None
    #: An MCP server's URL elicitation (:class:`iac_kernel.agent.questions.UrlElicitation`):
    #: fronts that can send the user to a URL do; others decline it.
    url: Any = None
    #: Set by the gate once answered (see :func:`answered`); empty when not asked.
    asked: dict[str, Any] = field(default_factory=dict)

    def label(self, option: str) -> str:
        return self.labels.get(option) or OPTION_NAMES.get(option, option)


#: Front ends answer a request with one of ``request.options`` or ``"cancelled"``.
AskPermission = Callable[[PermissionRequest], Awaitable[str]]


class Answer(str):
    """An option id carrying the user's note (e.g. a rejection with the reason why), who
    gave it (``notebook (buttons)``, ``headless policy (allow)``, an ACP client) and, from
    a front that rendered ``request.form``, the values filled in."""

    note: str
    by: str
    values: dict[str, Any] | None

    def __new__(
        cls, option: str, note: str = "", by: str = "", values: dict[str, Any] | None = None
    ) -> Answer:
        answer = super().__new__(cls, option)
        answer.note = note.strip()
        answer.by = by
        answer.values = values
        return answer


def checked(request: PermissionRequest, answer: str) -> str:
    """``answer``, or a rejection when it approves with form values that do not answer
    ``request.form`` (a typed confirmation that does not match). A front that cannot
    render forms answers without values: that is the plain question, and stands."""
    values = getattr(answer, "values", None)
    if request.form is None or values is None or answer not in (ALLOW_ONCE, ALLOW_ALWAYS):
        return answer
    problem = request.form.mismatch(values)
    if problem is None:
        return answer
    return Answer(REJECT_ONCE, note=problem, by=getattr(answer, "by", ""))


def answered(request: PermissionRequest, answer: str) -> dict[str, Any]:
    """What an audit record keeps of a question: its exact text, the answer, who, when."""
    return {
        "question": f"{request.title}\n{request.reason}",
        "options": list(request.options),
        "answer": str(answer),
        "allowed": answer in (ALLOW_ONCE, ALLOW_ALWAYS) and answer in request.options,
        "approver": getattr(answer, "by", "") or "unknown front end",
        "os_user": os_user(),
        "answered_at": now_iso(),
    }


def os_user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


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
    #: tool name -> "allow" | "reject", from allow_always / reject_always (tools that
    #: do not remember prefixes).
    remembered: dict[str, str] = field(default_factory=dict)
    #: tool name -> {command prefix -> "allow" | "reject"} for prefix tools (bash).
    prefix_rules: dict[str, dict[str, str]] = field(default_factory=dict)
    #: call id -> the literal commands of a per-call question the user allowed once:
    #: exactly those argvs run without a second, exec-time question (each once).
    _approved_literals: dict[str, list[list[str]]] = field(default_factory=dict)
    #: call id -> the record of that per-call question and its answer (for the audit
    #: record of a reviewed command it covers, see ``Review.covered_by_literal``).
    _literal_answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: host -> "allow" | "reject": the session's answers about sandbox network egress.
    egress_hosts: dict[str, str] = field(default_factory=dict)
    #: ``service:operation`` -> "allow" | "reject": the session's answers about cloud
    #: operations judged at the wire.
    cloud_operations: dict[str, str] = field(default_factory=dict)

    def remembered_prefixes(self) -> list[dict[str, str]]:
        """Every remembered command prefix: ``{"tool", "prefix", "answer"}``."""
        return [
            {"tool": tool, "prefix": prefix, "answer": answer}
            for tool, rules in sorted(self.prefix_rules.items())
            for prefix, answer in sorted(rules.items())
        ]

    def remembered_summary(self) -> list[str]:
        """The remembered answers as short lines (``bash `terraform plan`: always allow``)."""
        lines = [f"{tool}: always {answer}" for tool, answer in sorted(self.remembered.items())]
        lines += [
            f"{r['tool']} `{r['prefix']}`: always {r['answer']}" for r in self.remembered_prefixes()
        ]
        return lines

    def forget(self) -> None:
        self.remembered.clear()
        self.prefix_rules.clear()

    async def check(
        self,
        tool: Tool,
        args: dict[str, Any],
        ctx: ToolContext,
        request: PermissionRequest,
        ask: AskPermission | None,
    ) -> Decision:
        """Decide whether the call may run, asking the user when the rules say so."""
        roots = [ctx.cwd, *path_list(getattr(ctx.settings, "additional_directories", ""))]
        outside = [
            p for p in tool.paths(args, ctx) if not any(is_inside(p, root) for root in roots)
        ]
        dangerous, per_call_reason = tool.gate_reason(args, ctx)
        per_call = bool(outside) or dangerous
        prefixes = tool.command_prefixes(args, ctx) if tool.remembers_prefixes else None
        rules = self.prefix_rules.get(tool.name, {})

        if self.remembered.get(tool.name) == "reject" or (
            prefixes and any(rules.get(p) == "reject" for p in prefixes)
        ):
            return Decision(False, "denied", f"{DENIED_MESSAGE} (rejected always in this session)")
        if tool.category is Category.READ and not outside:
            return Decision(True)
        if self.mode == "read_only" and tool.category is not Category.READ:
            return Decision(False, "denied", f"{DENIED_MESSAGE} The session is in read_only mode.")
        if not per_call:
            if tool.asked_at_exec(args, ctx):
                return Decision(True)  # one question, at exec time, with the plan
            if tool.remembers_prefixes:
                always = bool(prefixes) and all(rules.get(p) == "allow" for p in prefixes)
            else:
                always = self.remembered.get(tool.name) == "allow"
            if always or self.mode == "bypass":
                return Decision(True)
            if self.mode == "accept_edits" and tool.category is Category.WRITE:
                return Decision(True)

        if outside:
            request.reason = "It touches a path outside the working directory: " + ", ".join(
                printable(str(p)) for p in outside
            )
        elif per_call:
            request.reason = per_call_reason or (
                "This command changes real infrastructure or data; approve each call."
            )
        else:
            request.reason = tool.ask_reason(args, ctx) or CATEGORY_REASONS[tool.category]
        review_text = request.review.get("text") if isinstance(request.review, dict) else None
        if review_text:  # e.g. the plan summary of terraform_apply (Tool.review)
            request.reason += "\n" + review_text
        request.danger = per_call
        if per_call:
            request.options = list(PER_CALL_OPTIONS)
        elif tool.remembers_prefixes and not prefixes:
            request.options = list(PER_CALL_OPTIONS)
        else:
            request.options = list(ALL_OPTIONS)
        if prefixes and ALLOW_ALWAYS in request.options:
            shown = ", ".join(code_span(printable(p)) for p in prefixes)
            request.labels[ALLOW_ALWAYS] = f"Allow always: {shown}"
            request.labels[REJECT_ALWAYS] = f"Reject always: {shown}"
        request.form = typed_confirmation(request.review, request.danger)
        if ask is None:
            return Decision(False, "denied", f"{DENIED_MESSAGE} No one is there to approve it.")

        answer = checked(request, await ask(request))
        request.asked = answered(request, answer)
        if answer == CANCELLED:
            return Decision(False, "cancelled", "Cancelled.")
        if answer not in request.options:
            # An answer we did not offer is never an approval.
            return Decision(False, "denied", DENIED_MESSAGE)
        if answer in (ALLOW_ALWAYS, REJECT_ALWAYS):
            remembered = "allow" if answer == ALLOW_ALWAYS else "reject"
            if tool.remembers_prefixes:
                table = self.prefix_rules.setdefault(tool.name, {})
                for prefix in prefixes or []:
                    table[prefix] = remembered
            else:
                self.remembered[tool.name] = remembered
        if answer in (ALLOW_ONCE, ALLOW_ALWAYS):
            if per_call and not outside:
                self._approved_literals[request.call_id] = tool.literal_commands(args)
                self._literal_answers[request.call_id] = answered(request, answer)
            return Decision(True)
        note = getattr(answer, "note", "")
        if note:  # the user's words reach the model instead of the bare refusal
            return Decision(False, "denied", f"Rejected by the user, who says: {note}")
        return Decision(False, "denied", DENIED_MESSAGE)

    async def check_exec(
        self, exec_request: ExecRequest, call_id: str, tool_name: str, ask: AskPermission | None
    ) -> Decision:
        """Exec time: may a guarded program run this exact argv? Changing commands are
        asked per call in every mode (no "always"); everything else runs."""
        if not exec_request.verdict.changing:
            return Decision(True)
        if self.mode == "read_only":
            return Decision(False, "denied", f"{DENIED_MESSAGE} The session is in read_only mode.")
        review = exec_request.review
        if (
            (review is None or review.covered_by_literal)
            and not exec_request.retargeted
            and self._take_literal(call_id, exec_request)
        ):
            # Its audit record: the question that approved it.
            exec_request.asked.update(self._literal_answers.get(call_id, {}))
            return Decision(True)  # the user approved exactly this command a moment ago
        head = os.path.basename(exec_request.argv[0])  # `git-receive-pack` keeps its name
        shown = head if head.startswith(exec_request.program + "-") else exec_request.program
        argv = [shown, *exec_request.argv[1:]]
        command = shlex.join(argv)
        shown_command = printable(command)  # an argument adds no line to the question
        reason = (
            f"{exec_request.verdict.reason}. The command runs {code_span(shown_command)} in "
            f"{printable(exec_request.cwd)}"
            + ("" if exec_request.sandboxed else " (outside the sandbox)")
            + "; approve this call."
        )
        if review is not None and review.text:  # e.g. a plan's summary, destroys first
            reason += "\n" + review.text
        for line in exec_request.target:  # the environment that retargets it, resolved
            reason += "\n" + line
        request = PermissionRequest(
            call_id=call_id,
            tool_name=tool_name,
            title=f"{tool_name}: {shown_command}",
            kind="execute",
            input={
                "command": command,
                "argv": argv,
                "cwd": exec_request.cwd,
                **({"env": dict(exec_request.env)} if exec_request.env else {}),
            },
            options=list(PER_CALL_OPTIONS),
            reason=reason,
            danger=True,
            review=review.summary if review is not None else None,
        )
        request.form = typed_confirmation(request.review, request.danger)
        if ask is None:
            return Decision(False, "denied", f"{DENIED_MESSAGE} No one is there to approve it.")
        answer = checked(request, await ask(request))
        exec_request.asked.update(answered(request, answer))
        if answer == CANCELLED:
            return Decision(False, "cancelled", "Cancelled.")
        if answer == ALLOW_ONCE:
            return Decision(True)
        note = getattr(answer, "note", "")
        if note:
            return Decision(False, "denied", f"Rejected by the user, who says: {note}")
        return Decision(False, "denied", DENIED_MESSAGE)

    def _take_literal(self, call_id: str, exec_request: ExecRequest) -> bool:
        """Consume an approved literal command equal to this argv (program by name)."""
        literals = self._approved_literals.get(call_id, [])
        for words in literals:
            i = command_position(words)
            if (
                i < len(words)
                and os.path.basename(words[i]) == exec_request.program
                and words[i + 1 :] == exec_request.argv[1:]
            ):
                literals.remove(words)
                return True
        return False

    def exec_asker(
        self, call_id: str, tool_name: str, ask: AskPermission | None
    ) -> Callable[[ExecRequest], Awaitable[tuple[bool, str]]]:
        """The ``ToolContext.ask_exec`` for one tool call: decided by :meth:`check_exec`."""

        async def ask_exec(exec_request: ExecRequest) -> tuple[bool, str]:
            decision = await self.check_exec(exec_request, call_id, tool_name, ask)
            return decision.allowed, decision.message

        return ask_exec

    async def check_egress(
        self, host: str, port: int, call_id: str, tool_name: str, ask: AskPermission | None
    ) -> Decision:
        """May a sandbox of this call reach ``host``? The session's answer, the ``bypass``
        mode, or else the user's."""
        if host not in self.egress_hosts and self.mode == "bypass":
            return Decision(True)
        request = egress_request(host, port, call_id, tool_name)
        return await _session_answer(self.egress_hosts, host, request, ask)

    async def check_operation(
        self,
        operation: dict[str, Any],
        run: GuardedRun,
        call_id: str,
        tool_name: str,
        ask: AskPermission | None,
    ) -> Decision:
        """May ``run`` use a brokered credential for ``operation``? The session's answer,
        else the user's (in every mode: a change to real infrastructure is never approved
        by ``bypass`` alone)."""
        request = operation_request(operation, run, call_id, tool_name)
        return await _session_answer(self.cloud_operations, operation_key(operation), request, ask)

    def egress_asker(self, call_id: str, tool_name: str, ask: AskPermission | None) -> EgressAsker:
        """The ``ToolContext.ask_egress`` for one tool call."""
        return EgressAsker(self, call_id, tool_name, ask)


@dataclass
class EgressAsker:
    """The ``ToolContext.ask_egress`` of one tool call: hosts (called) and cloud
    operations (:meth:`operation`), both decided by the session's gate."""

    gate: PermissionGate
    call_id: str
    tool_name: str
    ask: AskPermission | None

    async def __call__(self, host: str, port: int) -> tuple[bool, str]:
        decision = await self.gate.check_egress(host, port, self.call_id, self.tool_name, self.ask)
        return decision.allowed, decision.message

    async def operation(self, operation: dict[str, Any], run: GuardedRun) -> tuple[bool, str]:
        decision = await self.gate.check_operation(
            operation, run, self.call_id, self.tool_name, self.ask
        )
        return decision.allowed, decision.message


def egress_request(host: str, port: int, call_id: str, tool_name: str) -> PermissionRequest:
    """The question a front shows about reaching ``host:port``."""
    shown = code_span(printable(f"{host}:{port}"))
    return PermissionRequest(
        call_id=call_id,
        tool_name=tool_name,
        title=f"{tool_name}: network access to {printable(host)}",
        kind="fetch",
        input={"egress_host": host, "port": port},
        options=list(ALL_OPTIONS),
        reason=(
            f"A sandboxed command wants to connect to {shown}, a host not on the "
            "egress_allow setting (add it there to allow it in every session)."
        ),
        labels={
            ALLOW_ONCE: f"Allow {host} for this command",
            ALLOW_ALWAYS: f"Allow {host} for this session",
            REJECT_ALWAYS: f"Reject {host} for this session",
        },
    )


def operation_request(
    operation: dict[str, Any], run: GuardedRun, call_id: str, tool_name: str
) -> PermissionRequest:
    """The question a front shows about one cloud operation of a guarded run."""
    named = printable(describe(operation))
    key = printable(operation_key(operation))
    secret = operation.get("access") == SECRET
    what = "returns a secret or a credential" if secret else "changes something"
    request = f"{operation.get('method', '')} {operation.get('url', '')}".strip()
    return PermissionRequest(
        call_id=call_id,
        tool_name=tool_name,
        title=f"{tool_name}: {named}",
        kind="execute",
        input={
            "cloud_operation": named,
            "program": run.shown,
            "request": printable(request)[:500],
            "request_sha256": operation.get("digest"),
        },
        options=list(ALL_OPTIONS),
        # A change to real infrastructure: per person, never a headless policy's.
        danger=True,
        reason=(
            f"{code_span(printable(run.shown))}, which ran without asking, sends "
            f"{code_span(named)} to {code_span(printable(str(operation.get('host'))))} with "
            f"your brokered credentials; it {what}. Only this request is allowed once."
        ),
        labels={
            ALLOW_ONCE: "Allow this request",
            ALLOW_ALWAYS: f"Allow {key} for this session",
            REJECT_ALWAYS: f"Reject {key} for this session",
        },
    )


async def _session_answer(
    memory: dict[str, str], key: str, request: PermissionRequest, ask: AskPermission | None
) -> Decision:
    """The answer ``memory`` keeps for ``key`` this session, else the user's to
    ``request`` (kept in ``memory`` when the user says "always")."""
    remembered = memory.get(key)
    if remembered == "allow":
        return Decision(True)
    if remembered == "reject":
        return Decision(False, "denied", f"{DENIED_MESSAGE} (rejected for this session)")
    if ask is None:
        return Decision(False, "denied", f"{DENIED_MESSAGE} No one is there to approve it.")
    answer = await ask(request)
    request.asked = answered(request, answer)
    if answer in (ALLOW_ALWAYS, REJECT_ALWAYS):
        memory[key] = "allow" if answer == ALLOW_ALWAYS else "reject"
    if answer in (ALLOW_ONCE, ALLOW_ALWAYS):
        return Decision(True)
    return Decision(False, "denied", "Cancelled." if answer == CANCELLED else DENIED_MESSAGE)


#: Programs that run their arguments as a command (``env X=1 terraform apply``).
_WRAPPERS = {"env", "command", "exec", "nohup", "time", "nice", "setsid", "stdbuf", "sudo"}


def command_position(words: list[str]) -> int:
    """Index of the program a simple command runs: after ``NAME=value`` assignments and
    known wrappers with their options (``echo terraform apply`` runs echo, index 0): for
    matching an approved literal command to the argv it execs."""
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, _ = word.partition("=")
        if eq and name.isidentifier():
            i += 1
        elif os.path.basename(word) in _WRAPPERS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        else:
            return i
    return i
