"""The agent loop: the one implementation of a turn, used by the kernel and the ACP server.

A turn sends the conversation to the model, streams events to the front end, runs the
tool calls the model asks for (through the permission gate), and loops until the model
ends the turn or a limit stops it. Every message is persisted when it completes and each
tool result the moment its call finishes (before the front end hears of it); the
in-memory history changes only after the write succeeded. A cancelled turn still leaves a
valid history (every tool_use has a tool_result). Events carry redacted diffs and readable
text (:func:`iac_kernel.textsafe.readable`), so every front end gets the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.agent import compaction
from iac_kernel.agent.events import (
    AgentEvent,
    Compacted,
    ErrorNotice,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
    Usage,
)
from iac_kernel.agent.history import shown_diff
from iac_kernel.agent.output_pump import OutputPump
from iac_kernel.agent.permissions import AskPermission, PermissionGate, PermissionRequest
from iac_kernel.config import Settings
from iac_kernel.models.base import (
    MessageDone,
    Model,
    ModelError,
    ModelRequest,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
)
from iac_kernel.models.scripted import estimate_tokens
from iac_kernel.redact import redact
from iac_kernel.redact import redact_value as _redact_value
from iac_kernel.textsafe import readable, readable_value
from iac_kernel.tools.base import Tool, ToolContext, ToolError, ToolResult
from iac_kernel.tools.tf_results import after_tool_call, live_masker, mask_diff

log = logging.getLogger(__name__)

CANCELLED_RESULT = "Cancelled."
INTERRUPTED_RESULT = "Interrupted: the session stopped before this tool call finished."
NOT_RUN_MAX_TOKENS = "Not run: the response was cut off by the output token limit."
UNKNOWN_TOOL = "Unknown tool {name!r}. Available tools: {names}."

Emit = Callable[[AgentEvent], Awaitable[None] | None]


@dataclass
class Conversation:
    """The session's messages, and what the model sees of them after compaction."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    keep_from: int = 0

    def model_messages(self) -> list[dict[str, Any]]:
        """What is sent to the model: the summary, then the kept messages, roles merged."""
        messages = self.messages[self.keep_from :]
        if self.summary:
            messages = [{"role": "user", "content": compaction.SUMMARY_PREFIX + self.summary}]
            messages += self.messages[self.keep_from :]
        # Lone surrogates (undecodable bytes) are stored exactly; the model gets them readable.
        return readable_value(merge_roles(messages))


class Persist:
    """Where the loop writes completed messages and compactions (the session store)."""

    def message(self, message: dict[str, Any]) -> None: ...

    def tool_result(
        self,
        block: dict[str, Any],
        *,
        name: str = "",
        raw_output: Any = None,
        full: str | None = None,
    ) -> None:
        """One finished call's result, written the moment it finishes (its own record)."""

    def compaction(self, summary: str, keep_from: int) -> None: ...


def merge_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive messages of one role (e.g. a prompt after a cancelled turn)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        blocks = _blocks(message["content"])
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": merged[-1]["content"] + blocks}
        else:
            merged.append({"role": message["role"], "content": blocks})
    return merged


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


@dataclass
class _Call:
    """A tool call the model made in this response."""

    call_id: str
    name: str
    tool: Tool | None
    input: dict[str, Any] = field(default_factory=dict)
    title: str = ""
    finished: bool = False


class AgentLoop:
    """Runs turns for one conversation."""

    def __init__(
        self,
        *,
        model: Model,
        tools: list[Tool],
        gate: PermissionGate,
        settings: Settings,
        cwd: Path,
        system_prompt: str,
        conversation: Conversation,
        persist: Persist,
        allow_subagents: bool = True,
    ):
        self.model = model
        self.tools = {tool.name: tool for tool in tools}
        self.gate = gate
        self.settings = settings
        self.cwd = cwd
        self.system_prompt = system_prompt
        self.conversation = conversation
        self.persist = persist
        self.allow_subagents = allow_subagents
        #: Input tokens the model reported for the last call (0 after compacting).
        self._last_input_tokens = 0

    async def run_turn(
        self, prompt: list[dict[str, Any]], emit: Emit, ask: AskPermission | None
    ) -> TurnEnded:
        """Run one user turn to its end. Cancelling the task ends the turn as ``cancelled``."""
        usage = Usage()
        self._close_dangling()
        self._append({"role": "user", "content": prompt})
        calls: dict[str, _Call] = {}
        partial_text: list[str] = []
        try:
            for _request in range(self.settings.max_turn_requests):
                await self._maybe_compact(emit)
                calls = {}
                partial_text = []
                done = await self._stream_response(emit, calls, partial_text, usage)
                if done is None:
                    return await self._end(emit, "end_turn", usage)
                partial_text = []
                self._append({"role": "assistant", "content": done.content})
                tool_uses = [b for b in done.content if b.get("type") == "tool_use"]
                if done.stop_reason in ("max_tokens", "model_context_window_exceeded"):
                    if tool_uses:
                        await self._close_calls(emit, calls, tool_uses, NOT_RUN_MAX_TOKENS)
                    return await self._end(emit, "max_tokens", usage)
                if done.stop_reason == "refusal":
                    if tool_uses:
                        await self._close_calls(emit, calls, tool_uses, "Not run: refusal.")
                    return await self._end(emit, "refusal", usage)
                if done.stop_reason == "pause_turn":
                    continue
                if not tool_uses:
                    return await self._end(emit, "end_turn", usage)
                cancelled = await self._run_tools(emit, calls, tool_uses, ask)
                if cancelled:
                    raise asyncio.CancelledError
            return await self._end(emit, "max_turn_requests", usage)
        except asyncio.CancelledError:
            await self._repair_after_cancel(emit, calls, partial_text)
            return await self._end(emit, "cancelled", usage)

    def record_prompt(self, prompt: list[dict[str, Any]]) -> None:
        """Store a prompt whose turn was cancelled before it started."""
        self._close_dangling()
        self._append({"role": "user", "content": prompt})

    # -- model streaming -------------------------------------------------------------

    async def _stream_response(
        self,
        emit: Emit,
        calls: dict[str, _Call],
        partial_text: list[str],
        usage: Usage,
    ) -> MessageDone | None:
        request = ModelRequest(
            system=self.system_prompt,
            messages=self.conversation.model_messages(),
            tools=[t.definition() for t in self.tools.values() if self._offered(t)],
            max_tokens=self.settings.max_tokens,
            thinking_budget=self.settings.thinking_budget,
        )
        if hasattr(self.model, "on_retry"):
            # Providers that retry (429/529/5xx before output) tell the user they are waiting.
            async def on_retry(attempt: int, delay: float, reason: str) -> None:
                await _send(
                    emit,
                    ErrorNotice(f"Model call failed ({reason}); retry {attempt} in {delay:.1f}s."),
                )

            self.model.on_retry = on_retry
        try:
            async for event in self.model.stream(request):
                if isinstance(event, TextChunk):
                    partial_text.append(event.text)
                    await _send(emit, TextDelta(event.text))
                elif isinstance(event, ThinkingChunk):
                    await _send(emit, ThinkingDelta(event.text))
                elif isinstance(event, ToolUseBegin):
                    tool = self.tools.get(event.name)
                    call = _Call(event.id, event.name, tool, title=event.name)
                    calls[event.id] = call
                    await _send(
                        emit,
                        ToolCallStarted(event.id, event.name, call.title, _kind(tool)),
                    )
                elif isinstance(event, ToolUseEnd):
                    await self._announce_input(emit, calls, event)
                elif isinstance(event, MessageDone):
                    usage.add(event.usage)
                    self._last_input_tokens = event.usage.input_tokens
                    return event
        except asyncio.CancelledError:
            # The call was cut off before the provider reported its usage: count an
            # estimate of what it consumed, so a cancelled turn never reports 0 tokens.
            usage.add(_estimated_usage(request, partial_text))
            raise
        except ModelError as exc:
            await _send(emit, ErrorNotice(f"Model error: {redact(str(exc))}"))
            if partial_text:
                self._append({"role": "assistant", "content": "".join(partial_text)})
                partial_text.clear()
            await self._fail_open_calls(emit, calls, f"Not run: model error: {exc}")
            return None
        await _send(emit, ErrorNotice("Model error: the response ended without finishing."))
        await self._fail_open_calls(emit, calls, "Not run: the response did not finish.")
        return None

    async def _announce_input(self, emit: Emit, calls: dict[str, _Call], event: ToolUseEnd):
        call = calls.get(event.id) or _Call(event.id, event.name, self.tools.get(event.name))
        calls[event.id] = call
        call.input = event.input if isinstance(event.input, dict) else {}
        diff = None
        locations: list[str] = []
        if call.tool is not None:
            call.title = _safe(lambda: call.tool.title(call.input), call.name)
            ctx = self._context(None)
            locations = [str(p) for p in _safe(lambda: call.tool.paths(call.input, ctx), [])]
            diff = _safe(lambda: call.tool.preview(call.input, ctx), None)
        await _send(
            emit,
            ToolCallInput(
                call.call_id,
                call.name,
                readable(call.title),
                _kind(call.tool),
                readable_value(_redact_value(call.input)),
                [readable(p) for p in locations],
                mask_diff(shown_diff(diff), self.cwd),
            ),
        )

    # -- tools -----------------------------------------------------------------------

    async def _run_tools(
        self,
        emit: Emit,
        calls: dict[str, _Call],
        tool_uses: list[dict[str, Any]],
        ask: AskPermission | None,
    ) -> bool:
        """Run the response's tool calls in order, persisting each result as it finishes;
        returns whether the turn was cancelled on the way (the remaining calls then get
        "Cancelled." without running)."""
        for index, block in enumerate(tool_uses):
            call = calls.get(block["id"])
            if call is None:  # a provider that skipped the begin/end events
                call = _Call(block["id"], block["name"], self.tools.get(block["name"]))
                calls[block["id"]] = call
                await self._announce_input(
                    emit, calls, ToolUseEnd(block["id"], block["name"], block.get("input", {}))
                )
            try:
                result, denied = await self._run_one(emit, call, ask)
            except asyncio.CancelledError:
                for rest in tool_uses[index:]:
                    other = calls.get(rest["id"]) or _Call(rest["id"], rest["name"], None)
                    cancelled = ToolResult(CANCELLED_RESULT, is_error=True)
                    self._append_result(other, cancelled)
                    await self._finish(emit, other, cancelled, False)
                return True
            self._append_result(call, result)
            await self._finish(emit, call, result, denied)
        return False

    async def _run_one(
        self, emit: Emit, call: _Call, ask: AskPermission | None
    ) -> tuple[ToolResult, bool]:
        """Check permission and run one call; returns the result and whether it was denied."""
        if call.tool is None:
            names = ", ".join(sorted(self.tools))
            return ToolResult(UNKNOWN_TOOL.format(name=call.name, names=names), True), False
        pump = OutputPump(
            lambda event: _send(emit, event),
            call.call_id,
            masker=_safe(lambda: live_masker(call.name, call.input, self.cwd), None),
        )
        ctx = self._context(ask, on_output=lambda text: pump.push(readable(text)))
        # Exec-time approvals of guarded programs (issue 11), decided by the gate.
        ctx.ask_exec = self.gate.exec_asker(call.call_id, call.name, ask)
        try:  # e.g. terraform_apply: the saved plan's bytes and summary, bound to the approval
            ctx.review = await call.tool.review(call.input, ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an approval must not skip its review
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
            raise asyncio.CancelledError
        if not decision.allowed:
            return ToolResult(decision.message, is_error=True), True
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
        result.content = redact(result.content)
        result.raw_output = _redact_value(result.raw_output)
        # Terraform: sensitive values masked, state reads marked, plans picked up.
        result = await after_tool_call(call.name, call.input, self.cwd, result)
        return result, False

    async def _finish(self, emit: Emit, call: _Call, result: ToolResult, denied: bool) -> None:
        call.finished = True
        await _send(
            emit,
            ToolCallResult(
                call.call_id,
                call.name,
                "failed" if result.is_error else "completed",
                readable(result.content),
                raw_output=readable_value(result.raw_output),
                diff=shown_diff(result.diff),
                denied=denied,
            ),
        )

    async def _close_calls(
        self, emit: Emit, calls: dict[str, _Call], tool_uses: list[dict], text: str
    ) -> None:
        """Give every tool_use of the last response that has none a result, without
        running it."""
        answered = self._answered()
        for block in tool_uses:
            if block["id"] in answered:
                continue
            call = calls.get(block["id"]) or _Call(block["id"], block["name"], None)
            result = ToolResult(text, is_error=True)
            self._append_result(call, result)
            if not call.finished:
                await self._finish(emit, call, result, False)

    async def _fail_open_calls(self, emit: Emit, calls: dict[str, _Call], text: str) -> None:
        for call in calls.values():
            if not call.finished:
                await self._finish(emit, call, ToolResult(text, is_error=True), False)

    # -- cancellation, compaction, sub-agents ------------------------------------------

    async def _repair_after_cancel(
        self, emit: Emit, calls: dict[str, _Call], partial_text: list[str]
    ) -> None:
        """Leave a valid history: keep streamed text, close every tool_use with a result."""
        try:
            if partial_text:
                self._append({"role": "assistant", "content": "".join(partial_text)})
            open_ids = self._open_tool_uses()
            if open_ids:
                await self._close_calls(emit, calls, open_ids, CANCELLED_RESULT)
            await self._fail_open_calls(emit, calls, CANCELLED_RESULT)
        except Exception:  # the turn must still answer "cancelled"
            log.exception("repair after cancel failed")

    async def _maybe_compact(self, emit: Emit) -> None:
        window = self.settings.context_window or self.model.context_window
        tools = [t.definition() for t in self.tools.values()]
        messages = self.conversation.model_messages()
        used = max(
            compaction.context_tokens(self.system_prompt, messages, tools),
            self._last_input_tokens,
        )
        if used < self.settings.compact_threshold * window:
            return
        visible = self.conversation.messages[self.conversation.keep_from :]
        cut = compaction.split_point(visible, int(compaction.KEEP_SHARE * window))
        if cut <= 0:
            return
        try:
            summary = await compaction.summarise(
                self.model, visible[:cut], self.conversation.summary
            )
        except ModelError as exc:
            await _send(emit, ErrorNotice(f"Could not compact the context: {exc}"))
            return
        self.conversation.summary = summary
        self.conversation.keep_from += cut
        self._last_input_tokens = 0
        self.persist.compaction(summary, self.conversation.keep_from)
        await _send(
            emit,
            Compacted(
                f"Context compacted: {cut} earlier messages were summarised to stay within "
                f"the model's {window:,}-token window.",
                cut,
            ),
        )

    def _offered(self, tool: Tool) -> bool:
        return tool.name != "agent" or self.allow_subagents

    def _context(
        self, ask: AskPermission | None, on_output: Callable[[str], None] | None = None
    ) -> ToolContext:
        async def run_subagent(prompt: str) -> str:
            return await self.run_subagent(prompt, ask)

        return ToolContext(
            cwd=self.cwd,
            settings=self.settings,
            run_subagent=run_subagent if self.allow_subagents else None,
            on_output=on_output,
        )

    async def run_subagent(self, prompt: str, ask: AskPermission | None) -> str:
        """A sub-agent: its own loop and history, the same tools, gate and user."""
        child = AgentLoop(
            model=self.model,
            tools=[t for t in self.tools.values() if t.name != "agent"],
            gate=self.gate,
            settings=self.settings,
            cwd=self.cwd,
            system_prompt=self.system_prompt
            + "\nYou are a sub-agent: do the task, then answer with your findings only.",
            conversation=Conversation(),
            persist=Persist(),
            allow_subagents=False,
        )
        texts: list[str] = []

        def collect(event: AgentEvent) -> None:
            if isinstance(event, TextDelta):
                texts.append(event.text)

        ended = await child.run_turn([{"type": "text", "text": prompt}], collect, ask)
        if ended.stop_reason == "cancelled":
            raise asyncio.CancelledError
        return "".join(texts).strip() or f"(the sub-agent ended with {ended.stop_reason})"

    # -- helpers -----------------------------------------------------------------------

    def _append(self, message: dict[str, Any]) -> None:
        """Persist ``message``, then add it to the history (never the other way round)."""
        self.persist.message(message)
        self.conversation.messages.append(message)

    def _append_result(self, call: _Call, result: ToolResult) -> None:
        """Persist one call's result as its own record, then merge it into the user
        message that holds this response's results."""
        block = _tool_result(call.call_id, result)
        full = getattr(result, "full_output", None)
        self.persist.tool_result(
            block,
            name=call.name,
            raw_output=result.raw_output,
            full=redact(full) if isinstance(full, str) else None,
        )
        results = _results_message(self.conversation.messages)
        if results is not None:
            results["content"].append(block)
        else:
            self.conversation.messages.append({"role": "user", "content": [block]})

    def _answered(self) -> set[str]:
        """Ids of the last response's calls that already have a result."""
        results = _results_message(self.conversation.messages)
        return {b["tool_use_id"] for b in results["content"]} if results else set()

    def _open_tool_uses(self) -> list[dict[str, Any]]:
        """The last response's tool_use blocks that have no result yet."""
        messages = self.conversation.messages
        if _results_message(messages) is not None:
            response = messages[-2]
        elif messages:
            response = messages[-1]
        else:
            return []
        if response.get("role") != "assistant":
            return []
        content = response.get("content")
        answered = self._answered()
        return [
            b
            for b in (content if isinstance(content, list) else [])
            if b.get("type") == "tool_use" and b.get("id") not in answered
        ]

    def _close_dangling(self) -> None:
        """Answer calls left without a result (a write that failed mid-turn), so the next
        request is valid."""
        for block in self._open_tool_uses():
            call = _Call(block["id"], block.get("name", "tool"), None)
            self._append_result(call, ToolResult(INTERRUPTED_RESULT, is_error=True))

    async def _end(self, emit: Emit, stop_reason: Any, usage: Usage) -> TurnEnded:
        ended = TurnEnded(stop_reason, usage)
        try:
            await _send(emit, ended)
        except Exception:
            log.exception("front end failed on turn end")
        return ended


async def _send(emit: Emit, event: AgentEvent) -> None:
    result = emit(event)
    if asyncio.iscoroutine(result) or isinstance(result, Awaitable):
        await result


def _kind(tool: Tool | None) -> str:
    return tool.kind if tool is not None else "other"


def _tool_result(call_id: str, result: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": result.content,
    }
    if result.is_error:
        block["is_error"] = True
    return block


def _safe(fn: Callable[[], Any], default: Any) -> Any:
    """Titles, paths and previews are for display; a failure there must not stop the call."""
    try:
        return fn()
    except Exception:
        return default


def _estimated_usage(request: ModelRequest, partial_text: list[str]) -> Usage:
    """Tokens an interrupted model call used, estimated from what was sent and streamed."""
    sent = compaction.context_tokens(request.system, request.messages, request.tools)
    return Usage(input_tokens=sent, output_tokens=estimate_tokens("".join(partial_text)))


def _results_message(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last message if it holds (only) the results of the response before it."""
    if len(messages) < 2 or messages[-2].get("role") != "assistant":
        return None
    last = messages[-1]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, list) or not content:
        return None
    return last if all(b.get("type") == "tool_result" for b in content) else None
