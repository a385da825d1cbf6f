"""Running the tool calls of one model response, from announcement to persisted result.

A call is announced when the model starts it and again with its input (title, paths,
redacted input and a masked diff preview). Running one: the tool's review (e.g. the saved
plan an apply is bound to), the permission gate (with exec-time approvals of guarded
programs through ``ctx.ask_exec``), the tool itself with its live output pumped to the
front end, then redaction and Terraform masking of the result. Each result is persisted
(:class:`~iac_kernel.agent.conversation.Transcript`) before the front end hears of it;
calls that cannot run any more are closed with a result instead.

Live output (:class:`OutputPump`): the chunks a running tool prints
(``ToolContext.on_output``, from the loop's thread or any other) are buffered and sent as
one ``ToolCallOutput`` at most every :data:`OUTPUT_INTERVAL` seconds, in order; what is
left goes out before the call's result event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel import telemetry
from iac_kernel.agent import questions
from iac_kernel.agent.conversation import Transcript
from iac_kernel.agent.history import shown_diff
from iac_kernel.agent.permissions import AskPermission, PermissionGate, PermissionRequest
from iac_kernel.events import (
    OUTPUT_TAIL_CHARS,
    AgentEvent,
    Emit,
    Location,
    ToolCallInput,
    ToolCallOutput,
    ToolCallResult,
    ToolCallStarted,
    send,
)
from iac_kernel.guard.approval.request import AskExec, ExecRequest
from iac_kernel.models.base import ToolUseBegin, ToolUseEnd
from iac_kernel.redact import redact, secret_values
from iac_kernel.redact import redact_value as _redact_value
from iac_kernel.textsafe import code_span, printable, readable, readable_value
from iac_kernel.tools.base import Tool, ToolContext, ToolError, ToolResult
from iac_kernel.tools.tf_masking import (
    after_tool_call,
    live_masker,
    mask_diff,
    mask_question,
    mask_shown,
)

log = logging.getLogger(__name__)

CANCELLED_RESULT = "Cancelled."
UNKNOWN_TOOL = "Unknown tool {name!r}. Available tools: {names}."

#: Builds the context a call runs in: ``(ask, on_output)`` -> ToolContext.
ContextFactory = Callable[[AskPermission | None, Callable[[str], None] | None], ToolContext]


@dataclass
class Call:
    """A tool call the model made in this response."""

    call_id: str
    name: str
    tool: Tool | None
    input: dict[str, Any] = field(default_factory=dict)
    #: The input as front ends were shown it (secrets masked, text readable).
    shown: dict[str, Any] = field(default_factory=dict)
    title: str = ""
    finished: bool = False
    #: Why the call cannot run (a malformed call from the model), if so.
    error: str | None = None


class ToolCalls:
    """Announces, checks, runs and answers the tool calls of a loop's responses."""

    def __init__(
        self,
        *,
        tools: dict[str, Tool],
        gate: PermissionGate,
        cwd: Path,
        context: ContextFactory,
        transcript: Transcript,
    ) -> None:
        self.tools = tools
        self.gate = gate
        self.cwd = cwd
        self._context = context
        self._transcript = transcript

    async def begin(self, emit: Emit, calls: dict[str, Call], event: ToolUseBegin) -> None:
        """The model started a call: remember it and tell the front end."""
        tool = self.tools.get(event.name)
        call = Call(event.id, event.name, tool, title=event.name)
        calls[event.id] = call
        await send(emit, ToolCallStarted(event.id, event.name, call.title, _kind(tool)))

    async def announce_input(self, emit: Emit, calls: dict[str, Call], event: ToolUseEnd):
        """The call's input is complete: show its title, paths, input and diff preview."""
        call = calls.get(event.id) or Call(event.id, event.name, self.tools.get(event.name))
        calls[event.id] = call
        call.input = event.input if isinstance(event.input, dict) else {}
        call.error = event.error
        diff = None
        locations: list[Location] = []
        if call.tool is not None:
            call.title = _safe(lambda: call.tool.title(call.input), call.name)
            ctx = self._context(None, None)
            diff = _safe(lambda: call.tool.preview(call.input, ctx), None)
            locations = _safe(lambda: call.tool.locations(call.input, ctx, diff), [])
        call.shown = readable_value(mask_shown(call.input, self.cwd, fresh=False))
        await send(
            emit,
            ToolCallInput(
                call.call_id,
                call.name,
                readable(call.title),
                _kind(call.tool),
                call.shown,
                [Location(readable(loc.path), loc.line) for loc in locations],
                mask_diff(shown_diff(diff), self.cwd),
            ),
        )

    async def run_all(
        self,
        emit: Emit,
        calls: dict[str, Call],
        tool_uses: list[dict[str, Any]],
        ask: AskPermission | None,
    ) -> bool:
        """Run the response's tool calls in order, persisting each result as it finishes;
        returns whether the turn was cancelled on the way (the remaining calls then get
        "Cancelled." without running)."""
        for index, block in enumerate(tool_uses):
            call = calls.get(block["id"])
            if call is None:  # a provider that skipped the begin/end events
                call = Call(block["id"], block["name"], self.tools.get(block["name"]))
                calls[block["id"]] = call
                await self.announce_input(
                    emit, calls, ToolUseEnd(block["id"], block["name"], block.get("input", {}))
                )
            try:
                with telemetry.tool_call(call.name, call.call_id, call.shown) as span:
                    result, denied = await self._run_one(emit, call, ask)
                    span.result(result.content, result.is_error, denied)
            except asyncio.CancelledError:
                for rest in tool_uses[index:]:
                    other = calls.get(rest["id"]) or Call(rest["id"], rest["name"], None)
                    cancelled = ToolResult(CANCELLED_RESULT, is_error=True)
                    self._transcript.append_result(other.call_id, other.name, cancelled)
                    await self._finish(emit, other, cancelled, False)
                return True
            self._transcript.append_result(call.call_id, call.name, result)
            await self._finish(emit, call, result, denied)
        return False

    async def _run_one(
        self, emit: Emit, call: Call, ask: AskPermission | None
    ) -> tuple[ToolResult, bool]:
        """Check permission and run one call; returns the result and whether it was denied."""
        if call.error:
            return ToolResult(f"Not run: {call.error}. Send the call again.", True), False
        if call.tool is None:
            names = ", ".join(sorted(self.tools))
            return ToolResult(UNKNOWN_TOOL.format(name=call.name, names=names), True), False
        live = call.tool.prints_live
        pump = OutputPump(
            lambda event: send(emit, event),
            call.call_id,
            masker=_safe(lambda: live_masker(call.input, self.cwd), None) if live else None,
        )
        # Questions go out masked: exec-time ones with a fresh scan (the running call may
        # have created values), the one before the call with the values known so far.
        running_ask = _masking(ask, self.cwd, fresh=True)
        ask = _masking(ask, self.cwd, fresh=False)
        ctx = self._context(running_ask, lambda text: pump.push(readable(text)))
        # Exec-time approvals of guarded programs (issue 11), decided by the gate; a
        # refused one makes the call a refusal, not a failure (see refused_exec).
        refusals: list[str] = []
        ctx.ask_exec = refused_exec(
            self.gate.exec_asker(call.call_id, call.name, running_ask), refusals
        )
        ctx.ask_egress = self.gate.egress_asker(call.call_id, call.name, running_ask)
        # The agent's own questions (ask_user) go out through the same channel.
        ctx.ask_user = None if ask is None else questions.user_asker(call.call_id, call.name, ask)
        # An MCP server's elicitations during the call, likewise (none to ask: declined).
        ctx.elicit = None if ask is None else questions.elicit_asker(call.call_id, call.name, ask)
        ctx.audit = _call_audit(ctx.audit, call)
        try:  # e.g. terraform_apply: the saved plan's bytes and summary, bound to the approval
            ctx.review = await call.tool.review(call.input, ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an approval must not skip its review
            refusal = call.tool.refusal_record(call.input, str(exc))
            if refusal is not None and ctx.audit is not None:
                record = {**refusal, "outcome": "refused", "message": str(exc)}
                await asyncio.to_thread(ctx.audit, record)
            return ToolResult(f"Not run: {exc}", is_error=True), False
        request = PermissionRequest(
            call_id=call.call_id,
            tool_name=call.name,
            title=call.title,
            kind=call.tool.kind,
            input=readable_value(_redact_value(call.input)),  # shown to the user only
            options=[],
            reason="",
            # Previewed again, not reused from the announcement: an earlier call of this
            # response may have changed the file since.
            diff=mask_diff(
                shown_diff(_safe(lambda: call.tool.preview(call.input, ctx), None)), self.cwd
            ),
            review=ctx.review.summary() if ctx.review is not None else None,
        )
        decision = await self.gate.check(call.tool, call.input, ctx, request, ask)
        if decision.outcome == "cancelled":
            await _audit_review(ctx, request, "cancelled", None)
            await _audit_unrun_change(ctx, call, request, "cancelled")
            raise asyncio.CancelledError
        if not decision.allowed:
            outcome = "rejected" if request.asked else "refused"
            await _audit_review(ctx, request, outcome, ToolResult(decision.message, True))
            await _audit_unrun_change(ctx, call, request, outcome)
            return ToolResult(decision.message, is_error=True), True
        result = None
        try:
            result = await call.tool.run(call.input, ctx)
        except ToolError as exc:
            result = ToolResult(str(exc), is_error=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool bug must not end the turn or leak a traceback
            log.exception("tool %s failed", call.name)
            result = ToolResult(f"{call.name} failed: {type(exc).__name__}: {exc}", True)
        finally:
            await pump.close()  # live output reaches the front end before the result
            await _audit_review(ctx, request, "interrupted" if result is None else "", result)
        if refusals:  # the model reads first that the user (or the mode) said no
            result.content = "\n".join(refusals) + "\n\n" + result.content
        env_values = frozenset(secret_values())  # what redact() masks with
        result.content = redact(result.content)
        result.raw_output = _redact_value(result.raw_output)
        if result.plan_rows is not None:  # a whole plan's rows: a second's work at 10,000
            result.plan_rows = await asyncio.to_thread(_redact_value, result.plan_rows)
        result.masked_with = env_values
        # Terraform: sensitive values masked, state reads marked, plans picked up.
        result = await after_tool_call(call.tool, call.input, self.cwd, result)
        return result, bool(refusals)

    async def _finish(self, emit: Emit, call: Call, result: ToolResult, denied: bool) -> None:
        call.finished = True
        content, tool = readable(result.content), call.tool
        found = _safe(lambda: tool.result_locations(content, self.cwd), []) if tool else []
        await send(
            emit,
            ToolCallResult(
                call.call_id,
                call.name,
                "failed" if result.is_error else "completed",
                content,
                raw_output=readable_value(result.raw_output),
                plan_rows=readable_value(result.plan_rows),
                diff=shown_diff(result.diff),
                denied=denied,
                locations=found,
                checklist=None if tool is None or result.is_error else tool.checklist(call.shown),
            ),
        )

    async def close(
        self, emit: Emit, calls: dict[str, Call], tool_uses: list[dict], text: str
    ) -> None:
        """Give every tool_use of the last response that has none a result, without
        running it."""
        answered = self._transcript.answered()
        for block in tool_uses:
            if block["id"] in answered:
                continue
            call = calls.get(block["id"]) or Call(block["id"], block["name"], None)
            result = ToolResult(text, is_error=True)
            self._transcript.append_result(call.call_id, call.name, result)
            if not call.finished:
                await self._finish(emit, call, result, False)

    async def fail_open(self, emit: Emit, calls: dict[str, Call], text: str) -> None:
        """Tell the front end that every call not finished yet failed with ``text``."""
        for call in calls.values():
            if not call.finished:
                await self._finish(emit, call, ToolResult(text, is_error=True), False)


def refused_exec(ask_exec: AskExec, refusals: list[str]) -> AskExec:
    """``ask_exec`` that notes each refused command: the gate's words (``Permission
    denied.``, ``Rejected by the user, who says: …``) and the command that did not run.
    A call with a refused command ends as ``denied``: the user rejected it, it did not
    fail, and its result starts with those words (the model reads them first)."""

    async def ask(exec_request: ExecRequest) -> tuple[bool, str]:
        allowed, message = await ask_exec(exec_request)
        if not allowed and message != CANCELLED_RESULT:
            argv = [exec_request.program, *exec_request.argv[1:]]
            command = code_span(printable(shlex.join(argv)))
            said = message.rstrip()
            said += "" if said.endswith((".", "!", "?")) else "."
            refusals.append(f"{said} {command} was not run.")
        return allowed, message

    return ask


def _call_audit(sink: Callable[[dict], None] | None, call: Call) -> Callable | None:
    """The session's audit sink, with this call's id and tool added to each record."""
    if sink is None:
        return None

    def write(record: dict[str, Any]) -> None:
        try:
            sink({"call_id": call.call_id, "tool": call.name, **record})
        except Exception:  # the store's trouble must not fail the call that changed things
            log.exception("could not write the audit record of %s", call.call_id)

    return write


async def _audit_review(
    ctx: ToolContext, request: PermissionRequest, outcome: str, result: ToolResult | None
) -> None:
    """The audit record of a reviewed call (a review with ``audit_record()``, e.g. the
    saved plan terraform_apply applies): approved or not, whatever happened."""
    build = getattr(ctx.review, "audit_record", None)
    if ctx.audit is None or not callable(build):
        return
    raw = result.raw_output if result is not None and isinstance(result.raw_output, dict) else {}
    try:
        record = {**(await asyncio.to_thread(build)), **request.asked}
    except Exception:
        log.exception("audit record failed")
        return
    record["outcome"] = raw.get("outcome") or outcome or ("failed" if result.is_error else "ok")
    record["exit"] = raw.get("exit")
    if result is not None and result.is_error and not raw.get("outcome"):
        record["message"] = result.content[:2000]
    await asyncio.to_thread(ctx.audit, record)


async def _audit_unrun_change(
    ctx: ToolContext, call: Call, request: PermissionRequest, outcome: str
) -> None:
    """The audit record of a call its tool calls a change (the gate's per-call question,
    e.g. bash's ``kubectl delete``) that never ran, when no review records it: once
    allowed, what it runs is recorded where it runs (the guard, the wire)."""
    if ctx.audit is None or callable(getattr(ctx.review, "audit_record", None)):
        return
    changing, reason = _safe(lambda: call.tool.gate_reason(call.input, ctx), (False, None))
    if not changing:
        return
    shown = request.input.get("command") if isinstance(request.input, dict) else None
    record = {"kind": "command", "form": "call", "command": shown or request.title}
    record = {**record, "reason": reason, **request.asked, "outcome": outcome, "exit": None}
    await asyncio.to_thread(ctx.audit, record)


def _masking(ask: AskPermission | None, cwd: Path, fresh: bool) -> AskPermission | None:
    """``ask`` showing every question masked with the values known when it goes out
    (with ``fresh``, after a new scan: a value the running call just created included)."""
    if ask is None:
        return None

    async def masked_ask(request: PermissionRequest) -> str:
        shown = await asyncio.to_thread(mask_question, request, cwd, fresh)
        return await telemetry.question(shown, ask(shown))

    return masked_ask


def _kind(tool: Tool | None) -> str:
    return tool.kind if tool is not None else "other"


def _safe(fn: Callable[[], Any], default: Any) -> Any:
    """Titles, paths and previews are for display; a failure there must not stop the call."""
    try:
        return fn()
    except Exception:
        return default


# -- live output -----------------------------------------------------------------------

#: Seconds between two output events of one call.
OUTPUT_INTERVAL = 0.1

Send = Callable[[AgentEvent], Awaitable[None]]


class OutputPump:
    """Buffers one call's live output and emits it as coalesced events."""

    def __init__(
        self,
        send: Send,
        call_id: str,
        *,
        interval: float = OUTPUT_INTERVAL,
        masker: Any = None,
    ):
        self.send = send
        #: Masks Terraform's sensitive values (``feed(text) -> str``, ``flush() -> str``;
        #: iac_kernel.terraform.sensitive.StreamMasker); it may hold text back until close.
        self.masker = masker
        self.call_id = call_id
        self.interval = interval
        self.loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._buffer: list[str] = []
        self._tail = ""
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: Everything printed (redacted), for a front end that wants it after a cancel.
        self.printed: list[str] = []

    def push(self, text: str) -> None:
        """``ToolContext.on_output``: safe to call from any thread."""
        if not text or self._closed:
            return
        if threading.get_ident() == self._thread:
            self._push(text)
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self.loop.call_soon_threadsafe(self._push, text)

    def _push(self, text: str) -> None:
        if self._closed:
            return
        self._buffer.append(text)
        if self._timer is None and (self._task is None or self._task.done()):
            self._timer = self.loop.call_later(0, self._flush)

    def _flush(self) -> None:
        self._timer = None
        if not self._buffer:
            return
        self._task = self.loop.create_task(self._emit_and_rest())

    async def _emit_and_rest(self) -> None:
        await self._emit()
        if not self._closed and self._timer is None:
            # Hold the next chunks for the interval: a chatty command is coalesced.
            self._timer = self.loop.call_later(self.interval, self._flush)

    async def _emit(self, final: bool = False) -> None:
        if not self._buffer and not (final and self.masker is not None):
            return
        text = "".join(self._buffer)
        self._buffer.clear()
        if self.masker is None:
            text = redact(text)
        else:  # the masker redacts too, on text held across chunks
            # In a thread: the masker may rescan the workspace for values the call created.
            text = await asyncio.to_thread(self._mask, text, final)
            if not text:
                return
        self.printed.append(text)
        self._tail = (self._tail + text)[-OUTPUT_TAIL_CHARS:]
        await self.send(ToolCallOutput(self.call_id, text, self._tail))

    def _mask(self, text: str, final: bool) -> str:
        return self.masker.feed(text) + (self.masker.flush() if final else "")

    async def close(self) -> None:
        """Send what is left (once); later chunks are dropped."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None and not self._task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)
        await self._emit(final=True)
