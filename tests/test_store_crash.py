"""kill -9 of ``iac-kernel acp`` at random points of turns with several tool calls: every
tool call the client saw completed is replayed by ``session/load`` as completed, with the
same output; the others are closed as interrupted; the history stays valid."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from pathlib import Path
from typing import Any

from iac_kernel.sessions.store import SessionStore
from store_support import dangling_tool_uses
from test_acp_support import RawServer, server_env

KILLS = 10
CALLS = 5


def crash_script(path: Path) -> Path:
    """A turn of five quick read-only tool calls, then a closing answer."""
    calls = [
        {"name": "read_file", "input": {"path": "a.tf"}},
        {"name": "list_files", "input": {"path": "."}},
        {"name": "read_file", "input": {"path": "b.tf"}},
        {"name": "glob", "input": {"pattern": "*.tf"}},
        {"name": "grep", "input": {"pattern": "resource"}},
    ]
    script = {
        "name": "crash",
        "exchanges": [
            {
                "match": "^run the tools",
                "turns": [
                    {"text": "Looking.", "tool_use": calls},
                    {"text": "All read.", "delay": 0.005},
                ],
            }
        ],
        "fallback": "ok",
    }
    path.write_text(json.dumps(script))
    return path


def tool_updates(messages: list[dict[str, Any]], session_id: str) -> dict[str, dict[str, Any]]:
    """call id -> {"status", "text"} of the last tool update that had a final status."""
    final: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.get("method") != "session/update":
            continue
        if message["params"]["sessionId"] != session_id:
            continue
        update = message["params"]["update"]
        # a replayed call whose result follows it is one tool_call in its final state
        if update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            continue
        if update.get("status") in ("completed", "failed"):
            texts = [
                c["content"]["text"]
                for c in update.get("content") or []
                if c.get("type") == "content"
            ]
            final[update["toolCallId"]] = {"status": update["status"], "text": "\n".join(texts)}
    return final


async def read_until_answer(server: RawServer, seen: list[dict], request_id: int) -> None:
    while not (seen and seen[-1].get("id") == request_id and "method" not in seen[-1]):
        seen.append(await server.read())


async def read_until_completed(
    server: RawServer, seen: list[dict], session_id: str, count: int, request_id: int
) -> None:
    """Read until ``count`` tool calls have a final status (or the turn is answered)."""
    while len(tool_updates(seen, session_id)) < count:
        if seen and seen[-1].get("id") == request_id and "method" not in seen[-1]:
            return
        seen.append(await server.read())


async def test_kill_9_keeps_every_completed_tool_call(tmp_path: Path, workspace: Path):
    (workspace / "a.tf").write_text('resource "aws_vpc" "main" {}\n')
    (workspace / "b.tf").write_text('resource "aws_subnet" "a" {}\n')
    env = server_env(crash_script(tmp_path / "crash.json"))
    rng = random.Random(os.environ.get("CRASH_SEED", "13"))
    session_id = None
    completed: dict[str, dict[str, Any]] = {}  # every call the client saw finish, ever
    checked = 0
    for round_no in range(KILLS + 1):
        async with RawServer.start(env, tmp_path / f"stderr-{round_no}.log") as server:
            await server.initialize()
            if session_id is None:
                new = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
                session_id = new["result"]["sessionId"]
            else:
                params = {"cwd": str(workspace), "sessionId": session_id, "mcpServers": []}
                await server.send(
                    {"jsonrpc": "2.0", "id": 7, "method": "session/load", "params": params}
                )
                seen: list[dict] = []
                await read_until_answer(server, seen, 7)
                assert "result" in seen[-1], seen[-1]
                replayed = tool_updates(seen, session_id)
                for call_id, live in completed.items():
                    assert replayed.get(call_id) == live, (round_no, call_id)
                    checked += 1
                assert all(r["status"] in ("completed", "failed") for r in replayed.values())
            if round_no == KILLS:
                break
            prompt = {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": "run the tools"}],
            }
            await server.send(
                {"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": prompt}
            )
            # Kill after the client saw k calls complete (k random, 0..all), plus a little.
            target = rng.randint(0, CALLS)
            seen = []

            reading = read_until_completed(server, seen, session_id, target, 9)
            await asyncio.wait_for(reading, 30)
            await asyncio.sleep(rng.uniform(0, 0.03))
            os.kill(server.process.pid, signal.SIGKILL)
            await server.process.wait()
            # What reached the client before the kill (the pipe still holds it).
            while line := await server.process.stdout.readline():
                seen.append(json.loads(line))
            for call_id, final in tool_updates(seen, session_id).items():
                if final["status"] == "completed":
                    completed[call_id] = final
    assert checked >= KILLS  # the loop really compared replays
    assert len(completed) >= CALLS
    store = SessionStore(Path(env["IAC_KERNEL_SESSIONS_DIR"]))
    history = store.read(session_id)
    assert dangling_tool_uses(history.messages) == []
