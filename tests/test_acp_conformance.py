"""What the ACP conformance kit and the reference's own requests check: no update after
a prompt or load answer (cancelled turns too), requests without ``mcpServers``, usage of
cancelled turns, model validation, slash commands, ``session/delete``, line numbers in
tool call locations."""

from __future__ import annotations

import os

import pytest
from acp import RequestError, text_block
from acp.meta import AGENT_METHODS
from acp.schema import DeleteSessionRequest, DeleteSessionResponse

from iac_kernel.sessions.store import SessionStore
from mcp_support import broken_entry
from test_acp_support import SCRIPTS, RawServer, RecordingClient, acp_server, server_env

MCP_SCRIPT = SCRIPTS / "acp_mcp.json"
NOT_FOUND = {"session_id": "Session not found"}


def store() -> SessionStore:
    return SessionStore(os.environ["IAC_KERNEL_SESSIONS_DIR"])


async def _until_answer(server: RawServer, request_id: int) -> list[dict]:
    """Every message up to and including the answer to ``request_id``."""
    seen = []
    while True:
        message = await server.read()
        seen.append(message)
        if "method" not in message and message.get("id") == request_id:
            return seen


async def _nothing_pending(server: RawServer, session_id: str) -> None:
    """A request answered after everything already sent: no update of ``session_id``
    may come before its answer."""
    await server.send({"jsonrpc": "2.0", "id": 9000, "method": "session/list", "params": {}})
    late = [
        m
        for m in await _until_answer(server, 9000)
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
    ]
    assert late == [], [m["params"]["update"]["sessionUpdate"] for m in late]


async def _request(server: RawServer, request_id: int, method: str, params: dict) -> list[dict]:
    await server.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    return await _until_answer(server, request_id)


def _kinds(messages: list[dict]) -> list[str]:
    return [m["params"]["update"]["sessionUpdate"] for m in messages if "params" in m]


async def test_reference_requests_and_no_update_after_an_answer(tmp_path, workspace):
    cwd = str(workspace)
    async with RawServer.start(server_env(), tmp_path / "a.log") as server:
        await server.initialize()
        # The reference's tables: session/new with only cwd, load with cwd + sessionId.
        new = (await _request(server, 1, "session/new", {"cwd": cwd}))[-1]
        sid = new["result"]["sessionId"]
        missing = await _request(server, 2, "session/load", {"cwd": cwd, "sessionId": "nope"})
        assert missing[-1]["error"]["code"] == -32602
        assert missing[-1]["error"]["data"] == NOT_FOUND
        # The commands follow session/new's answer (the client knows the id by then).
        assert _kinds(missing[:-1]) == ["available_commands_update"]

        turn = await _request(
            server,
            3,
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]},
        )
        assert turn[-1]["result"]["stopReason"] == "end_turn"
        kinds = _kinds(turn[:-1])
        assert kinds[-2:] == ["session_info_update", "usage_update"]
        await _nothing_pending(server, sid)

        # A cancelled turn: its updates (usage included) come before its answer too,
        # and its usage counts the model call it cut short.
        await server.send(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "stream slowly"}]},
            }
        )
        first = await server.read()
        assert first["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        await server.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        )
        cancelled = await _until_answer(server, 4)
        result = cancelled[-1]["result"]
        assert result["stopReason"] == "cancelled"
        assert result["usage"]["inputTokens"] > 0 and result["usage"]["totalTokens"] > 0
        assert _kinds(cancelled[:-1])[-1] == "usage_update"
        await _nothing_pending(server, sid)
        resumed = await _request(server, 5, "session/resume", {"cwd": cwd, "sessionId": sid})
        assert "result" in resumed[-1]

    async with RawServer.start(server_env(), tmp_path / "b.log") as server:
        await server.initialize()
        load = await _request(server, 1, "session/load", {"cwd": cwd, "sessionId": sid})
        assert "modes" in load[-1]["result"]
        kinds = _kinds(load[:-1])
        assert kinds[0] == "user_message_chunk"
        assert kinds[-2:] == ["session_info_update", "available_commands_update"]
        await _nothing_pending(server, sid)


async def test_slash_commands(tmp_path, workspace):
    client = RecordingClient()
    async with acp_server(tmp_path, client, server_env(MCP_SCRIPT)) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        (commands,) = client.of(sid, "available_commands_update")
        names = [c.name for c in commands.available_commands]
        assert names == ["session", "mode", "model", "permissions", "compact", "mcp"]

        async def run(line: str) -> str:
            client.clear()
            answer = await conn.prompt(session_id=sid, prompt=[text_block(line)])
            assert answer.stop_reason == "end_turn" and answer.usage.total_tokens == 0
            return client.text(sid)

        assert sid in await run("/session")
        assert "Mode set to `read_only`" in await run("/mode read_only")
        assert client.of(sid, "current_mode_update")[-1].current_mode_id == "read_only"
        with pytest.raises(RequestError) as bad:
            await conn.prompt(session_id=sid, prompt=[text_block("/mode sideways")])
        assert bad.value.code == -32602
        assert "no remembered answers" in await run("/permissions")
        with pytest.raises(RequestError) as bad:
            await conn.prompt(session_id=sid, prompt=[text_block("/model claude-nope")])
        assert "choose one of" in str(bad.value.data)
        assert "Model set to `scripted" in await run(f"/model scripted:{MCP_SCRIPT}")
        assert "Compacted: " in await run("/compact")
        assert "No MCP servers" in await run("/mcp")
        line = " ".join(["/mcp add", "bad", *[broken_entry()["command"], *broken_entry()["args"]]])
        assert "failed" in await run(line) and "DEMO_URL" in client.text(sid)
        assert "`bad` (stdio" in await run("/mcp list")
        assert "Stopped MCP server `bad`" in await run("/mcp remove bad")
        # Not a command: an ordinary prompt that happens to start with a slash.
        client.clear()
        await conn.prompt(session_id=sid, prompt=[text_block("/etc/hosts: what is in it?")])
        assert client.text(sid) == "No scripted answer."
    history = store().read(sid).messages
    assert not any("/mode" in str(m["content"]) for m in history)


async def delete(conn, session_id: str) -> DeleteSessionResponse:
    """``session/delete`` (stable in the spec; the Python SDK 0.12.1 client lacks it)."""
    params = DeleteSessionRequest(session_id=session_id).model_dump(by_alias=True)
    raw = await conn._conn.send_request(AGENT_METHODS["session_delete"], params)
    return DeleteSessionResponse.model_validate(raw or {})


async def test_session_delete(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        live = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=live, prompt=[text_block("hello")])
        assert await delete(conn, live) is not None
        assert not store().exists(live)
        with pytest.raises(RequestError) as gone:
            await conn.prompt(session_id=live, prompt=[text_block("hello")])
        assert gone.value.data == NOT_FOUND
        with pytest.raises(RequestError) as gone:
            await delete(conn, live)
        assert gone.value.data == NOT_FOUND

        held = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.close_session(session_id=held)
        writer = store().open_writer(held, "a Jupyter kernel (pid 1, notebook x.ipynb)")
        try:
            with pytest.raises(RequestError) as busy:
                await delete(conn, held)
            assert busy.value.code == -32602
            assert "in use by a Jupyter kernel" in busy.value.data["session_id"]
            assert store().exists(held)
        finally:
            writer.close()
        await delete(conn, held)
        assert not store().exists(held)


async def test_model_ids_are_validated(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        for bad, says in (
            ("claude-nope", "choose one of: scripted, claude-sonnet-4-6"),
            ("gpt-4o", "unknown model 'gpt-4o'"),
            (f"scripted:{workspace}/missing.json", "cannot read script"),
        ):
            with pytest.raises(RequestError) as refused:
                await conn.set_config_option(config_id="model", session_id=sid, value=bad)
            assert refused.value.code == -32602 and says in str(refused.value.data), bad
        answer = await conn.set_config_option(
            config_id="model", session_id=sid, value=f"scripted:{MCP_SCRIPT}"
        )
        (model,) = [o for o in answer.config_options if o.id == "model"]
        values = [o.value for o in model.options]
        assert "claude-nope" not in values and model.current_value.endswith("acp_mcp.json")


async def test_tool_call_locations_carry_line_numbers(tmp_path, workspace):
    notes = workspace / "notes.txt"
    notes.write_text("one\ntwo\nthree needle\nfour\nneedle two\n")
    client = RecordingClient()
    async with acp_server(tmp_path, client, server_env(MCP_SCRIPT)) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id

        async def locations(prompt: str) -> list[tuple[str, int | None]]:
            await conn.prompt(session_id=sid, prompt=[text_block(prompt)])
            call_id = client.tool_ids(sid)[-1]
            found = [u.locations for u in client.tool_updates(sid, call_id) if u.locations]
            return [(loc.path, loc.line) for loc in found[-1]]

        assert await locations("read lines") == [(str(notes), 3)]
        assert await locations("search") == [(str(notes), 3), (str(notes), 5)]
        assert await locations("edit") == [(str(notes), 5)]
    assert notes.read_text().endswith("pin two\n")
