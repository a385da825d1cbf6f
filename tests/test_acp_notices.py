"""``notice`` and ``compaction_update`` (schema 1.25): only for a client that declared
``session.notices`` / ``session.compaction``; others get the message text as before."""

from __future__ import annotations

import json

from iac_kernel.acp.client_features import ClientFeatures
from iac_kernel.acp.notices import notice_update
from iac_kernel.acp.turn import TurnRelay
from iac_kernel.events import Compacted, ErrorNotice
from node_schema import schema_failures
from test_acp_schema125 import RecordingChannel, _settle
from test_acp_support import RawServer, server_env

BOTH = {"session": {"notices": {}, "compaction": {}}}


async def _relayed(capabilities: dict) -> list[dict]:
    channel = RecordingChannel()
    channel.features = ClientFeatures(capabilities)
    relay = TurnRelay(channel, "s1")
    await relay(ErrorNotice("Model call failed (overloaded); retry 1 in 2.0s."))
    await relay(Compacted("Compacted 12 older messages.", 12))
    await relay.finish()
    await _settle()
    return channel.sent


async def test_a_declaring_client_gets_a_notice_and_a_compaction_update():
    sent = await _relayed(BOTH)
    assert [u["sessionUpdate"] for u in sent] == ["notice", "compaction_update"]
    assert sent[0]["severity"] == "warning" and sent[0]["title"].startswith("Model call failed")
    assert sent[1]["status"] == "completed" and sent[1]["compactionId"]
    items = [("zSessionNotification", {"sessionId": "s1", "update": u}) for u in sent]
    assert schema_failures(items) == []


async def test_other_clients_get_message_text_as_before():
    for capabilities in ({}, {"session": {"notices": True, "compaction": None}}):
        sent = await _relayed(capabilities)
        assert [u["sessionUpdate"] for u in sent] == ["agent_message_chunk"] * 2
        assert "retry 1" in sent[0]["content"]["text"] and sent[0]["messageId"]


def test_a_long_notice_keeps_its_text_in_the_description():
    text = "Model error: " + "x" * 300 + "\nsecond line"
    update = notice_update(text)
    assert update["severity"] == "error" and len(update["title"]) <= 120
    assert update["description"] == text
    bad = {"sessionId": "s1", "update": {**update, "title": ""}}
    assert schema_failures([("zSessionNotification", bad)]) != []  # the check can fail


async def test_a_model_error_reaches_a_declaring_client_as_a_notice(tmp_path, workspace):
    env = server_env(script=tmp_path / "missing-script.json")
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.call("initialize", {"protocolVersion": 1, "clientCapabilities": BOTH})
        made = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = made["result"]["sessionId"]
        answer = await server.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
        )
        assert answer["result"]["stopReason"] == "end_turn"
        messages = [json.loads(line) for line in server.lines]
        updates = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
        notices = [u for u in updates if u["sessionUpdate"] == "notice"]
        assert notices and notices[0]["severity"] == "error", updates
        assert not any(u["sessionUpdate"] == "agent_message_chunk" for u in updates)
