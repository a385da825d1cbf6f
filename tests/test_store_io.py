"""Store I/O: failed writes roll back, a full disk, file modes, descriptors, odd bytes,
and the listing index."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from iac_kernel.sessions import files
from iac_kernel.sessions.store import SessionStore, StoreWriteError
from iac_kernel.textsafe import json_line, readable

PROMPT = {"role": "user", "content": [{"type": "text", "text": "plan the vpc"}]}


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def reload(store: SessionStore, session_id: str):
    writer = store.open_writer(session_id, "test")
    try:
        return store.load(writer)
    finally:
        writer.close()


def test_a_failed_write_is_truncated_back_and_nothing_changes(store, tmp_path, monkeypatch):
    meta = store.create(str(tmp_path))
    writer = store.open_writer(meta.session_id, "test")
    writer.append_message(PROMPT)
    log = store.root / f"{meta.session_id}.jsonl"
    size, count = log.stat().st_size, writer.meta.message_count
    real = files._write_all

    def half_then_full_disk(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "_write_all", half_then_full_disk)
    with pytest.raises(StoreWriteError, match="No space left on device"):
        writer.append_message({"role": "assistant", "content": "x" * 5000})
    assert log.stat().st_size == size  # rolled back to the last good record
    assert writer.meta.message_count == count
    monkeypatch.setattr(files, "_write_all", real)
    writer.append_message({"role": "assistant", "content": "after"})
    writer.close()
    loaded = reload(store, meta.session_id)
    assert loaded.repairs == []
    assert [m["content"] for m in loaded.messages][-1] == "after"


def _mount_tmpfs(where: Path) -> bool:
    where.mkdir()
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def test_a_full_tmpfs_then_space_returns_and_the_history_is_valid(tmp_path):
    mount = tmp_path / "tiny"
    if not _mount_tmpfs(mount):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        store = SessionStore(mount / "sessions")
        meta = store.create(str(tmp_path))
        writer = store.open_writer(meta.session_id, "test")
        filler = mount / "filler"
        filler.write_bytes(b"\0" * 24_000)
        sent = 0
        with pytest.raises(StoreWriteError) as failed:
            for i in range(1000):
                writer.append_message({"role": "user", "content": f"{i} " + "y" * 3000})
                sent += 1
        assert failed.value.errno == errno.ENOSPC
        filler.unlink()  # space comes back
        writer.append_message({"role": "assistant", "content": "still here"})
        writer.close()
        loaded = reload(store, meta.session_id)
        assert loaded.repairs == []
        assert len(loaded.messages) == sent + 1
        assert loaded.messages[-1]["content"] == "still here"
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_modes_are_private_under_umask_022(tmp_path):
    old = os.umask(0o022)
    try:
        store = SessionStore(tmp_path / "a" / "sessions")
        meta = store.create(str(tmp_path))
        writer = store.open_writer(meta.session_id, "test")
        writer.append_message(PROMPT)
        writer.close()
        reload(store, meta.session_id)
    finally:
        os.umask(old)
    assert (store.root.stat().st_mode & 0o777) == 0o700
    assert (store.index.dir.stat().st_mode & 0o777) == 0o700
    made = [p for p in store.root.rglob("*") if p.is_file()]
    assert {p.suffix for p in made} >= {".json", ".jsonl", ".lock"}
    assert {oct(p.stat().st_mode & 0o777) for p in made} == {"0o600"}


FD_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, resource, shutil, sys, uuid
    from pathlib import Path
    from iac_kernel.config import Settings
    from iac_kernel.agent.manager import SessionManager
    from iac_kernel.sessions.store import SessionStore
    cwd, root = sys.argv[1], Path(sys.argv[2])
    # 2,000 stored sessions, copied from one (creating each would fsync several times).
    store = SessionStore(root)
    template = store.create(cwd, model="scripted")
    for _ in range(1999):
        sid = str(uuid.uuid4())
        text = (root / f"{template.session_id}.json").read_text()
        (root / f"{sid}.json").write_text(text.replace(template.session_id, sid))
        shutil.copy(root / f"{template.session_id}.jsonl", root / f"{sid}.jsonl")
    (root / "index" / "version").unlink()  # the next listing rebuilds the index
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    manager = SessionManager(Settings.from_env(), holder="fd test")
    ids = [meta.session_id for meta in manager.list(cwd)]
    for sid in ids:
        manager.load(sid)
    for sid in ids[:20]:
        manager.sessions[sid].writer.append_message(
            {"role": "user", "content": [{"type": "text", "text": "hi"}]})
    manager.new(cwd)
    print(len(manager.sessions), len(os.listdir("/proc/self/fd")), len(manager.list(cwd)))
    # Now make the OS refuse: use up the descriptors and ask for one more session.
    held = []
    try:
        while True:
            held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    try:
        manager.new(cwd)
    except Exception as exc:
        print(type(exc).__name__, exc)
    else:
        print("no error")
    for fd in held:
        os.close(fd)
    print(len(manager.list(cwd)))
    asyncio.run(manager.close_all())
    """
)


def test_2000_open_sessions_under_256_descriptors(tmp_path):
    # The store goes on a RAM disk when there is one: this test is about descriptors, and
    # creating 6,000 files on a busy disk takes long.
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path
    root = base / "sessions"
    env = {**os.environ, "IAC_KERNEL_SESSIONS_DIR": str(root)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", FD_SCRIPT, str(tmp_path), str(root)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    counts, error, after = done.stdout.strip().splitlines()
    open_sessions, fds, listed = (int(x) for x in counts.split())
    assert open_sessions == 2001 and listed == 2001
    assert fds < 30  # the sessions hold none
    assert "Too many open files" in error and "SessionNotFound" not in error
    assert int(after) == 2001  # the refused session left no orphan in the list


def test_any_bytes_round_trip_losslessly_and_show_readably(store, tmp_path):
    name = os.fsdecode(b"caf\xe9.tf")  # 'caf\udce9.tf'
    prompt = {"role": "user", "content": [{"type": "text", "text": "lone \ud800 surrogate"}]}
    meta = store.create(str(tmp_path))
    writer = store.open_writer(meta.session_id, "test")
    writer.append_message(prompt)
    writer.append_message(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "read_file", "input": {"path": name}}
            ],
        }
    )
    writer.append_tool_result({"type": "tool_result", "tool_use_id": "t", "content": name})
    writer.close()
    raw = (store.root / f"{meta.session_id}.jsonl").read_bytes()
    raw.decode("utf-8")  # valid UTF-8 on disk
    assert b"\\udce9" in raw and b"\\ud800" in raw  # the documented escape
    loaded = reload(store, meta.session_id)
    assert loaded.repairs == []
    assert loaded.messages[0] == prompt
    assert loaded.messages[1]["content"][0]["input"]["path"] == name
    assert os.fsencode(loaded.messages[2]["content"][0]["content"]) == b"caf\xe9.tf"
    assert readable(name) == "caf\\xe9.tf" and readable("a\ud800b") == "a\\ud800b"
    assert json_line({"k": "plain é"}) == '{"k":"plain é"}\n'.encode()


def test_listing_follows_writes_and_moves_without_rewriting_metadata(store, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    first = store.create(str(a))
    time.sleep(0.005)
    second = store.create(str(a))
    meta_file = store.root / f"{first.session_id}.json"
    stamp = meta_file.stat().st_mtime_ns
    writer = store.open_writer(first.session_id, "test")
    time.sleep(0.005)
    writer.append_message(PROMPT)
    assert meta_file.stat().st_mtime_ns == stamp  # no rewrite per message
    listed = store.list(str(a))
    assert [m.session_id for m in listed] == [first.session_id, second.session_id]
    assert listed[0].message_count == 1
    assert store.read_meta(first.session_id).message_count == 1
    writer.update(cwd=str(b))
    assert [m.session_id for m in store.list(str(a))] == [second.session_id]
    assert [m.session_id for m in store.list(str(b))] == [first.session_id]
    writer.close()
    # A second store (another process) sees the same; a lost index is rebuilt.
    assert len(SessionStore(store.root).list()) == 2
    for path in store.index.dir.iterdir():
        path.unlink()
    fresh = SessionStore(store.root)
    assert {m.session_id for m in fresh.list(str(b))} == {first.session_id}


def test_the_index_is_compacted_and_keeps_the_latest(store, tmp_path):
    meta = store.create(str(tmp_path))
    writer = store.open_writer(meta.session_id, "test")
    for i in range(300):
        writer.append_message({"role": "user", "content": f"m{i}"})
    listed = store.list(str(tmp_path))
    assert listed[0].message_count == 300
    lines = store.index.path(str(tmp_path)).read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["message_count"] == 300
    writer.append_message({"role": "user", "content": "one more"})
    assert store.list(str(tmp_path))[0].message_count == 301
    writer.close()


def test_a_stale_lock_of_a_dead_process_is_taken_over(store, tmp_path):
    meta = store.create(str(tmp_path))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from iac_kernel.sessions.store import SessionStore;"
            "SessionStore(sys.argv[1]).open_writer(sys.argv[2], 'gone')",
            str(store.root),
            meta.session_id,
        ],
        check=True,
    )
    assert done.returncode == 0
    assert store.lock_holder(meta.session_id) is None
    store.open_writer(meta.session_id, "me").close()
    assert uuid.UUID(meta.session_id)
