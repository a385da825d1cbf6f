"""``session/load``'s history replay: the stored events as ``session/update`` params,
built as plain JSON, sent straight onto the client's transport.

:func:`replay_params` gives, for a stored history's events, exactly what
:func:`~iac_kernel.acp.protocol.updates.replay_updates` gives once each update is serialized
(``serialize_params`` of its ``SessionNotification``, plus its extra fields; a test
compares them), without building and dumping an SDK model per update: a long session
replays tens of thousands of updates. Rare updates (plans, calls left unfinished,
notices) still go through the models. Stored results are masked again only with the
values learned since they were written (:mod:`iac_kernel.masking.marks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from acp.schema import SessionNotification
from acp.utils import serialize_params

from iac_kernel.acp.protocol.updates import (
    INTERRUPTED,
    PlanTracker,
    ToolCallTracker,
    acp_kind,
    chunk_update,
    extra_fields,
    numbered,
    stored_message_id,
    to_update,
)
from iac_kernel.acp.wire.channel import ClientChannel
from iac_kernel.agent.session import AgentSession
from iac_kernel.events import (
    AgentEvent,
    Diff,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    UserMessage,
)
from iac_kernel.sessions.store import collector_paused


async def send_history(channel: ClientChannel, session: AgentSession) -> None:
    """Replay ``session``'s stored history to ``channel``'s client (``session/load``)."""
    with collector_paused():
        await channel.forward_updates(replay_params(session.replay(), session.session_id))


def replay_params(events: Iterable[AgentEvent], session_id: str) -> Iterator[dict[str, Any]]:
    """The params of each ``session/update`` that shows a stored history, in order.

    A tool call whose result follows its input (the usual case) is one ``tool_call`` in
    its final state: what the client holds after the ``tool_call`` and the
    ``tool_call_update``s of :func:`~iac_kernel.acp.protocol.updates.replay_updates` (a later
    update's fields replace an earlier one's). A call is sent as it stands, in progress,
    before anything else comes between it and its result."""
    tracker = ToolCallTracker()
    plans = PlanTracker()
    held: dict[str, dict[str, Any]] = {}  # calls not sent yet, in order
    ids: tuple[int, str | None] = (-1, None)
    for event, index in numbered(events):
        tracker.see(event)
        call_id = getattr(event, "call_id", None)
        if isinstance(event, ToolCallStarted) and call_id not in held:
            held[call_id] = wire_update(event, None)  # type: ignore[assignment,index]
        elif isinstance(event, ToolCallInput) and call_id in held:
            held[call_id].update(_input_update(event))
            held[call_id]["sessionUpdate"] = "tool_call"
        elif isinstance(event, ToolCallResult) and call_id in held:
            while held:  # calls started before this one go first, as they stand
                first, call = next(iter(held.items()))
                del held[first]
                if first == call_id:
                    call.update(_result_update(event))
                    call["sessionUpdate"] = "tool_call"
                    yield {"sessionId": session_id, "update": call}
                    break
                yield {"sessionId": session_id, "update": call}
        else:
            yield from _flush(held, session_id)
            if index >= 0 and ids[0] != index:  # one id per message, not per chunk
                ids = (index, stored_message_id(session_id, index))
            message_id = ids[1] if index >= 0 else None
            update = wire_update(event, message_id)
            if update is not None:
                yield {"sessionId": session_id, "update": update}
        plan = plans.see(event)
        if plan is not None:
            yield serialize_params(SessionNotification(session_id=session_id, update=plan))
    yield from _flush(held, session_id)
    for closing in tracker.closing_updates(INTERRUPTED):
        yield serialize_params(SessionNotification(session_id=session_id, update=closing))


def _flush(held: dict[str, dict[str, Any]], session_id: str) -> Iterator[dict[str, Any]]:
    for call in held.values():
        yield {"sessionId": session_id, "update": call}
    held.clear()


def wire_update(event: AgentEvent, message_id: str | None) -> dict[str, Any] | None:
    """The update for one replayed event in its wire form (``None``: none is shown), as
    :func:`~iac_kernel.acp.protocol.updates.replay_updates` sends it."""
    kind = _CHUNKS.get(type(event))
    if kind is not None:
        return chunk_update(kind, event.text, message_id)  # type: ignore[attr-defined]
    if isinstance(event, ToolCallStarted):
        return {
            "sessionUpdate": "tool_call",
            "toolCallId": event.call_id,
            "title": event.title or event.name,
            "kind": acp_kind(event.kind),
            "status": "in_progress",
            "name": event.name,
        }
    if isinstance(event, ToolCallInput):
        return _input_update(event)
    if isinstance(event, ToolCallResult):
        return _result_update(event)
    update = to_update(event)  # anything else: through the SDK's models
    if update is None:
        return None
    wire = serialize_params(SessionNotification(session_id="", update=update))["update"]
    return {**wire, **(extra_fields(event, message_id) or {})}


_CHUNKS: dict[type, str] = {
    TextDelta: "agent_message_chunk",
    ThinkingDelta: "agent_thought_chunk",
    UserMessage: "user_message_chunk",
}


def _input_update(event: ToolCallInput) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": event.call_id,
        "title": event.title or event.name,
        "kind": acp_kind(event.kind),
        "status": "in_progress",
        "rawInput": event.input,
    }
    if event.locations:
        update["locations"] = [
            {"path": loc.path} if loc.line is None else {"path": loc.path, "line": loc.line}
            for loc in event.locations
        ]
    if event.diff is not None:
        update["content"] = [_diff(event.diff)]
    return update


def _result_update(event: ToolCallResult) -> dict[str, Any]:
    if event.raw_output is not None:  # a live call's structured output: the models' way
        update = to_update(event)
        return serialize_params(SessionNotification(session_id="", update=update))["update"]  # type: ignore[arg-type]
    content: list[dict[str, Any]] = []
    if event.output:
        content.append({"type": "content", "content": {"type": "text", "text": event.output}})
    if event.diff is not None:
        content.append(_diff(event.diff))
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": event.call_id,
        "status": event.status,
    }
    if content:
        update["content"] = content
    return update


def _diff(diff: Diff) -> dict[str, Any]:
    block = {"type": "diff", "path": diff.path, "newText": diff.new_text}
    if diff.old_text is not None:
        block["oldText"] = diff.old_text
    return block
