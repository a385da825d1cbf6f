"""The TypeScript ACP SDK (``@agentclientprotocol/sdk``, npm) as a client: a whole
session life cycle and a session with the npm filesystem MCP server, every message
validated against the SDK's zod schemas, and no update after a prompt or load answer
(tests/node/acp_client.mjs does the checking)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from mcp_support import NODE_DIR, fs_entry, require_node_modules
from test_acp_support import SCRIPTS, _base_env, server_command, server_env

CLIENT = NODE_DIR / "acp_client.mjs"


def test_typescript_sdk_client_validates_every_message(workspace):
    require_node_modules()
    config = {
        "command": server_command(),
        "env": {**_base_env(), **server_env()},
        "cwd": str(workspace),
        "fsServer": fs_entry(workspace),
        "mcpScript": str(SCRIPTS / "acp_mcp.json"),
    }
    done = subprocess.run(
        [shutil.which("node") or "node", str(CLIENT), json.dumps(config)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failures"] == [], report
    assert done.returncode == 0, done.stderr[-3000:]
    counts = report["counts"]
    for kind in (
        "update:agent_message_chunk",
        "update:tool_call",
        "update:tool_call_update",
        "update:usage_update",
        "update:session_info_update",
        "update:available_commands_update",
        "update:user_message_chunk",
        "update:plan",
        "request:session/request_permission",
        "result:session/delete",
        "error:session/load",
    ):
        assert counts.get(kind), (kind, counts)
    assert (workspace / "out.txt").exists()  # the approved write really ran
    # Schema 1.25 (sent raw, validated above by the TS SDK's zod schemas): every chunk has
    # a messageId, live and replayed; every tool call its tool's name.
    new = report["schema125"]
    assert new["chunksWithoutMessageId"] == [] and new["messageIds"] >= 4, new
    assert new["toolCallNames"] and None not in new["toolCallNames"], new
    # It declares boolean config options: it is offered the on/off settings, and sets one.
    assert set(new["booleanOptions"]) == {"sandbox_network", "web_fetch_allow_private"}, new
    assert new["booleanSet"] is False, new
    # The model's update_plan checklist: a plan update live, and again in the load's replay.
    assert new["plans"] == ["completed,in_progress,pending"] * 2, new
