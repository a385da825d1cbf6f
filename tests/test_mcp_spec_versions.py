"""MCP servers of both spec eras through our client (iac_kernel.mcp), with real servers:

* the 2026-07-28 spec (no sessions, no ``initialize``): the demo server on mcp 2.x's
  ``MCPServer``, as stateless streamable HTTP with JSON answers, and over stdio;
* the handshake-era specs: the third-party Node filesystem server (TypeScript SDK 1.x).

The ``jupyter-ai`` venv resolves mcp 1.x (Jupyter AI 3.2 needs it), which speaks only the
handshake: the 2026-07-28 tests need 2.x and say so there.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.config import Settings
from iac_kernel.mcp import sdk
from iac_kernel.mcp.client import McpServer
from iac_kernel.mcp.config import ServerSpec
from iac_kernel.mcp.manager import McpManager
from iac_kernel.mcp.tool import McpTool
from iac_kernel.tools.base import Tool, ToolContext
from mcp_support import DEMO_SERVER, FS_SERVER, require_node_modules, web_server

MODERN = "2026-07-28"
needs_mcp2 = pytest.mark.skipif(sdk.LINE == 1, reason="mcp 1.x speaks only the handshake-era specs")


async def run(tool: McpTool, **args: Any) -> tuple[str, bool]:
    result = await tool.run(args, ToolContext(cwd=Path.cwd(), settings=Settings()))
    return result.content, result.is_error


def mcp_tools(tools: list[Tool]) -> dict[str, McpTool]:
    return {t.name: t for t in tools if isinstance(t, McpTool)}


@needs_mcp2
async def test_a_stateless_2026_07_28_server_is_spoken_to_without_initialize(tmp_path):
    methods = tmp_path / "methods.log"
    with web_server(tmp_path / "web.log", "stateless", DEMO_METHOD_LOG=str(methods)) as url:
        tools: list[Tool] = []
        manager = McpManager(tools)
        spec = ServerSpec(
            "modern", "http", url=f"{url}/mcp", headers={"Authorization": "Bearer t0k"}
        )
        try:
            await manager.start([spec])
            (status,) = manager.statuses()
            assert status["status"] == "running", status
            assert status["protocol"] == MODERN
            by_name = mcp_tools(tools)
            assert set(by_name) >= {"mcp__modern__add", "mcp__modern__fail", "mcp__modern__picture"}
            assert by_name["mcp__modern__add"].hints == ["read-only"]

            assert await run(by_name["mcp__modern__add"], a=40, b=2) == ("40 + 2 = 42", False)
            text, failed = await run(by_name["mcp__modern__fail"], message="broken on purpose")
            assert failed and "broken on purpose" in text
            text, failed = await run(by_name["mcp__modern__picture"])
            assert text.startswith("[image: image/png") and not failed
        finally:
            await manager.stop()

    seen = [line.split(" ", 1) for line in methods.read_text().splitlines()]
    names = [name for name, _auth in seen]
    assert "initialize" not in names and "notifications/initialized" not in names
    assert names[0] == "server/discover" and "tools/list" in names
    assert names.count("tools/call") == 3
    assert {auth for _name, auth in seen} == {"Bearer t0k"}  # the spec's headers, every time


@needs_mcp2
async def test_the_sdk_2_server_over_stdio_speaks_2026_07_28():
    server = McpServer(
        ServerSpec("demo", "stdio", command=sys.executable, args=[str(DEMO_SERVER), "stdio"])
    )
    try:
        await server.start()
        assert server.running, server.error
        assert server.protocol == MODERN and server.server_info.startswith("demo")
        result = await server.call("add", {"a": 1, "b": 2})
        assert result.content[0].text == "1 + 2 = 3"
    finally:
        await server.stop()


async def test_a_handshake_era_server_is_spoken_to_with_initialize(tmp_path: Path):
    require_node_modules()
    (tmp_path / "main.tf").write_text('resource "null_resource" "x" {}\n')
    tools: list[Tool] = []
    manager = McpManager(tools)
    node = shutil.which("node") or "node"
    spec = ServerSpec("fs", "stdio", command=node, args=[str(FS_SERVER), str(tmp_path)])
    try:
        await manager.start([spec])
        (status,) = manager.statuses()
        assert status["status"] == "running", status
        # A dated handshake-era version: the client fell back from server/discover.
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", status["protocol"])
        assert status["protocol"] < MODERN
        assert "filesystem" in manager.servers["fs"].server_info
        by_name = mcp_tools(tools)
        text, failed = await run(by_name["mcp__fs__read_text_file"], path=str(tmp_path / "main.tf"))
        assert not failed and 'resource "null_resource" "x"' in text
        text, failed = await run(by_name["mcp__fs__read_text_file"], path="/etc/hostname")
        assert failed and "denied" in text.lower()  # outside its root: an error result
    finally:
        await manager.stop()
    assert tools == []
