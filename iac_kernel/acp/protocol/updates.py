"""Agent events -> ACP ``session/update`` payloads.

Live turns and ``session/load`` replays use the same mapping: text and thinking become
message and thought chunks; a tool call becomes ``tool_call`` (in progress, titled by
the tool, e.g. ``bash: terraform plan``) followed by ``tool_call_update``s carrying the
input (``rawInput``, file ``locations``, a ``diff`` block for edits) and the final status
with ``rawOutput``. Compaction notices and errors are shown as message text. Locations
are the tool's (``Tool.locations``: the first line read, an edit's first changed line;
``Tool.result_locations``: grep's matches): editors follow the agent with them.

The model's ``update_plan`` checklist is a ``plan`` update carrying the whole plan (the
client replaces what it shows), sent when the call completes, from the input the model
gave it, live and on replay; a failed or refused call changes nothing.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from acp import update_agent_message_text, update_agent_thought_text, update_user_message_text
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    PlanEntry,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from iac_kernel.events import (
    AgentEvent,
    Compacted,
    Diff,
    ErrorNotice,
    Location,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallOutput,
    ToolCallResult,
    ToolCallStarted,
    UserMessage,
)

Update = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
)

ACP_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode"}
)
_CHUNK_KINDS: dict[type, str] = {
    TextDelta: "agent_message_chunk",
    ThinkingDelta: "agent_thought_chunk",
}
UNFINISHED = "The tool call did not finish."
INTERRUPTED = "Interrupted: the session stopped before this tool call finished."


def chunk_kind(event: AgentEvent) -> str | None:
    """``agent_message_chunk`` or ``agent_thought_chunk`` for a delta; else ``None``."""
    return _CHUNK_KINDS.get(type(event))


def chunk_update(kind: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    """A message or thought chunk update, in its wire form (``messageId``: schema 1.25),
    as ``serialize_params`` puts :func:`to_update`'s model (a test compares them)."""
    update = {"content": {"text": text, "type": "text"}, "sessionUpdate": kind}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def new_message_id() -> str:
    """A ``messageId`` for the chunks of one live message (schema 1.25: a UUID)."""
    return str(uuid.uuid4())


def stored_message_id(session_id: str, index: int) -> str:
    """The ``messageId`` of the ``index``-th message of a stored session's replay: the
    same on every load, so a client can tell a replayed message it already shows.

    ``uuid.uuid5(NAMESPACE_URL, f"iac-kernel:{session_id}:{index}")``, its hash started
    once per session (a long replay names tens of thousands of messages)."""
    digest = _message_id_hash(session_id).copy()
    digest.update(str(index).encode())
    return str(uuid.UUID(bytes=digest.digest()[:16], version=5))  # as uuid5 builds it


@functools.lru_cache(maxsize=64)
def _message_id_hash(session_id: str) -> Any:
    prefix = uuid.NAMESPACE_URL.bytes + f"iac-kernel:{session_id}:".encode()
    return hashlib.sha1(prefix, usedforsecurity=False)


def extra_fields(event: AgentEvent, message_id: str | None) -> dict[str, Any] | None:
    """Fields of schema 1.25 the SDK's models lack, for :meth:`ClientChannel.update`:
    the ``messageId`` of chunks, the ``name`` (the tool's) of a tool call."""
    if isinstance(event, TextDelta | ThinkingDelta | UserMessage) and message_id is not None:
        return {"messageId": message_id}
    if isinstance(event, Compacted | ErrorNotice):  # a notice is a message of its own
        return {"messageId": new_message_id()}
    if isinstance(event, ToolCallStarted):
        return {"name": event.name}
    return None


def acp_kind(kind: str) -> str:
    return kind if kind in ACP_KINDS else "other"


def to_update(event: AgentEvent) -> Update | None:
    """The update for one event (``None`` for events the client does not see)."""
    if isinstance(event, TextDelta):
        return update_agent_message_text(event.text)
    if isinstance(event, ThinkingDelta):
        return update_agent_thought_text(event.text)
    if isinstance(event, ToolCallStarted):
        return ToolCallStart(
            session_update="tool_call",
            tool_call_id=event.call_id,
            title=event.title or event.name,
            kind=acp_kind(event.kind),
            status="in_progress",
        )
    if isinstance(event, ToolCallInput):
        return ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=event.call_id,
            title=event.title or event.name,
            kind=acp_kind(event.kind),
            status="in_progress",
            raw_input=event.input,
            locations=tool_locations(event.locations),
            content=[diff_content(event.diff)] if event.diff else None,
        )
    if isinstance(event, ToolCallOutput):
        # Live output of a running call: the content so far (its tail), still in progress.
        return ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=event.call_id,
            status="in_progress",
            content=[text_content(event.tail or event.text)],
        )
    if isinstance(event, ToolCallResult):
        return result_update(event)
    if isinstance(event, UserMessage):
        return update_user_message_text(event.text)
    if isinstance(event, Compacted):
        return update_agent_message_text(f"\n\n_{event.notice}_\n\n")
    if isinstance(event, ErrorNotice):
        return update_agent_message_text(f"\n\n**{event.message}**\n\n")
    return None


def result_update(event: ToolCallResult) -> ToolCallProgress:
    """A finished call: its text (and diff) as content; ``rawOutput`` only when the tool
    gave structured output (the text is not sent twice: a replay carries every result)."""
    content: list[Any] = []
    if event.output:
        content.append(text_content(event.output))
    if event.diff is not None:
        content.append(diff_content(event.diff))
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=event.call_id,
        status=event.status,
        raw_output=event.raw_output,
        content=content or None,
        locations=tool_locations(event.locations),
        field_meta=_plan_meta(event.raw_output),
    )


def _plan_meta(raw_output: Any) -> dict[str, Any] | None:
    """A Terraform plan (terraform_plan, bash ``plan -out``) as structured data in ``_meta``;
    the summary table is the call's text content."""
    if isinstance(raw_output, dict) and isinstance(raw_output.get("plan"), dict):
        return {"iac_kernel": {"plan": raw_output["plan"]}}
    return None


def failed_update(call_id: str, message: str) -> ToolCallProgress:
    """A final update for a call that ended without a result event."""
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=call_id,
        status="failed",
        content=[text_content(message)],
    )


def diff_content(diff: Diff) -> FileEditToolCallContent:
    return FileEditToolCallContent(
        type="diff", path=diff.path, old_text=diff.old_text, new_text=diff.new_text
    )


def text_content(text: str) -> ContentToolCallContent:
    return ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=text))


class ToolCallTracker:
    """Remembers which tool calls were started and not finished, so each gets a final
    ``tool_call_update`` even when the turn ends in an unexpected way."""

    def __init__(self) -> None:
        self.open: dict[str, None] = {}

    def see(self, event: AgentEvent) -> None:
        if isinstance(event, ToolCallStarted | ToolCallInput):
            self.open.setdefault(event.call_id)
        elif isinstance(event, ToolCallResult):
            self.open.pop(event.call_id, None)

    def closing_updates(self, message: str = UNFINISHED) -> list[ToolCallProgress]:
        updates = [failed_update(call_id, message) for call_id in self.open]
        self.open.clear()
        return updates


@dataclass
class Numbering:
    """Where the numbering of stored messages stands: the last index given (-1 before
    the first) and whether an answer is open (its next text is the same message)."""

    index: int = -1
    in_answer: bool = False

    def number(self, event: AgentEvent) -> int:
        """The index of the message ``event`` belongs to."""
        if isinstance(event, UserMessage) or (
            isinstance(event, TextDelta | ThinkingDelta) and not self.in_answer
        ):
            self.index += 1
        self.in_answer = not isinstance(event, UserMessage | ToolCallResult)
        return self.index


def numbered(
    events: Iterable[AgentEvent], numbering: Numbering | None = None
) -> Iterator[tuple[AgentEvent, int]]:
    """Each stored event with the index of the message it belongs to (-1 before the
    first): a prompt is one user message; an answer's text and thinking form one agent
    message until a prompt or a tool result follows. ``numbering``: where it starts (and
    is left)."""
    numbering = numbering or Numbering()
    for event in events:
        yield event, numbering.number(event)


def replay_updates(
    events: Iterable[AgentEvent], session_id: str = ""
) -> Iterator[tuple[Update, dict[str, Any] | None]]:
    """The updates that show a stored history (user prompts, answers, thoughts, tool
    calls ending in their final status, the model's plans), each with its
    :func:`extra_fields`.

    Messages are told apart as they were stored: a prompt is one user message; an answer's
    text and thinking form one agent message until a prompt or a tool result follows."""
    tracker = ToolCallTracker()
    plans = PlanTracker()
    for event, index in numbered(events):
        tracker.see(event)
        update = to_update(event)
        if update is not None:
            message_id = stored_message_id(session_id, index) if index >= 0 else None
            yield update, extra_fields(event, message_id)
        plan = plans.see(event)
        if plan is not None:
            yield plan, None
    for update in tracker.closing_updates(INTERRUPTED):
        yield update, None


class PlanTracker:
    """The ``plan`` updates of a turn's (or a replay's) calls: the checklist a completed
    call set (``Tool.checklist``: update_plan's steps) is the whole plan."""

    def see(self, event: AgentEvent) -> AgentPlanUpdate | None:
        """The plan update an event completes, if any."""
        if not isinstance(event, ToolCallResult) or not event.checklist:
            return None
        entries = [
            PlanEntry(content=s["step"], status=s["status"], priority=s["priority"])
            for s in event.checklist
        ]
        return AgentPlanUpdate(session_update="plan", entries=entries)


def tool_locations(found: list[Location]) -> list[ToolCallLocation] | None:
    """The locations of a call's input or result, as the tool gave them."""
    return [ToolCallLocation(path=loc.path, line=loc.line) for loc in found] or None
