"""kill -9 of ``iac-kernel acp`` at random points while it sends, keeps or extends a
session's replay lines (docs/sessions.md, "Kept replay"), with turns written between the
kills: the next load always sends exactly what a whole replay sends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

from iac_kernel.masking import marks
from iac_kernel.sessions.mask_key import install_key
from iac_kernel.sessions.store import SessionStore, now_iso
from test_acp_support import RawServer, _base_env, server_command, server_env

KILLS = 8
#: The updates a load sends after the history (the title, the commands).
_AFTER = re.compile(rb'"sessionUpdate":"(session_info_update|available_commands_update)"')


def _store() -> SessionStore:
    return SessionStore(Path(os.environ["IAC_KERNEL_SESSIONS_DIR"]))


def _append(sid: str, first: int, count: int) -> None:
    """``count`` exchanges written as the agent writes them (results marked), without a
    sync per record (a long log is made quickly)."""
    store = _store()
    key = install_key(store.root)
    lines = []
    for i in range(first, first + count):
        call = f"call-{i}"
        output = f"output {i} " + "terraform plan line\n" * (i % 40)
        mark, known = marks.mark(key, [], output)
        use = {"type": "tool_use", "id": call, "name": "read_file", "input": {"path": f"{i}.tf"}}
        records = [
            {"type": "message", "ts": now_iso(), "message": {"role": "user", "content": f"q{i}"}},
            {
                "type": "message",
                "ts": now_iso(),
                "message": {"role": "assistant", "content": [{"type": "text", "text": "a"}, use]},
            },
            {"type": "mask_set", "ts": now_iso(), "id": mark["set"], "known": known},
            {
                "type": "tool_result",
                "ts": now_iso(),
                "name": "read_file",
                "block": {"type": "tool_result", "tool_use_id": call, "content": output},
                "mask": mark,
            },
        ]
        lines += [json.dumps(record) + "\n" for record in records]
    with (store.root / f"{sid}.jsonl").open("a") as log:
        log.writelines(lines)


async def _load(
    env: dict, path: Path, cwd: str, sid: str, kill: tuple[str, float] | None = None
) -> bytes:
    """The update lines of one load. ``kill``: ``("during", n)`` kills -9 the agent once
    ``n`` lines are read; ``("closing", s)``, ``s`` seconds after the answer and the end
    of its input (while the session closes and keeps its lines)."""
    async with RawServer.start(env, path) as server:
        await server.initialize()
        params = {"cwd": cwd, "sessionId": sid, "mcpServers": []}
        await server.send({"jsonrpc": "2.0", "id": 5, "method": "session/load", "params": params})
        read = 0
        while True:
            if kill is not None and kill[0] == "during" and read >= kill[1]:
                server.process.kill()
                await server.process.wait()
                return b""
            message = await server.read()
            read += 1
            if message.get("id") == 5 and "method" not in message:
                break
        if kill is not None:
            server.process.stdin.close()
            await asyncio.sleep(kill[1])
            with contextlib.suppress(ProcessLookupError):  # it may have ended first
                server.process.kill()
            await server.process.wait()
    history = [line for line in server.lines if b'"session/update"' in line]
    return b"".join(line for line in history if not _AFTER.search(line))


async def test_kill_9_while_replay_lines_are_sent_or_kept_never_leaves_wrong_ones(
    tmp_path, workspace
):
    rng = random.Random(os.environ.get("CRASH_SEED", "29"))
    meta = _store().create(str(workspace), title="kill")
    sid, cwd, written = meta.session_id, str(workspace), 1500
    _append(sid, 0, written)
    env = server_env(None)
    for round_no in range(KILLS):
        if rng.random() < 0.5:
            count = rng.randint(1, 30)
            _append(sid, written, count)
            written += count
        if rng.random() < 0.6:
            kill = ("during", rng.randint(0, 3 * written))
        else:
            kill = ("closing", rng.uniform(0.0, 0.2))
        await _load(env, tmp_path / f"kill-{round_no}.log", cwd, sid, kill)
    sent = await _load(env, tmp_path / "after.log", cwd, sid)
    _store().replay_cache(sid).drop()
    whole = await _load(env, tmp_path / "whole.log", cwd, sid)
    assert len(whole.splitlines()) == 3 * written
    assert sent == whole
    assert await _load(env, tmp_path / "again.log", cwd, sid) == whole


def test_an_agent_whose_client_stopped_reading_still_ends_on_sigterm(tmp_path, workspace):
    """The kept lines go out from a daemon thread: a client that stops reading (the
    pipe full, the thread waiting) does not keep the agent from ending."""
    meta = _store().create(str(workspace), title="stalled")
    _append(meta.session_id, 0, 6000)  # a few MB: more than the pipe holds
    params = {"cwd": str(workspace), "sessionId": meta.session_id, "mcpServers": []}
    asyncio.run(_load(server_env(None), tmp_path / "keep.log", str(workspace), meta.session_id))
    assert (_store().root / f"{meta.session_id}.replay-head").exists()
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": params},
    ]
    with (tmp_path / "stalled.log").open("wb") as log:
        agent = subprocess.Popen(
            server_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,  # never read
            stderr=log,
            env={**_base_env(), **server_env(None)},
        )
        try:
            agent.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))  # type: ignore[union-attr]
            agent.stdin.flush()  # type: ignore[union-attr]
            time.sleep(1.5)  # the load is under way, its output stalled
            assert agent.poll() is None
            agent.send_signal(signal.SIGTERM)
            assert agent.wait(timeout=15) is not None
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
