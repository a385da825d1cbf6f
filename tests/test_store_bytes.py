"""Text of any bytes over ``iac-kernel acp``: a non-UTF-8 file name through list_files,
glob, grep, bash ls and read_file, a prompt with a lone surrogate, then another prompt and
a load. Nothing fails on encoding; clients get readable text (``caf\\xe9.tf``); the store
keeps the exact name."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from iac_kernel.sessions.store import SessionStore
from store_support import dangling_tool_uses
from test_acp_support import RawServer, server_env

ODD = os.fsdecode(b"caf\xe9.tf")  # 'caf\udce9.tf'
SHOWN = "caf\\xe9.tf"


def odd_script(path: Path) -> Path:
    calls = [
        {"name": "list_files", "input": {"path": "."}},
        {"name": "glob", "input": {"pattern": "*.tf"}},
        {"name": "grep", "input": {"pattern": "resource"}},
        {"name": "bash", "input": {"command": "ls"}},
        {"name": "read_file", "input": {"path": ODD}},
    ]
    script = {
        "name": "odd",
        "exchanges": [
            {"match": "^odd names", "turns": [{"tool_use": calls}, {"text": "Read them."}]},
            {"match": "^again", "turns": [{"text": "Still fine."}]},
        ],
        "fallback": "Got it.",
    }
    # ensure_ascii writes the lone surrogate as the JSON escape \udce9.
    path.write_text(json.dumps(script))
    return path


async def turn(server: RawServer, request_id: int, session_id: str, text: str) -> list[dict]:
    """Send a prompt (as a raw line, so lone surrogates go as JSON escapes), allow every
    permission request, and return every message up to the answer."""
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    await server.send(
        {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}
    )
    seen: list[dict] = []
    while True:
        message = await server.read()
        seen.append(message)
        if message.get("method") == "session/request_permission":
            answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
            await server.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
        elif message.get("id") == request_id and "method" not in message:
            return seen


def finals(messages: list[dict]) -> dict[str, dict[str, Any]]:
    found = {}
    for message in messages:
        update = (message.get("params") or {}).get("update") or {}
        # a replayed call whose result follows it is one tool_call in its final state
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update") and update.get(
            "status"
        ) in (
            "completed",
            "failed",
        ):
            text = "\n".join(
                c["content"]["text"]
                for c in update.get("content") or []
                if c.get("type") == "content"
            )
            found[update["toolCallId"]] = {"status": update["status"], "text": text}
    return found


async def test_odd_bytes_through_every_tool_and_a_prompt(tmp_path: Path, workspace: Path):
    (workspace / ODD).write_bytes(b'resource "aws_vpc" "main" {}\n')  # caf\xe9.tf on disk
    env = server_env(odd_script(tmp_path / "odd.json"))
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.initialize()
        new = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = new["result"]["sessionId"]
        first = await turn(server, 11, sid, "odd names please")
        assert first[-1].get("result", {}).get("stopReason") == "end_turn", first[-1]
        live = finals(first)
        assert len(live) == 5
        assert all(f["status"] == "completed" for f in live.values()), live
        texts = [f["text"] for f in live.values()]
        assert sum(SHOWN in t for t in texts) >= 4  # list_files, glob, grep, bash ls
        assert any("aws_vpc" in t for t in texts)  # read_file opened the odd name
        for raw in server.lines:
            raw.decode("utf-8")  # every line the client got is valid UTF-8
            assert b"\\udc" not in raw  # and carries no surrogate escape
        second = await turn(server, 12, sid, "lone \ud800 surrogate in a prompt")
        assert "result" in second[-1], second[-1]
        third = await turn(server, 13, sid, "again")
        assert third[-1]["result"]["stopReason"] == "end_turn"
        # A session whose first prompt (so its title) has a lone surrogate, in a folder
        # whose name is not UTF-8: listing it works and shows both readably.
        odd_dir = workspace / ODD.replace(".tf", "-dir")
        odd_dir.mkdir()
        other = await server.call("session/new", {"cwd": str(odd_dir), "mcpServers": []})
        assert "result" in other, other
        other_id = other["result"]["sessionId"]
        fourth = await turn(server, 14, other_id, "\ud800 first")
        assert "result" in fourth[-1], fourth[-1]
        listed = await server.call("session/list", {"cwd": str(odd_dir)})
        [info] = listed["result"]["sessions"]
        assert info["title"] == "\\ud800 first" and info["cwd"].endswith("caf\\xe9-dir")

    async with RawServer.start(env, tmp_path / "stderr-2.log") as server:
        await server.initialize()
        params = {"cwd": str(workspace), "sessionId": sid, "mcpServers": []}
        loaded = await server.call("session/load", params)
        assert "result" in loaded, loaded
        replay = [json.loads(line) for line in server.lines]
        assert finals(replay) == live
        users = [
            m["params"]["update"]["content"]["text"]
            for m in replay
            if (m.get("params") or {}).get("update", {}).get("sessionUpdate")
            == "user_message_chunk"
        ]
        assert "lone \\ud800 surrogate in a prompt" in users

    stored = SessionStore(Path(env["IAC_KERNEL_SESSIONS_DIR"])).read(sid)
    assert stored.repairs == [] and dangling_tool_uses(stored.messages) == []
    flat = json.dumps(stored.messages)  # ensure_ascii: surrogates as escapes
    assert "caf\\udce9.tf" in flat  # the exact bytes, not a replacement character
    assert "\\ufffd" not in flat
    prompts = [m for m in stored.messages if m["role"] == "user" and isinstance(m["content"], list)]
    assert any(
        b.get("text") == "lone \ud800 surrogate in a prompt" for m in prompts for b in m["content"]
    )
