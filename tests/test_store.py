"""The session store: append-only logs, metadata, locks, fork, and crash repair."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from iac_kernel.sessions.store import (
    INTERRUPTED_RESULT,
    SessionLockedError,
    SessionNotFoundError,
    SessionStore,
)

USER = {"role": "user", "content": [{"type": "text", "text": "plan the vpc"}]}
TOOL_USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}],
}


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def test_create_append_read(store: SessionStore, tmp_path: Path):
    meta = store.create(str(tmp_path), title="t")
    assert str(uuid.UUID(meta.session_id)) == meta.session_id
    writer = store.open_writer(meta.session_id, "test")
    writer.append_message(USER)
    writer.append_message({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    writer.close()
    stored = store.read(meta.session_id)
    assert [m["role"] for m in stored.messages] == ["user", "assistant"]
    assert store.read_meta(meta.session_id).message_count == 2


def test_list_is_by_exact_cwd_newest_first(store: SessionStore, tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "a" / "b"
    b.mkdir(parents=True)
    first = store.create(str(a))
    time.sleep(0.01)  # timestamps have millisecond resolution
    second = store.create(str(a))
    store.create(str(b))
    assert [m.session_id for m in store.list(str(a))] == [second.session_id, first.session_id]
    assert len(store.list(str(b))) == 1
    assert len(store.list()) == 3


def test_unknown_and_malformed_ids(store: SessionStore):
    with pytest.raises(SessionNotFoundError):
        store.read_meta(str(uuid.uuid4()))
    with pytest.raises(SessionNotFoundError):
        store.read_meta("../../etc/passwd")
    assert not store.exists("not-a-uuid")


def test_one_writer_per_session(store: SessionStore, tmp_path: Path):
    meta = store.create(str(tmp_path))
    writer = store.open_writer(meta.session_id, "notebook kernel")
    with pytest.raises(SessionLockedError) as err:
        store.open_writer(meta.session_id, "editor")
    assert "notebook kernel" in str(err.value) and str(os.getpid()) in str(err.value)
    assert store.lock_holder(meta.session_id)["holder"] == "notebook kernel"
    writer.close()
    assert store.lock_holder(meta.session_id) is None
    store.open_writer(meta.session_id, "editor").close()


def test_fork_copies_history_and_is_independent(store: SessionStore, tmp_path: Path):
    meta = store.create(str(tmp_path), title="vpc")
    writer = store.open_writer(meta.session_id, "t")
    writer.append_message(USER)
    fork = store.fork(meta.session_id)
    writer.append_message({"role": "assistant", "content": [{"type": "text", "text": "later"}]})
    writer.close()
    assert fork.session_id != meta.session_id and fork.forked_from == meta.session_id
    assert store.read(fork.session_id).messages == [USER]
    assert len(store.read(meta.session_id).messages) == 2


def test_half_written_last_line_is_cut_and_the_cut_persists(store: SessionStore, tmp_path: Path):
    meta = store.create(str(tmp_path))
    writer = store.open_writer(meta.session_id, "t")
    writer.append_message(USER)
    writer.close()
    log = store.root / f"{meta.session_id}.jsonl"
    with open(log, "ab") as handle:
        handle.write(b'{"type": "message", "message": {"role": "assis')
    writer = store.open_writer(meta.session_id, "t")
    loaded = store.load(writer)
    writer.close()
    assert loaded.messages == [USER]
    assert loaded.repairs and "half-written" in loaded.repairs[0]
    assert log.read_bytes().endswith(b"\n")
    assert all(json.loads(line) for line in log.read_text().splitlines())


def test_dangling_tool_use_gets_a_persisted_result(store: SessionStore, tmp_path: Path):
    meta = store.create(str(tmp_path))
    writer = store.open_writer(meta.session_id, "t")
    writer.append_message(USER)
    writer.append_message(TOOL_USE)
    writer.close()
    writer = store.open_writer(meta.session_id, "t")
    loaded = store.load(writer)
    writer.close()
    last = loaded.messages[-1]["content"][0]
    assert last == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": INTERRUPTED_RESULT,
        "is_error": True,
    }
    # The repair is on disk: reading again needs no repair.
    assert store.read(meta.session_id).messages[-1] == loaded.messages[-1]
    writer = store.open_writer(meta.session_id, "t")
    assert store.load(writer).repairs == []
    writer.close()


WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    from iac_kernel.sessions.store import SessionStore
    store = SessionStore(sys.argv[1])
    writer = store.open_writer(sys.argv[2], "crashing writer")
    big = "x" * 20000
    i = 0
    print("ready", flush=True)
    while True:
        writer.append_message({"role": "user", "content": [{"type": "text", "text": big + str(i)}]})
        writer.append_message({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"command": "ls"}}]})
        writer.append_message({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}]})
        i += 1
    """
)


def test_killed_writer_leaves_a_loadable_session(store: SessionStore, tmp_path: Path):
    meta = store.create(str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER_SCRIPT, str(store.root), meta.session_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    with pytest.raises(SessionLockedError, match="crashing writer"):
        store.open_writer(meta.session_id, "me")
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    writer = store.open_writer(meta.session_id, "me")  # the OS released the dead writer's lock
    loaded = store.load(writer)
    writer.close()
    assert len(loaded.messages) >= 3
    open_calls = set()
    for message in loaded.messages:
        for block in message["content"]:
            if block["type"] == "tool_use":
                open_calls.add(block["id"])
            if block["type"] == "tool_result":
                open_calls.discard(block["tool_use_id"])
    assert open_calls == set()
