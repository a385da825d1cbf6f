"""Fields of ACP schema 1.25 that the Python SDK's models (1.19) lack, sent as raw JSON:
``messageId`` on message chunks (live and replayed), a tool call's ``name``. The
TypeScript SDK client (tests/node/acp_client.mjs) validates them on the wire."""

from __future__ import annotations

import asyncio
import uuid

from iac_kernel.acp.protocol.updates import replay_updates
from iac_kernel.acp.session.turn import TurnRelay
from iac_kernel.events import (
    ModelCallDone,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    Usage,
    UserMessage,
)
from test_acp_support import RecordingChannel


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_chunks_of_one_model_call_share_a_message_id_and_the_next_call_gets_a_new_one():
    channel = RecordingChannel()
    relay = TurnRelay(channel, "s1")
    await relay(ThinkingDelta("Check."))
    await relay(TextDelta("Running plan."))
    await relay(ToolCallStarted("c1", "bash", "bash: terraform plan", "execute"))
    await relay(ModelCallDone(Usage()))
    await relay(ToolCallResult("c1", "bash", "completed", "ok"))
    await relay(TextDelta("Done."))
    await relay.finish()
    await _settle()
    chunks = [u for u in channel.sent if u["sessionUpdate"].endswith("_chunk")]
    ids = [u["messageId"] for u in chunks]
    assert len(ids) == 3 and ids[0] == ids[1] != ids[2]
    assert all(uuid.UUID(i) for i in ids)
    started = next(u for u in channel.sent if u["sessionUpdate"] == "tool_call")
    assert started["name"] == "bash" and started["title"] == "bash: terraform plan"
    # Other updates carry neither field.
    others = [u for u in channel.sent if u["sessionUpdate"] == "tool_call_update"]
    assert others and not any("messageId" in u or "name" in u for u in others)


def _history():
    return [
        UserMessage("plan it"),
        ThinkingDelta("Look first."),
        TextDelta("Reading."),
        ToolCallStarted("c1", "read_file", "read_file: main.tf", "read"),
        ToolCallInput("c1", "read_file", "read_file: main.tf", "read", {"path": "main.tf"}, []),
        ToolCallResult("c1", "read_file", "completed", "resource ..."),
        TextDelta("It adds one bucket."),
        UserMessage("thanks"),
        TextDelta("You're welcome."),
    ]


def test_replayed_messages_get_ids_by_message_stable_across_loads():
    first = list(replay_updates(_history(), "sess-1"))
    again = list(replay_updates(_history(), "sess-1"))
    other = list(replay_updates(_history(), "sess-2"))
    ids = [(u.session_update, (x or {}).get("messageId")) for u, x in first]
    chunk_ids = [i for kind, i in ids if kind.endswith("_chunk")]
    # prompt | thought + text (one answer) | text after the tool result | prompt | text
    assert len(chunk_ids) == 6
    assert len(set(chunk_ids)) == 5 and chunk_ids[1] == chunk_ids[2]
    assert [x for _, x in first] == [x for _, x in again]
    assert {(x or {}).get("messageId") for _, x in other}.isdisjoint(set(chunk_ids))
    named = [x for u, x in first if u.session_update == "tool_call"]
    assert named == [{"name": "read_file"}]
