"""The store never follows a symbolic link: a session log, metadata file, lock or index
replaced by a link is refused with a clear error and nothing is written or read outside
the store (issue 23 point 4)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from iac_kernel.sessions.files import StoreLinkError
from iac_kernel.sessions.store import SessionStore

PROMPT = {"role": "user", "content": [{"type": "text", "text": "plan the vpc"}]}


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside.txt"
    target.write_text("precious\n")
    target.chmod(0o644)
    return target


def link(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


def hard_link(path: Path, target: Path) -> None:
    path.unlink()
    os.link(target, path)


@pytest.mark.parametrize("kind", ["symbolic link", "hard-linked"])
def test_a_linked_log_is_refused_for_writes_and_reads(store, tmp_path, outside, kind):
    """A log that is a symlink, or a file that is also a name elsewhere (a hard link:
    its bytes are not the store's alone), is refused."""
    meta = store.create(str(tmp_path))
    writer = store.open_writer(meta.session_id, "test")
    writer.append_message(PROMPT)
    (link if kind == "symbolic link" else hard_link)(
        store.root / f"{meta.session_id}.jsonl", outside
    )
    with pytest.raises(StoreLinkError, match=kind):
        writer.append_message(PROMPT)
    with pytest.raises(StoreLinkError, match=kind):
        store.read(meta.session_id)
    writer.close()
    assert outside.read_text() == "precious\n"
    assert oct(outside.stat().st_mode & 0o777) == "0o644"


def test_a_symlinked_metadata_file_is_refused(store, tmp_path, outside):
    meta = store.create(str(tmp_path))
    link(store.root / f"{meta.session_id}.json", outside)
    with pytest.raises(StoreLinkError):
        store.read_meta(meta.session_id)
    with pytest.raises(StoreLinkError):
        store.write_meta(meta)
    assert outside.read_text() == "precious\n"
    assert (store.root / f"{meta.session_id}.json").is_symlink()  # not replaced either


def test_a_symlinked_lock_is_refused(store, tmp_path, outside):
    meta = store.create(str(tmp_path))
    (store.root / f"{meta.session_id}.lock").symlink_to(outside)
    with pytest.raises(StoreLinkError):
        store.open_writer(meta.session_id, "test")
    assert outside.read_text() == "precious\n"


def test_a_symlinked_index_is_refused(store, tmp_path, outside):
    store.create(str(tmp_path))
    index = store.index.path(str(tmp_path))
    assert index.is_file()
    link(index, outside)
    store.index._cache.clear()
    with pytest.raises(StoreLinkError):
        store.create(str(tmp_path))
    assert outside.read_text() == "precious\n"


def test_a_symlinked_index_folder_is_refused(tmp_path, outside):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "sessions"
    root.mkdir()
    fresh = SessionStore(root)
    os.symlink(elsewhere, fresh.index.dir)
    with pytest.raises(StoreLinkError):
        fresh.create(str(tmp_path))
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("kind", ["symbolic link", "hard-linked"])
async def test_acp_load_of_a_linked_log_is_a_clear_error(tmp_path: Path, outside: Path, kind: str):
    from test_acp_support import RawServer, server_env

    sessions = tmp_path / "store"
    env = server_env(IAC_KERNEL_SESSIONS_DIR=str(sessions))
    async with RawServer.start(env, tmp_path / "err.log") as server:
        await server.initialize()
        new = await server.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = new["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}
        assert "result" in await server.call("session/prompt", prompt)
        await server.call("session/close", {"sessionId": sid})
        (link if kind == "symbolic link" else hard_link)(sessions / f"{sid}.jsonl", outside)
        load = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        answer = await server.call("session/load", load)
        assert kind in json.dumps(answer["error"])
        assert "Traceback" not in json.dumps(answer["error"])
        assert "result" in await server.call("session/list", {"cwd": str(tmp_path)})
    assert await asyncio.to_thread(outside.read_text) == "precious\n"


def test_a_store_root_the_user_linked_is_followed_once(tmp_path):
    real = tmp_path / "real-sessions"
    real.mkdir()
    (tmp_path / "linked").symlink_to(real)
    store = SessionStore(tmp_path / "linked")
    meta = store.create(str(tmp_path))
    assert (real / f"{meta.session_id}.jsonl").is_file()


def test_a_hard_linked_metadata_file_is_refused(store, tmp_path, outside):
    meta = store.create(str(tmp_path))
    hard_link(store.root / f"{meta.session_id}.json", outside)
    with pytest.raises(StoreLinkError, match="hard-linked"):
        store.read_meta(meta.session_id)
    assert outside.read_text() == "precious\n"


def test_a_hard_linked_audit_log_is_refused(tmp_path, outside):
    from iac_kernel.sessions.audit import AuditLog

    log = AuditLog(tmp_path / "store")
    log.append({"outcome": "applied"})
    hard_link(log.path, outside)
    with pytest.raises(StoreLinkError):
        log.append({"outcome": "applied"})
    with pytest.raises(StoreLinkError):
        log.records()
    assert outside.read_text() == "precious\n"


def test_control_a_normal_store_works(store, tmp_path):
    meta = store.create(str(tmp_path))
    writer = store.open_writer(meta.session_id, "test")
    writer.append_message(PROMPT)
    writer.close()
    assert store.read(meta.session_id).messages[-1] == PROMPT
    assert [m.session_id for m in store.list(str(tmp_path))] == [meta.session_id]


def test_a_store_folder_swapped_for_a_link_after_start_is_refused(tmp_path, outside):
    """Files are opened under their folder's descriptor, the folder opened without
    following a link: the store root replaced by a link once the store is running is
    refused, not followed (the check and the open are one step)."""
    store = SessionStore(tmp_path / "sessions")
    meta = store.create(str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / "sessions").rename(elsewhere)
    (tmp_path / "sessions").symlink_to(elsewhere)
    with pytest.raises(StoreLinkError, match="symbolic link"):
        store.read_meta(meta.session_id)
    with pytest.raises(StoreLinkError):
        store.read(meta.session_id)


async def test_acp_a_store_swapped_for_a_link_is_one_error_not_a_dead_server(tmp_path: Path):
    from test_acp_support import RawServer, server_env

    sessions = tmp_path / "store"
    env = server_env(IAC_KERNEL_SESSIONS_DIR=str(sessions))
    async with RawServer.start(env, tmp_path / "err.log") as server:
        await server.initialize()
        new = await server.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = new["result"]["sessionId"]
        await server.call("session/close", {"sessionId": sid})
        elsewhere = tmp_path / "elsewhere"
        await asyncio.to_thread(sessions.rename, elsewhere)
        await asyncio.to_thread(sessions.symlink_to, elsewhere)
        for method, params in (
            ("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}),
            ("session/new", {"cwd": str(tmp_path), "mcpServers": []}),
        ):
            answer = await server.call(method, params)
            error = answer["error"]
            assert error["code"] in (-32603, -32602), (method, answer)
            assert "symbolic link" in json.dumps(error) and "Traceback" not in json.dumps(error)
        await asyncio.to_thread(sessions.unlink)
        await asyncio.to_thread(elsewhere.rename, sessions)
        assert "result" in await server.call("session/list", {"cwd": str(tmp_path)})


def _link_the_index(sessions: Path, cwd: Path, outside: Path, what: str) -> Path:
    """A store whose index of ``cwd`` (the file, or the whole index folder) is a link."""
    store = SessionStore(sessions)
    store.remove(store.create(str(cwd)).session_id)  # a ready index, no session
    if what == "index file":
        index = store.index.path(str(cwd))
        link(index, outside)
        return index
    elsewhere = sessions.parent / "elsewhere"
    store.index.dir.rename(elsewhere)
    store.index.dir.symlink_to(elsewhere)
    return store.index.dir


@pytest.mark.parametrize("what", ["index file", "index folder"])
async def test_acp_a_linked_index_at_the_first_session_new_is_one_error_not_a_dead_server(
    tmp_path: Path, outside: Path, what: str
):
    """Issue 42: initialize and session/new written at spawn (both answered before the
    SDK is imported): the refused index is one JSON-RPC error, a readable line, and the
    server goes on; with the link gone a session/new succeeds."""
    from test_acp_support import RawServer, server_env

    sessions = tmp_path / "store"
    index = await asyncio.to_thread(_link_the_index, sessions, tmp_path, outside, what)
    env = server_env(IAC_KERNEL_SESSIONS_DIR=str(sessions))
    new = {"cwd": str(tmp_path), "mcpServers": []}
    async with RawServer.start(env, tmp_path / "err.log") as server:
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": 1}})  # fmt: skip
        await server.send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new})
        assert "result" in await server.answer(1)
        error = (await server.answer(2))["error"]
        assert error["code"] in (-32603, -32602), error
        details = error["data"]["details"]
        assert details == f"refusing to follow a symbolic link in the session store: {index}"
        listed = await server.call("session/list", {"cwd": str(tmp_path)})
        assert "symbolic link" in listed["error"]["data"]["details"]
        await asyncio.to_thread(index.unlink)
        created = await server.call("session/new", new)
        session_id = created["result"]["sessionId"]
        listed = await server.call("session/list", {"cwd": str(tmp_path)})
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [session_id]
    log = await asyncio.to_thread((tmp_path / "err.log").read_text)
    assert "Traceback" not in log, log
    assert await asyncio.to_thread(outside.read_text) == "precious\n"
