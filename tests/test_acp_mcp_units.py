"""Units of the MCP layer and its helpers: server specs from the three sources, tool
names and results, the manager's tool list and failure notices, the slash command
parser, model id validation."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from mcp import types

from iac_kernel.acp.session import commands
from iac_kernel.mcp.config import McpConfigError, from_acp, from_add_line
from iac_kernel.mcp.manager import McpManager
from iac_kernel.mcp.tool import McpTool, result_text, tool_name
from iac_kernel.mcp.trust import read_project
from iac_kernel.models.base import ModelError
from iac_kernel.models.registry import check_model_id, is_known_claude_model
from iac_kernel.tools.base import Category
from iac_kernel.tools.read_file import ReadFileTool
from mcp_support import BROKEN_SERVER


def test_acp_entries_become_specs():
    specs = from_acp(
        [
            {"name": "fs", "command": "node", "args": ["a"], "env": [{"name": "K", "value": "v"}]},
            {"type": "http", "name": "web", "url": "http://h/mcp", "headers": []},
            {
                "type": "sse",
                "name": "ev",
                "url": "https://h/sse",
                "headers": [{"name": "Authorization", "value": "Bearer x"}],
            },
        ],
        "/work",
    )
    assert [(s.name, s.transport) for s in specs] == [
        ("fs", "stdio"),
        ("web", "http"),
        ("ev", "sse"),
    ]
    assert specs[0].env == {"K": "v"} and specs[0].cwd == "/work"
    assert specs[2].headers == {"Authorization": "Bearer x"}
    assert "Bearer" not in specs[2].describe()  # lists never show header values
    assert from_acp(None, "/work") == []


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "!!", "command": "x"}, "invalid MCP server name"),
        ({"name": "a", "command": ""}, "'command' is required"),
        ({"name": "a", "command": "x", "args": "nope"}, "'args' must be a list"),
        ({"type": "ws", "name": "a", "url": "ws://x"}, "unsupported type 'ws'"),
        ({"type": "http", "name": "a", "url": "file:///x"}, "http(s) URL"),
        ({"name": "a", "command": "x", "env": [{"name": "K"}]}, "name/value pairs"),
    ],
)
def test_bad_entries_are_named(entry, says):
    with pytest.raises(McpConfigError) as bad:
        from_acp([entry], None)
    assert says in str(bad.value)


def project_specs(folder):
    """The servers of the folder's ``.mcp.json`` (none without one)."""
    project = read_project(folder)
    return [] if project is None else project.specs()


def test_project_file_in_claude_code_format(tmp_path):
    assert project_specs(tmp_path) == []
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "tf": {"command": "terraform-mcp-server", "args": ["stdio"], "env": {"X": "1"}},
                    "docs": {
                        "type": "http",
                        "url": "http://localhost:9/mcp",
                        "headers": {"A": "b"},
                    },
                }
            }
        )
    )
    tf, docs = project_specs(tmp_path)
    assert (tf.command, tf.args, tf.env, tf.origin) == (
        "terraform-mcp-server",
        ["stdio"],
        {"X": "1"},
        ".mcp.json",
    )
    assert (docs.transport, docs.headers, docs.cwd) == ("http", {"A": "b"}, str(tmp_path))
    (tmp_path / ".mcp.json").write_text("{not json")
    with pytest.raises(McpConfigError, match="not readable JSON"):
        project_specs(tmp_path)
    (tmp_path / ".mcp.json").write_text('{"servers": {}}')
    with pytest.raises(McpConfigError, match="mcpServers"):
        project_specs(tmp_path)


def test_add_lines():
    spec = from_add_line("tf terraform-mcp-server stdio --toolsets=registry", "/w")
    assert (spec.name, spec.command, spec.args) == (
        "tf",
        "terraform-mcp-server",
        ["stdio", "--toolsets=registry"],
    )
    assert from_add_line("ev http://h/sse --sse", None).transport == "sse"
    assert from_add_line("web https://h/mcp", None).transport == "http"
    for bad in ("", "onlyname", "web http://h/mcp --bogus", "x 'unclosed"):
        with pytest.raises(McpConfigError):
            from_add_line(bad, None)


class FakeServer:
    name = "my.server"
    running = True


def test_tools_are_gated_other_kind_with_hints_shown():
    remote = types.Tool(
        name="read-doc",
        description="Reads docs.",
        inputSchema={"type": "object", "properties": {"q": {"type": "string"}}},
        annotations=types.ToolAnnotations(readOnlyHint=True, destructiveHint=False),
    )
    tool = McpTool(FakeServer(), remote)
    assert tool.name == "mcp__my_server__read-doc" == tool_name("my.server", "read-doc")
    assert tool.kind == "other" and tool.category is Category.EXECUTE  # never trusted
    assert tool.title({}) == "my.server: read-doc (server says: read-only)"
    assert tool.definition()["input_schema"]["properties"] == {"q": {"type": "string"}}
    odd = McpTool(FakeServer(), types.Tool(name="t" * 80, inputSchema={"type": "array"}))
    assert len(odd.name) == 64 and odd.input_schema == {"type": "object", "properties": {}}


def test_results_become_text():
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="hello"),
            types.ImageContent(type="image", data="AAAA", mimeType="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.tf", text="x = 1"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///b.bin", blob="AA=="),
            ),
        ]
    )
    assert result_text(result).splitlines() == [
        "hello",
        "[image: image/png, about 3 bytes, not shown]",
        '<resource uri="file:///a.tf">',
        "x = 1",
        "</resource>",
        "[binary resource: file:///b.bin, unknown type]",
    ]
    structured = types.CallToolResult(content=[], structuredContent={"n": 3})
    assert json.loads(result_text(structured)) == {"n": 3}


async def test_manager_reports_a_failed_server_once_and_stops_cleanly(tmp_path):
    builtin = ReadFileTool()
    tools: list = [builtin]
    manager = McpManager(tools)
    (spec,) = from_acp(
        [{"name": "bad", "command": sys.executable, "args": [str(BROKEN_SERVER)], "env": []}],
        str(tmp_path),
    )
    await manager.start([spec])
    (status,) = manager.statuses()
    assert status["status"] == "failed" and "missing configuration DEMO_URL" in status["error"]
    assert tools == [builtin]
    notices = await manager.before_turn()
    assert len(notices) == 1 and "the session goes on" in notices[0]
    assert await manager.before_turn() == []  # told once
    assert await manager.remove("bad") and not await manager.remove("bad")
    await manager.stop()
    assert tools == [builtin] and manager.statuses() == []


async def test_manager_start_soon_is_awaited_by_before_turn(tmp_path):
    manager = McpManager([])
    (spec,) = from_acp(
        [{"name": "bad", "command": str(tmp_path / "missing"), "args": [], "env": []}], None
    )
    manager.start_soon([spec])
    notices = await asyncio.wait_for(manager.before_turn(), 30)
    assert "command not found" in notices[0]


def test_slash_command_parsing():
    def text(t):
        return [{"type": "text", "text": t}]

    assert commands.parse(text("/mode read_only")) == ("mode", "read_only")
    assert commands.parse(text("/mcp add x http://h/mcp")) == ("mcp", "add x http://h/mcp")
    assert commands.parse(text("/session")) == ("session", "")
    assert commands.parse(text("/etc/hosts is odd")) is None
    assert commands.parse(text("please /mode")) is None
    names = [c.name for c in commands.commands_update().available_commands]
    assert names == list(commands.COMMANDS)


def test_model_ids(tmp_path):
    for good in (
        "claude-sonnet-4-5",
        "claude-opus-4-6@20260205",
        "claude-sonnet-4-5[1m]",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "scripted",
    ):
        assert good == "scripted" or is_known_claude_model(good), good
        check_model_id(good)
    script = tmp_path / "s.json"
    script.write_text("{}")
    check_model_id(f"scripted:{script}")
    for bad in ("claude-nope", "gpt-4o", "", f"scripted:{tmp_path}/none.json"):
        with pytest.raises(ModelError):
            check_model_id(bad)
    with pytest.raises(ModelError, match=r"choose one of: .*claude-sonnet-4-6"):
        check_model_id("claude-nope")


async def test_http_and_sse_servers_that_go_away_fail_calls_at_once(tmp_path):
    from iac_kernel.mcp.client import McpCallError, McpServer
    from iac_kernel.mcp.config import ServerSpec
    from mcp_support import web_server

    with web_server(tmp_path / "web.log") as url:
        servers = [
            McpServer(ServerSpec("web", "http", url=f"{url}/mcp")),
            McpServer(ServerSpec("events", "sse", url=f"{url}/sse")),
        ]
        for server in servers:
            await server.start()
            assert server.running, server.error
            result = await server.call("add", {"a": 20, "b": 22})
            assert result.content[0].text == "20 + 22 = 42"
    try:
        for server in servers:  # the process is gone: a clear error, not a 300 s wait
            with pytest.raises(McpCallError, match=f"MCP server '{server.name}' failed"):
                await asyncio.wait_for(server.call("add", {"a": 1, "b": 1}), 30)
            assert server.state == "failed"
    finally:
        for server in servers:
            await server.stop()


def test_project_file_expands_environment_references(tmp_path, monkeypatch):
    monkeypatch.setenv("TFE_TOKEN", "tok-123456")
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "tf": {
                        "command": "terraform-mcp-server",
                        "args": ["--port=${TF_PORT:-8080}"],
                        "env": {"TFE_TOKEN": "${TFE_TOKEN}"},
                    },
                }
            }
        )
    )
    (tf,) = project_specs(tmp_path)
    assert tf.args == ["--port=8080"] and tf.env == {"TFE_TOKEN": "tok-123456"}
    monkeypatch.delenv("TFE_TOKEN")
    with pytest.raises(McpConfigError, match=r"\$\{TFE_TOKEN\} is not set"):
        project_specs(tmp_path)


def test_mcp_json_trust_is_per_content_and_kept_outside_the_folder(tmp_path):
    from iac_kernel.mcp.trust import follow_session, is_trusted, trust

    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "true"}}}')
    store = tmp_path / "home" / "mcp-trust.json"
    assert not is_trusted(read_project(folder), store)
    trust(read_project(folder), store)
    assert is_trusted(read_project(folder), store)
    (folder / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "false"}}}')
    changed = read_project(folder)
    assert not is_trusted(changed, store)

    # A symlink to a trusted file is a new file in its folder.
    other = tmp_path / "other"
    other.mkdir()
    (other / ".mcp.json").symlink_to(folder / ".mcp.json")
    trust(changed, store)
    assert is_trusted(read_project(folder), store)
    assert not is_trusted(read_project(other), store)

    # A store the folder's commands could write is never honoured.
    inside = folder / ".state" / "mcp-trust.json"
    with pytest.raises(OSError):
        trust(changed, inside)
    inside.parent.mkdir()
    inside.write_text(json.dumps({"trusted": {str(changed.path): changed.sha256}}))
    assert not is_trusted(changed, inside)

    class Settings:
        sessions_dir = folder / ".state" / "sessions"

    class Session:
        closed, mcp, tools, cwd, settings = False, None, [], str(folder), Settings()

    session = Session()
    follow_session(session)
    assert session.mcp.servers == {} and session.mcp._later == []
    assert "not started" in session.mcp.problems[0]


def test_bad_mcp_timeout_variables_keep_the_defaults(monkeypatch):
    """A bad IAC_KERNEL_MCP_* value must not kill the kernel or `iac-kernel acp` at import."""
    import importlib

    import iac_kernel.mcp.client as client

    monkeypatch.setenv("IAC_KERNEL_MCP_START_TIMEOUT", "abc")
    monkeypatch.setenv("IAC_KERNEL_MCP_CALL_TIMEOUT", "-5")
    try:
        reloaded = importlib.reload(client)
        assert (reloaded.START_TIMEOUT, reloaded.CALL_TIMEOUT) == (30.0, 300.0)
        monkeypatch.setenv("IAC_KERNEL_MCP_START_TIMEOUT", "2.5")
        assert importlib.reload(client).START_TIMEOUT == 2.5
    finally:
        monkeypatch.undo()
        importlib.reload(client)
