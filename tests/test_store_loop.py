"""The loop and the store together: each result is on disk before the front end hears of
it, and a failed write leaves memory and disk agreeing (then the next turn repairs)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from core_support import write_script
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from iac_kernel.events import ToolCallResult
from iac_kernel.sessions import files, records
from iac_kernel.sessions.store import StoreWriteError
from store_support import dangling_tool_uses

CALLS = [
    {"name": "read_file", "input": {"path": "a.tf"}},
    {"name": "read_file", "input": {"path": "b.tf"}},
    {"name": "list_files", "input": {}},
]


@pytest.fixture
def manager(tmp_path: Path, workspace: Path) -> SessionManager:
    (workspace / "a.tf").write_text("# a\n")
    (workspace / "b.tf").write_text("# b\n")
    script = write_script(
        tmp_path / "s.json",
        [
            {"match": "^read", "turns": [{"tool_use": CALLS}, {"text": "done"}]},
            {"match": "^next", "turns": [{"text": "fine"}]},
        ],
    )
    settings = Settings.from_env()
    settings.script = str(script)
    return SessionManager(settings, holder="test")


async def test_each_result_is_stored_before_the_front_end_sees_it(manager, workspace):
    session = manager.new(str(workspace))
    log = manager.store.root / f"{session.session_id}.jsonl"
    seen_on_disk: list[int] = []

    def emit(event: Any) -> None:
        if isinstance(event, ToolCallResult):
            seen_on_disk.append(log.read_text().count('{"type":"tool_result","ts"'))

    ended = await session.prompt([{"type": "text", "text": "read them"}], emit, None)
    assert ended.stop_reason == "end_turn"
    assert seen_on_disk == [1, 2, 3]  # the k-th result was on disk when it was announced
    stored = manager.store.read(session.session_id)
    assert stored.messages == session.conversation.messages
    assert len(stored.messages[2]["content"]) == 3  # one user message holds all three


async def test_a_failed_result_write_leaves_memory_and_disk_agreeing(
    manager, workspace, monkeypatch
):
    session = manager.new(str(workspace))
    real = files._write_all
    writes = {"n": 0}

    def failing(fd: int, data: bytes) -> None:
        if data.startswith(b'{"type":"tool_result"'):
            writes["n"] += 1
            if writes["n"] == 2:  # the second call's result hits a full disk
                real(fd, data[:10])
                raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(files, "_write_all", failing)
    with pytest.raises(StoreWriteError):
        await session.prompt([{"type": "text", "text": "read them"}], lambda e: None, None)
    log = manager.store.root / f"{session.session_id}.jsonl"
    on_disk = records.assemble(records.scan(log.read_bytes()).records).messages
    assert session.conversation.messages == on_disk  # memory and disk agree
    assert len(session.conversation.messages[-1]["content"]) == 1  # only the stored result
    monkeypatch.setattr(files, "_write_all", real)
    ended = await session.prompt([{"type": "text", "text": "next"}], lambda e: None, None)
    assert ended.stop_reason == "end_turn"
    assert dangling_tool_uses(session.conversation.messages) == []
    await manager.close(session.session_id)
    reopened = manager.load(session.session_id)
    assert reopened.repairs == []  # nothing left to repair: the turn did it, on disk
    assert reopened.conversation.messages == session.conversation.messages
    await manager.close_all()
