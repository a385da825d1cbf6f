"""``notice`` and ``compaction_update`` (schema 1.25): only for a client that declared
``session.notices`` / ``session.compaction``; others get the message text as before."""

from __future__ import annotations

import json

from iac_kernel.acp.protocol.client_features import ClientFeatures
from iac_kernel.acp.protocol.notices import notice_update
from iac_kernel.acp.session.turn import TurnRelay
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


async def test_a_real_compaction_goes_in_progress_then_completed(tmp_path, workspace):
    filler = "terraform " * 300
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "name": "long",
                "exchanges": [{"match": "prompt", "turns": [{"text": filler}]}],
            }
        )
    )
    env = server_env(script=script, IAC_KERNEL_CONTEXT_WINDOW="4000")
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        capabilities = {"session": {"compaction": {}}}
        await server.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        made = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = made["result"]["sessionId"]
        for i in range(4):
            prompt = [{"type": "text", "text": f"prompt {i}"}]
            answer = await server.call("session/prompt", {"sessionId": sid, "prompt": prompt})
            assert answer["result"]["stopReason"] == "end_turn"
    messages = [json.loads(line) for line in server.lines]
    notes = [m["params"] for m in messages if m.get("method") == "session/update"]
    compactions = [
        n["update"] for n in notes if n["update"]["sessionUpdate"] == "compaction_update"
    ]
    assert compactions, "expected a compaction"
    started, finished = compactions[0], compactions[1]
    assert started["status"] == "in_progress" and finished["status"] == "completed"
    assert started["compactionId"] == finished["compactionId"]
    assert "summarised" in finished["summary"][0]["text"]
    assert len({c["compactionId"] for c in compactions}) * 2 == len(compactions)
    others = [n for n in notes if n["update"]["sessionUpdate"] != "compaction_update"]
    assert not any("Context compacted" in json.dumps(n) for n in others)
    items = [("zSessionNotification", n) for n in notes]
    assert schema_failures(items) == []


async def test_a_failed_compaction_says_so_under_its_id():
    from iac_kernel.events import CompactionStatus

    channel = RecordingChannel()
    channel.features = ClientFeatures({"session": {"compaction": {}}})
    relay = TurnRelay(channel, "s1")
    await relay(CompactionStatus("k1", "in_progress"))
    await relay(CompactionStatus("k1", "failed", "overloaded"))
    await relay.finish()
    await _settle()
    assert [(u["status"], u.get("error")) for u in channel.sent] == [
        ("in_progress", None),
        ("failed", "overloaded"),
    ]
    items = [("zSessionNotification", {"sessionId": "s1", "update": u}) for u in channel.sent]
    assert schema_failures(items) == []
    channel = RecordingChannel()  # other clients: nothing until the finished compaction
    relay = TurnRelay(channel, "s1")
    await relay(CompactionStatus("k1", "in_progress"))
    await relay.finish()
    await _settle()
    assert channel.sent == []
