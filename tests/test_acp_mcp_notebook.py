"""MCP servers in a notebook: a ``.mcp.json`` in the session's folder (Claude Code's
format) starts with the session once the user trusted that exact content (``%mcp trust``;
a new or changed file starts nothing), ``%mcp`` lists, adds and removes servers, a failing
server is reported in the notebook and the session goes on; ``%model`` validates ids."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_harness import CellResult, KernelHarness, scripted_kernel
from mcp_support import BROKEN_SERVER, DEMO_SERVER, SECRET

SCRIPT = Path(__file__).parent / "scripts" / "acp_mcp.json"


@pytest.fixture
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a .mcp.json, and a kernel of its own per test (tests run in any
    order: each starts from an untrusted file)."""
    path = Path(os.path.realpath(tmp_path_factory.mktemp("mcp-notebook")))
    config = {
        "mcpServers": {
            "demo": {
                "command": sys.executable,
                "args": [str(DEMO_SERVER), "stdio"],
                "env": {"DEMO_API_TOKEN": SECRET},
            },
            "broken": {"command": sys.executable, "args": [str(BROKEN_SERVER)]},
        }
    }
    (path / ".mcp.json").write_text(json.dumps(config))
    return path


@pytest.fixture
def kernel(work: Path) -> Iterator[KernelHarness]:
    harness = scripted_kernel(work.parent / "kernel-root", work, SCRIPT)
    try:
        yield harness
    finally:
        harness.stop()


def run(kernel: KernelHarness, code: str, status: str = "ok") -> CellResult:
    result = kernel.execute(code)
    assert result.status == status, result.reply["content"]
    return result


def text(result: CellResult) -> str:
    """Everything the cell showed, as text."""
    parts = []
    for message in result.of_type("display_data", "update_display_data", "stream"):
        content = message["content"]
        parts.append(content.get("text", ""))
        parts.extend(str(v) for v in content.get("data", {}).values())
    return "\n".join(parts)


def test_project_servers_start_with_the_session(kernel: KernelHarness) -> None:
    # A .mcp.json never trusted starts nothing; the user is told how to review it.
    untrusted = text(run(kernel, "%mcp"))
    assert "not started" in untrusted and "%mcp trust" in untrusted
    assert "running" not in untrusted and "mcp__demo__add" not in untrusted
    shown = text(run(kernel, "%mcp trust"))
    assert "`demo` runs `" in shown and "demo_server.py stdio` with env `DEMO_API_TOKEN`" in shown
    assert SECRET not in shown and "running" not in shown
    code = re.search(r"mcp trust ([0-9a-f]{12})", shown)
    assert code is not None, shown
    wrong = run(kernel, "%mcp trust 0123456789ab", "error")
    assert "not the file that code was shown for" in wrong.reply["content"]["evalue"]
    assert "running" not in text(run(kernel, "%mcp"))

    listed = text(run(kernel, f"%mcp trust {code.group(1)}"))
    assert "Trusted `.mcp.json`" in listed and "not started" not in listed
    assert "`demo` (stdio, from .mcp.json): running" in listed
    assert "mcp__demo__add" in listed
    assert "`broken` (stdio, from .mcp.json): failed" in listed
    assert "missing configuration DEMO_URL" in listed

    # The failure is told in the next turn; the turn itself works, MCP tools included.
    run(kernel, "%config headless_policy allow")
    turn = text(run(kernel, "add after the crash"))
    assert "MCP server 'broken' failed" in turn
    assert "1 + 1 = 2" in turn and "Still here." in turn


def trust(kernel: KernelHarness) -> None:
    """Trust the folder's .mcp.json, as a user does after reading it."""
    code = re.search(r"mcp trust ([0-9a-f]{12})", text(run(kernel, "%mcp trust")))
    assert code is not None
    assert "`broken` (stdio, from .mcp.json): failed" in text(
        run(kernel, f"%mcp trust {code.group(1)}")
    )


def test_mcp_magic_adds_and_removes_servers(kernel: KernelHarness) -> None:
    trust(kernel)
    added = text(run(kernel, f"%mcp add extra {sys.executable} {BROKEN_SERVER}"))
    assert "MCP server `extra` failed" in added
    assert "Stopped MCP server `extra`" in text(run(kernel, "%mcp remove extra"))
    assert "Stopped MCP server `broken`" in text(run(kernel, "%mcp remove broken"))
    assert "`broken`" not in text(run(kernel, "%mcp list"))

    missing = run(kernel, "%mcp remove nope", "error")
    assert missing.reply["content"]["ename"] == "McpError"
    assert "no MCP server 'nope'" in missing.reply["content"]["evalue"]
    bad = run(kernel, "%mcp add", "error")
    assert "usage: %mcp" in bad.reply["content"]["evalue"]


def test_model_magic_validates_ids(kernel: KernelHarness) -> None:
    refused = run(kernel, "%model claude-nope", "error")
    assert refused.reply["content"]["ename"] == "ModelError"
    assert "choose one of" in refused.reply["content"]["evalue"]


def test_trust_is_remembered_for_that_content_only(kernel: KernelHarness, work: Path) -> None:
    trust(kernel)
    # A new session in the folder starts the trusted file's servers with no question...
    run(kernel, "%new")
    assert "`demo` (stdio, from .mcp.json): running" in text(run(kernel, "%mcp"))
    # ...but not once the file changed (e.g. written by a command): asked again.
    config = json.loads((work / ".mcp.json").read_text())
    config["mcpServers"]["demo"]["args"].append("--changed")
    (work / ".mcp.json").write_text(json.dumps(config))
    run(kernel, "%new")
    listed = text(run(kernel, "%mcp"))
    assert "not started" in listed and "running" not in listed
    assert "--changed" in text(run(kernel, "%mcp trust"))
