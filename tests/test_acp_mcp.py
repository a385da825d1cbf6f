"""MCP servers from ACP ``mcpServers`` over a real client: the third-party filesystem
server (npm, stdio), the demo FastMCP server over streamable HTTP and SSE, and servers
that fail to start or die mid-session."""

from __future__ import annotations

import json

from acp import text_block

from mcp_support import (
    SECRET,
    alive,
    broken_entry,
    demo_entry,
    fs_entry,
    require_node_modules,
    web_server,
)
from test_acp_support import SCRIPTS, RecordingClient, acp_server, server_env

SCRIPT = SCRIPTS / "acp_mcp.json"


def env():
    return server_env(SCRIPT, DEMO_API_TOKEN=SECRET)


def mcp_status(wire, session_id: str | None = None) -> list[dict]:
    """The ``_meta`` MCP statuses of the last session answer on the wire."""
    answers = [
        m["result"]
        for m in wire.incoming
        if "method" not in m and isinstance(m.get("result"), dict) and "modes" in m["result"]
    ]
    return answers[-1]["_meta"]["iac_kernel"]["mcpServers"]


def result_of(client: RecordingClient, sid: str) -> tuple[str, str]:
    """Final status and text of the last tool call."""
    call_id = client.tool_ids(sid)[-1]
    final = [u for u in client.tool_updates(sid, call_id) if u.status in ("completed", "failed")]
    text = "".join(c.content.text for c in final[-1].content or [] if c.type == "content")
    return final[-1].status, text


async def test_third_party_filesystem_server_over_stdio(tmp_path, workspace):
    require_node_modules()
    (workspace / "plan.tf").write_text("# a file the MCP server lists\n")
    client = RecordingClient()
    client.answers.append("allow_always")
    async with acp_server(tmp_path, client, env()) as (conn, _p, _c, wire):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[fs_entry(workspace)])
        sid = session.session_id
        (fs,) = mcp_status(wire)
        assert fs["status"] == "running", fs
        assert "mcp__fs__list_directory" in fs["tools"]

        answer = await conn.prompt(session_id=sid, prompt=[text_block(f"fs list in {workspace}")])
        assert answer.stop_reason == "end_turn"
        (asked,) = client.permissions
        assert asked["tool_call"].kind == "other"
        assert asked["tool_call"].title.startswith("fs: list_directory")
        assert [o.option_id for o in asked["options"]][:2] == ["allow_once", "allow_always"]
        status, text = result_of(client, sid)
        assert status == "completed" and "plan.tf" in text

        # "Allow always" was for this tool: the next call runs without asking.
        await conn.prompt(session_id=sid, prompt=[text_block(f"fs list in {workspace}")])
        assert len(client.permissions) == 1
        # The server enforces its own root: outside it is an error result, not a crash.
        await conn.prompt(session_id=sid, prompt=[text_block("fs read outside")])
        status, text = result_of(client, sid)
        assert status == "failed" and "denied" in text.lower()


async def test_fastmcp_server_over_http_and_sse(tmp_path, workspace):
    with web_server(tmp_path / "web.log") as url:
        servers = [
            {"type": "http", "name": "web", "url": f"{url}/mcp", "headers": []},
            {"type": "sse", "name": "events", "url": f"{url}/sse", "headers": []},
        ]
        client = RecordingClient()
        async with acp_server(tmp_path, client, env()) as (conn, _p, _c, wire):
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=servers)).session_id
            assert {(s["name"], s["status"]) for s in mcp_status(wire)} == {
                ("web", "running"),
                ("events", "running"),
            }

            await conn.prompt(session_id=sid, prompt=[text_block("web add")])
            assert result_of(client, sid) == ("completed", "2 + 40 = 42")
            # The server says add is read-only: shown, but the call was still asked.
            title = client.permissions[-1]["tool_call"].title
            assert title == "web: add (server says: read-only)"

            await conn.prompt(session_id=sid, prompt=[text_block("web secret")])
            status, text = result_of(client, sid)
            assert status == "completed" and SECRET not in text
            assert "[REDACTED:DEMO_API_TOKEN]" in text

            await conn.prompt(session_id=sid, prompt=[text_block("web picture")])
            assert result_of(client, sid)[1].startswith("[image: image/png")

            await conn.prompt(session_id=sid, prompt=[text_block("web fail")])
            status, text = result_of(client, sid)
            assert status == "failed" and "broken on purpose" in text

            await conn.prompt(session_id=sid, prompt=[text_block("sse add")])
            assert result_of(client, sid) == ("completed", "1 + 2 = 3")

            # resume with the servers again: the running ones are kept, the tools work.
            await conn.resume_session(cwd=str(workspace), session_id=sid, mcp_servers=servers)
            await conn.prompt(session_id=sid, prompt=[text_block("web add")])
            assert result_of(client, sid) == ("completed", "2 + 40 = 42")
        assert SECRET not in json.dumps(wire.incoming)


async def test_servers_that_fail_or_die_leave_the_session_working(tmp_path, workspace):
    pid_file = tmp_path / "demo.pid"
    servers = [broken_entry(), demo_entry(DEMO_PID_FILE=str(pid_file))]
    client = RecordingClient()
    async with acp_server(tmp_path, client, env()) as (conn, _p, _c, wire):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=servers)).session_id
        broken, demo = mcp_status(wire)
        assert broken["status"] == "failed" and broken["tools"] == []
        assert "missing configuration DEMO_URL" in broken["error"]
        assert demo["status"] == "running"

        # The failure is told once, in the next turn.
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert "MCP server 'broken' failed" in client.text(sid)
        client.clear()

        answer = await conn.prompt(session_id=sid, prompt=[text_block("crash")])
        assert answer.stop_reason == "end_turn"
        status, text = result_of(client, sid)
        assert status == "failed" and "MCP server 'demo' failed" in text
        assert "crashing on purpose" in text  # the server's last stderr words
        # The new state reaches the client in _meta, with the turn (before its answer).
        (info,) = [u for u in client.of(sid, "session_info_update") if u.field_meta]
        states = {s["name"]: s["status"] for s in info.field_meta["iac_kernel"]["mcpServers"]}
        assert states == {"broken": "failed", "demo": "failed"}

        answer = await conn.prompt(session_id=sid, prompt=[text_block("add after the crash")])
        status, text = result_of(client, sid)
        assert status == "failed" and "MCP server 'demo' failed" in text
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert answer.stop_reason == "end_turn"

        # fork takes mcpServers too: the copy has its own servers.
        fork = await conn.fork_session(
            cwd=str(workspace), session_id=sid, mcp_servers=[broken_entry("again")]
        )
        assert fork.session_id != sid
        assert [(s["name"], s["status"]) for s in mcp_status(wire)] == [("again", "failed")]

        # A fresh server of the same name stops when the session closes.
        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=servers[1:])
        assert mcp_status(wire)[-1]["status"] == "running"
        pid = int(pid_file.read_text())
        assert alive(pid)
        await conn.close_session(session_id=sid)
        assert not alive(pid)


async def test_bad_mcp_servers_are_invalid_params(tmp_path, workspace):
    async with acp_server(tmp_path, env=env()) as (conn, _p, _c, _w):
        from acp import RequestError

        for bad in (
            [{"name": "!!", "command": "true", "args": [], "env": []}],
            [{"type": "http", "name": "h", "url": "ftp://nope", "headers": []}],
            [demo_entry("same"), demo_entry("same")],
        ):
            try:
                await conn.new_session(cwd=str(workspace), mcp_servers=bad)
            except RequestError as exc:
                assert exc.code == -32602 and "mcpServers" in exc.data
            else:
                raise AssertionError(f"accepted {bad}")
