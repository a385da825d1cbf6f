"""session/cancel at each point of a turn, a second prompt on a busy session, and close
of a running session. Every started tool call must get a final update."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from acp import RequestError, text_block

from iac_kernel.sessions.store import SessionStore
from store_support import dangling_tool_uses
from test_acp_support import RawServer, RecordingClient, acp_server, server_env, wait_until


def history(session_id: str) -> list[dict]:
    return SessionStore(os.environ["IAC_KERNEL_SESSIONS_DIR"]).read(session_id).messages


def assert_history_valid(session_id: str) -> None:
    messages = history(session_id)
    assert not dangling_tool_uses(messages)
    open_ids = set()
    for message in messages:
        content = message["content"] if isinstance(message["content"], list) else []
        for block in content:
            if block.get("type") == "tool_use":
                open_ids.add(block["id"])
            if block.get("type") == "tool_result":
                open_ids.discard(block["tool_use_id"])
    assert not open_ids


def all_calls_closed(client: RecordingClient, sid: str) -> None:
    for call_id in client.tool_ids(sid):
        assert client.final_status(sid, call_id) in ("completed", "failed"), call_id


async def test_cancel_right_after_the_prompt(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        turn = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=[text_block("stream slowly")])
        )
        await asyncio.sleep(0)  # the prompt request is on the wire first
        await conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(turn, 20)
        assert answer.stop_reason == "cancelled"
        # The session is usable afterwards.
        again = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert again.stop_reason == "end_turn"
    assert_history_valid(sid)


async def test_cancel_mid_stream(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        turn = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=[text_block("stream slowly")])
        )
        await wait_until(lambda: len(client.of(sid, "agent_message_chunk")) >= 3, "chunks")
        await conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(turn, 20)
        assert answer.stop_reason == "cancelled"
        streamed = client.text(sid)
        assert streamed.startswith("one two three") and "forty" not in streamed
        client.clear()
        again = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert again.stop_reason == "end_turn"
    # The partial answer was kept in the history.
    assert any(m["role"] == "assistant" and m["content"] == streamed for m in history(sid))
    assert_history_valid(sid)


async def test_cancel_mid_tool_stops_the_command(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("sleep")]))
        await wait_until(lambda: client.permissions, "the permission request")
        (call_id,) = client.tool_ids(sid)
        await asyncio.sleep(0.3)  # let `sleep 30` start
        await conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(turn, 20)
        assert answer.stop_reason == "cancelled"
        final = client.tool_updates(sid, call_id)[-1]
        assert final.status == "failed"
        assert "Slept." not in client.text(sid)
    assert_history_valid(sid)


@pytest.mark.parametrize("client_answers", [True, False], ids=["client-answers", "client-silent"])
async def test_cancel_while_permission_is_open(tmp_path, workspace, client_answers):
    client = RecordingClient()
    client.answers.append("hold")
    async with acp_server(tmp_path, client) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        turn = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=[text_block("write the file")])
        )
        await wait_until(lambda: client.held is not None, "the permission request")
        (call_id,) = client.tool_ids(sid)
        assert client.permissions[0]["tool_call"].tool_call_id == call_id
        await conn.cancel(session_id=sid)
        if client_answers:
            # What the spec asks of a client after session/cancel.
            client.release("cancelled")
        answer = await asyncio.wait_for(turn, 20)
        assert answer.stop_reason == "cancelled"
        assert client.final_status(sid, call_id) == "failed"
        if not client_answers:
            client.release("allow_once")  # a late approval changes nothing
            again = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
            assert again.stop_reason == "end_turn"
    assert not (workspace / "out.txt").exists()
    assert_history_valid(sid)


async def test_second_prompt_on_a_busy_session_is_refused(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        turn = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=[text_block("stream slowly")])
        )
        await wait_until(lambda: client.of(sid, "agent_message_chunk"), "the first chunk")
        with pytest.raises(RequestError) as busy:
            await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert busy.value.code == -32602
        assert "busy" in busy.value.data["session_id"]
        answer = await asyncio.wait_for(turn, 30)
        assert answer.stop_reason == "end_turn"
        assert client.text(sid).endswith("forty")
    prompts = [m for m in history(sid) if m["role"] == "user"]
    assert len(prompts) == 1  # the refused prompt never reached the history


async def test_close_a_running_session_cancels_it(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        turn = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=[text_block("stream slowly")])
        )
        await wait_until(lambda: client.of(sid, "agent_message_chunk"), "the first chunk")
        assert await conn.close_session(session_id=sid) is not None
        answer = await asyncio.wait_for(turn, 20)
        assert answer.stop_reason == "cancelled"
        with pytest.raises(RequestError) as gone:
            await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert gone.value.data == {"session_id": "Session not found"}
        with pytest.raises(RequestError) as again:
            await conn.close_session(session_id=sid)
        assert again.value.data == {"session_id": "Session not found"}
    assert_history_valid(sid)


async def test_sigterm_ends_the_turn_cancelled_and_releases_the_session(tmp_path, workspace):
    async with RawServer.start(server_env(), tmp_path / "stderr.log") as server:
        await server.initialize()
        new = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = new["result"]["sessionId"]
        prompt = [{"type": "text", "text": "stream slowly"}]
        await server.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": prompt},
            }
        )
        first = await server.read()
        if first["params"]["update"]["sessionUpdate"] == "available_commands_update":
            first = await server.read()  # sent after session/new's answer
        assert first["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        server.process.send_signal(signal.SIGTERM)
        answer = await server.answer(1)
        assert answer["result"]["stopReason"] == "cancelled"
        assert await asyncio.wait_for(server.process.wait(), 20) == 0
    store = SessionStore(os.environ["IAC_KERNEL_SESSIONS_DIR"])
    assert store.lock_holder(sid) is None
    assert_history_valid(sid)
