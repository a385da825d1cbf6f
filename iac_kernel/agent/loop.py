"""The agent loop: the one implementation of a turn, used by the kernel and the ACP server.

A turn sends the conversation to the model, streams events to the front end, runs the
tool calls the model asks for (through the permission gate), and loops until the model
ends the turn or a limit stops it. Every message is persisted when it completes and each
tool result the moment its call finishes (before the front end hears of it); the
in-memory history changes only after the write succeeded. A cancelled turn still leaves a
valid history (every tool_use has a tool_result). Events carry redacted diffs and readable
text (:func:`iac_kernel.textsafe.readable`), so every front end gets the same.

How the history grows is :mod:`iac_kernel.agent.conversation`; running the tool calls
(review, permission, the tool, masking) is :mod:`iac_kernel.agent.tool_calls`. The
system prompt (:data:`SYSTEM_PROMPT`) is an infrastructure-as-code engineer's working rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from iac_kernel import telemetry
from iac_kernel.agent import history
from iac_kernel.agent.conversation import (
    KEEP_SHARE,
    Conversation,
    Persist,
    Transcript,
    context_tokens,
    split_point,
    summarise,
)
from iac_kernel.agent.permissions import AskPermission, PermissionGate
from iac_kernel.agent.tool_calls import CANCELLED_RESULT, Call, ToolCalls
from iac_kernel.config import Settings
from iac_kernel.events import (
    AgentEvent,
    Compacted,
    CompactionStatus,
    Emit,
    ErrorNotice,
    ModelCallDone,
    TextDelta,
    ThinkingDelta,
    TurnEnded,
    Usage,
    send,
)
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
from iac_kernel.tools.base import Tool, ToolContext, ToolResult
from iac_kernel.tools.pull_request import session_changes

log = logging.getLogger(__name__)

INTERRUPTED_RESULT = "Interrupted: the session stopped before this tool call finished."
NOT_RUN_MAX_TOKENS = "Not run: the response was cut off by the output token limit."

SYSTEM_PROMPT = """\
You are iac-kernel, an infrastructure-as-code agent working beside an infrastructure \
engineer in a Jupyter notebook or an editor. You read and change Terraform / OpenTofu \
code, cloud modules (AWS, GCP, Azure), Kubernetes manifests and Helm charts, and run \
commands through your tools.

How you work:
- Read before you change: list files, grep and read the relevant modules, variables, \
outputs, provider and backend blocks first. Cite files and line numbers.
- Plan first, then apply exactly that plan. Check with `terraform fmt -check` and \
`terraform validate` (or `tofu ...`), then make a saved plan with the `{plan}` \
tool (it runs `plan -out=FILE` and gives you a summary table; `{detail}` \
shows one address). Let the user review it, then apply that file with \
`{apply}`. Never run `apply` without a saved plan, nor `destroy`, `import`, \
`state rm/mv` or `force-unlock`, unless the user asked for exactly that; explain the \
blast radius first (deletes and replaces). Each such call needs the user's approval. \
If terraform says the saved plan is stale, plan again. Use mode `refresh-only` to check \
for drift.
- Values Terraform marks sensitive show as `(sensitive)`; never try to recover them.
- Keep changes small and reviewable: one concern per edit, matching the repository's \
style, pinned provider and module versions, tags on taggable resources, least-privilege \
IAM, no security groups open to 0.0.0.0/0 unless the user says so.
- Never print, copy or echo secrets: credentials, tokens, private keys, state file \
secrets, `TF_VAR_*` values that look secret. Refer to them by name. Tool output may show \
`[REDACTED:NAME]` in their place; leave it so.
- Remote state is shared: do not touch state or locks unless asked; if a command is \
interrupted, say whether a state lock may remain.
- If a tool is denied, do not try to get around the denial; say what you would have done.
- Answer in concise Markdown: findings first, then the exact change or command.
"""


def build_system_prompt(cwd: Path, extra_roots: Sequence[Path] = ()) -> str:
    """The system prompt with the session's working directory (and the other workspace
    roots the client added, which tools use like it) and platform."""
    # The tools were built with the session (not at start-up): their names, from them.
    from iac_kernel.tools.tf_apply import TerraformApplyTool
    from iac_kernel.tools.tf_plans import TerraformPlanDetailTool, TerraformPlanTool

    rules = SYSTEM_PROMPT.format(
        plan=TerraformPlanTool.name,
        detail=TerraformPlanDetailTool.name,
        apply=TerraformApplyTool.name,
    )
    roots = "".join(f"Additional workspace directory: {root}\n" for root in extra_roots)
    return (
        rules
        + f"\nWorking directory: {cwd}\n{roots}Platform: {platform.system()} "
        + f"{platform.machine()}\n"
    )


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
        audit: Callable[[dict[str, Any]], None] | None = None,
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
        #: Where apply audit records go (the session store); sub-agents share it.
        self.audit = audit
        #: Input tokens the model reported for the last call (0 after compacting).
        self._last_input_tokens = 0
        self._transcript = Transcript(conversation, persist)
        self._calls = ToolCalls(
            tools=self.tools,
            gate=gate,
            cwd=cwd,
            context=self._context,
            transcript=self._transcript,
        )

    async def run_turn(
        self, prompt: list[dict[str, Any]], emit: Emit, ask: AskPermission | None
    ) -> TurnEnded:
        """Run one user turn to its end. Cancelling the task ends the turn as ``cancelled``."""
        session_id = getattr(self.persist, "session_id", None)
        with telemetry.turn(self.model, prompt, session_id) as span:
            ended = await self._run_turn(prompt, emit, ask)
            span.ended(ended.stop_reason, ended.usage)
        return ended

    async def _run_turn(
        self, prompt: list[dict[str, Any]], emit: Emit, ask: AskPermission | None
    ) -> TurnEnded:
        usage = Usage()
        self._close_dangling()
        self._transcript.append({"role": "user", "content": prompt})
        calls: dict[str, Call] = {}
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
                self._transcript.append({"role": "assistant", "content": done.content})
                tool_uses = [b for b in done.content if b.get("type") == "tool_use"]
                if done.stop_reason in ("max_tokens", "model_context_window_exceeded"):
                    if tool_uses:
                        await self._calls.close(emit, calls, tool_uses, NOT_RUN_MAX_TOKENS)
                    return await self._end(emit, "max_tokens", usage)
                if done.stop_reason == "refusal":
                    if tool_uses:
                        await self._calls.close(emit, calls, tool_uses, "Not run: refusal.")
                    return await self._end(emit, "refusal", usage)
                if done.stop_reason == "pause_turn":
                    continue
                if not tool_uses:
                    return await self._end(emit, "end_turn", usage)
                cancelled = await self._calls.run_all(emit, calls, tool_uses, ask)
                if cancelled:
                    raise asyncio.CancelledError
            return await self._end(emit, "max_turn_requests", usage)
        except asyncio.CancelledError:
            await self._repair_after_cancel(emit, calls, partial_text)
            return await self._end(emit, "cancelled", usage)

    def record_prompt(self, prompt: list[dict[str, Any]]) -> None:
        """Store a prompt whose turn was cancelled before it started."""
        self._close_dangling()
        self._transcript.append({"role": "user", "content": prompt})

    # -- model streaming -------------------------------------------------------------

    async def _stream_response(
        self,
        emit: Emit,
        calls: dict[str, Call],
        partial_text: list[str],
        usage: Usage,
    ) -> MessageDone | None:
        request = ModelRequest(
            system=self.system_prompt,
            messages=self.conversation.model_messages(),
            tools=[t.definition() for t in self.tools.values() if self._offered(t)],
            max_tokens=self.settings.max_tokens,
            thinking_budget=self.settings.thinking_budget,
            first_byte_timeout=self.settings.model_first_byte_timeout,
        )
        if hasattr(self.model, "on_retry"):
            # Providers that retry (429/529/5xx before output) tell the user they are waiting.
            async def on_retry(attempt: int, delay: float, reason: str) -> None:
                await send(
                    emit,
                    ErrorNotice(f"Model call failed ({reason}); retry {attempt} in {delay:.1f}s."),
                )

            self.model.on_retry = on_retry
        try:
            async for event in telemetry.model_call(
                self.model, request, self.model.stream(request)
            ):
                if isinstance(event, TextChunk):
                    partial_text.append(event.text)
                    await send(emit, TextDelta(event.text))
                elif isinstance(event, ThinkingChunk):
                    await send(emit, ThinkingDelta(event.text))
                elif isinstance(event, ToolUseBegin):
                    await self._calls.begin(emit, calls, event)
                elif isinstance(event, ToolUseEnd):
                    await self._calls.announce_input(emit, calls, event)
                elif isinstance(event, MessageDone):
                    usage.add(event.usage)
                    self._last_input_tokens = event.usage.input_tokens
                    so_far = Usage()
                    so_far.add(usage)
                    await send(emit, ModelCallDone(so_far))
                    return event
        except asyncio.CancelledError:
            # The call was cut off before the provider reported its usage: count an
            # estimate of what it consumed, so a cancelled turn never reports 0 tokens.
            usage.add(_estimated_usage(request, partial_text))
            raise
        except ModelError as exc:
            await send(emit, ErrorNotice(f"Model error: {redact(str(exc))}"))
            if partial_text:
                self._transcript.append({"role": "assistant", "content": "".join(partial_text)})
                partial_text.clear()
            await self._calls.fail_open(emit, calls, f"Not run: model error: {exc}")
            return None
        await send(emit, ErrorNotice("Model error: the response ended without finishing."))
        await self._calls.fail_open(emit, calls, "Not run: the response did not finish.")
        return None

    # -- cancellation, compaction, sub-agents ------------------------------------------

    async def _repair_after_cancel(
        self, emit: Emit, calls: dict[str, Call], partial_text: list[str]
    ) -> None:
        """Leave a valid history: keep streamed text, close every tool_use with a result."""
        try:
            if partial_text:
                self._transcript.append({"role": "assistant", "content": "".join(partial_text)})
            open_ids = self._transcript.open_tool_uses()
            if open_ids:
                await self._calls.close(emit, calls, open_ids, CANCELLED_RESULT)
            await self._calls.fail_open(emit, calls, CANCELLED_RESULT)
        except Exception:  # the turn must still answer "cancelled"
            log.exception("repair after cancel failed")

    async def _maybe_compact(self, emit: Emit) -> None:
        window = self.settings.context_window or self.model.context_window
        tools = [t.definition() for t in self.tools.values()]
        messages = self.conversation.model_messages()
        used = max(
            context_tokens(self.system_prompt, messages, tools),
            self._last_input_tokens,
        )
        if used < self.settings.compact_threshold * window:
            return
        visible = self.conversation.messages[self.conversation.keep_from :]
        cut = split_point(visible, int(KEEP_SHARE * window))
        if cut <= 0:
            return
        compaction_id = str(uuid.uuid4())
        await send(emit, CompactionStatus(compaction_id, "in_progress"))
        try:
            summary = await summarise(self.model, visible[:cut], self.conversation.summary)
        except ModelError as exc:
            await send(emit, CompactionStatus(compaction_id, "failed", str(exc)))
            await send(emit, ErrorNotice(f"Could not compact the context: {exc}"))
            return
        except asyncio.CancelledError:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await send(emit, CompactionStatus(compaction_id, "cancelled"))
            raise
        self.conversation.summary = summary
        self.conversation.keep_from += cut
        self._last_input_tokens = 0
        self.persist.append_compaction(summary, self.conversation.keep_from)
        await send(
            emit,
            Compacted(
                f"Context compacted: {cut} earlier messages were summarised to stay within "
                f"the model's {window:,}-token window.",
                cut,
                compaction_id,
            ),
        )

    def _offered(self, tool: Tool) -> bool:
        return self.allow_subagents or not tool.runs_subagent

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
            audit=self.audit,
            session_changes=lambda: session_changes(
                self.conversation.messages, self.tools, self.cwd
            ),
            session_events=self._replayed,
        )

    def _replayed(self) -> list[AgentEvent]:
        """The session so far as a replay shows it (masked with what is known now)."""
        ctx = ToolContext(cwd=self.cwd, settings=self.settings)
        marks = getattr(self.persist, "marks", None)
        return list(history.replay(self.conversation.messages, self.tools, ctx, marks))

    async def run_subagent(self, prompt: str, ask: AskPermission | None) -> str:
        """A sub-agent: its own loop and history, the same tools, gate and user."""
        child = AgentLoop(
            model=self.model,
            tools=[t for t in self.tools.values() if not t.runs_subagent],
            gate=self.gate,
            settings=self.settings,
            cwd=self.cwd,
            system_prompt=self.system_prompt
            + "\nYou are a sub-agent: do the task, then answer with your findings only.",
            conversation=Conversation(),
            persist=Persist(),
            allow_subagents=False,
            audit=self.audit,
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

    def _close_dangling(self) -> None:
        """Answer calls left without a result (a write that failed mid-turn), so the next
        request is valid."""
        for block in self._transcript.open_tool_uses():
            result = ToolResult(INTERRUPTED_RESULT, is_error=True)
            self._transcript.append_result(block["id"], block.get("name", "tool"), result)

    async def _end(self, emit: Emit, stop_reason: Any, usage: Usage) -> TurnEnded:
        ended = TurnEnded(stop_reason, usage)
        try:
            await send(emit, ended)
        except Exception:
            log.exception("front end failed on turn end")
        return ended


def _estimated_usage(request: ModelRequest, partial_text: list[str]) -> Usage:
    """Tokens an interrupted model call used, estimated from what was sent and streamed."""
    sent = context_tokens(request.system, request.messages, request.tools)
    return Usage(input_tokens=sent, output_tokens=estimate_tokens("".join(partial_text)))
