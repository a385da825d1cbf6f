"""``session/load``'s replay written straight onto the client's transport
(``iac_kernel/acp/replay.py``): every update of the history, in order, as the
update-by-update path would send it; a client gone mid-replay harms nothing."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

from iac_kernel.acp.replay import replay_params, send_history
from iac_kernel.acp.serve.stdio import open_writer
from iac_kernel.acp.wire.channel import ClientChannel
from iac_kernel.acp.wire.connection import Connection
from iac_kernel.acp.wire.transport import LineTransport
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from iac_kernel.sessions.store import SessionStore


def _session(workspace: Path, turns: int, size: int = 1200) -> str:
    """A stored session of ``turns`` exchanges, each result about ``size`` bytes."""
    store = SessionStore(Path(os.environ["IAC_KERNEL_SESSIONS_DIR"]))
    sid = store.create(str(workspace), title="load").session_id
    writer = store.open_writer(sid, "test")
    for i in range(turns):
        use = {"type": "tool_use", "id": f"c{i}", "name": "read_file", "input": {"path": "a"}}
        writer.append_message({"role": "user", "content": [{"type": "text", "text": f"q{i}"}]})
        writer.append_message({"role": "assistant", "content": [use]})
        block = {
            "type": "tool_result",
            "tool_use_id": f"c{i}",
            "content": f"{i:06d} " * (size // 7),
        }
        writer.append_tool_result(block, name="read_file", masked_with=frozenset())
    writer.close()
    return sid


async def _load(sid: str, read_bytes: int | None = None) -> tuple[bytes, bool]:
    """What one load sends over a real pipe, and whether the client was seen gone;
    ``read_bytes``: the client reads that much, then closes its end."""
    manager = SessionManager(Settings(), holder="test")
    read_end, write_end = os.pipe()
    got = bytearray()

    def read() -> None:
        while chunk := os.read(read_end, 1 << 16):
            got.extend(chunk)
            if read_bytes is not None and len(got) >= read_bytes:
                break
        os.close(read_end)

    reader = threading.Thread(target=read)
    reader.start()
    writer = await open_writer(write_end)
    channel = ClientChannel(Connection(None, LineTransport(asyncio.StreamReader(), writer)))  # type: ignore[arg-type]
    try:
        session = manager.load(sid)
        await send_history(channel, session)
        channel.conn.transport.flush()  # (the load's answer would)
        return_gone = channel.gone
    finally:
        await manager.close_all()
        writer.close()
        await asyncio.to_thread(reader.join)
    return bytes(got), return_gone


async def test_a_load_sends_the_whole_history_in_order(workspace):
    sid = await asyncio.to_thread(_session, workspace, 20)
    sent, gone = await _load(sid)
    assert not gone
    lines = [json.loads(line) for line in sent.splitlines()]
    assert {line["method"] for line in lines} == {"session/update"}
    manager = SessionManager(Settings(), holder="test")
    expected = list(replay_params(manager.load(sid).replay(), sid))
    await manager.close_all()
    assert [line["params"] for line in lines] == expected
    kinds = [p["update"]["sessionUpdate"] for p in expected]
    assert kinds == ["user_message_chunk", "tool_call"] * 20


async def test_a_client_gone_mid_load_harms_nothing(workspace):
    """The replay (4 MB) outgrows the pipe (up to 1 MB) the client stops reading."""
    sid = await asyncio.to_thread(_session, workspace, 100, 40_000)
    sent, gone = await _load(sid, read_bytes=1 << 16)
    assert gone and 0 < len(sent) < 1 << 20  # it stopped early, without raising
    again, gone = await _load(sid)  # the session was let go and is whole
    assert not gone and len(again.splitlines()) == 200
