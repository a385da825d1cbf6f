# ruff: noqa: F811  (the fixtures imported from server_support are test arguments)
"""Editors on a remote Jupyter server: the server extension's ACP WebSocket and
``iac-kernel acp --remote``, against a real ``jupyter server`` on loopback.

The editor is the ACP SDK's client side, spawning the bridge; the bridge talks to the
server's ``/iac-kernel/acp`` with the server's token. Kernels are started through the
server's REST API, as JupyterLab starts them.
"""

from __future__ import annotations

import asyncio
import json
import queue
import signal
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from jupyter_client import BlockingKernelClient

from mcp_support import demo_entry, stdio_entry
from server_support import (  # noqa: F401  (fixtures)
    JupyterServer,
    bridge,
    root,
    server,
    server_env,
    store_of,
    user_texts,
    work,
)
from test_acp_support import WAIT, RecordingClient, wait_until

CELL_WAIT = 60.0


async def test_new_prompt_and_list_through_the_bridge(
    server: JupyterServer, root: Path, work: Path, tmp_path: Path
) -> None:
    async with bridge(server.acp_url, server.token, tmp_path / "bridge.log") as (conn, *_):
        created = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), WAIT)
        sid = created.session_id
        answer = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("editor follow-up: defaults?")]),
            WAIT,
        )
        assert answer.stop_reason == "end_turn"
        listed = (await conn.list_sessions(cwd=str(work))).sessions
        assert [s.session_id for s in listed] == [sid]
        # New sessions start inside the server's root_dir only.
        with pytest.raises(RequestError) as outside:
            await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        assert "root_dir" in json.dumps(outside.value.data)
    store = store_of(tmp_path)
    # The editor went away: the server lets the session go (a notebook can load it).
    await wait_until(lambda: store.lock_holder(sid) is None, "the session's lock to be freed")
    assert user_texts(store, sid) == ["editor follow-up: defaults?"]
    # The store on the server is the truth: listing works with no connection open.
    assert [m.session_id for m in store.list()] == [sid]
    for path in (tmp_path / "sessions").rglob("*"):
        if path.is_file():
            assert server.token not in path.read_text(errors="replace"), path


async def test_permission_question_answered_through_the_bridge(
    server: JupyterServer, work: Path, tmp_path: Path
) -> None:
    client = RecordingClient()
    client.answers.extend(["reject_once", "allow_once"])
    log = tmp_path / "bridge.log"
    async with bridge(server.acp_url, server.token, log, client) as (conn, *_):
        sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
        prompt = [text_block("write the plan note")]
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), WAIT)
        assert len(client.permissions) == 1
        assert client.permissions[0]["tool_call"].kind == "edit"
        assert not (work / "plan.txt").exists()
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), WAIT)
        assert len(client.permissions) == 2
        assert (work / "plan.txt").read_text() == "reviewed from the editor\n"


def open_to_others(directory: Path) -> list[Path]:
    """``directory`` and what is in it that another user could read or write."""
    paths = [directory, *directory.iterdir()]
    return [p for p in paths if stat.S_IMODE(p.stat().st_mode) & 0o077]


def kernel_client(server: JupyterServer, kernel_id: str) -> BlockingKernelClient:
    runtime = Path(server.env["JUPYTER_RUNTIME_DIR"])
    path = runtime / f"kernel-{kernel_id}.json"
    deadline = time.monotonic() + CELL_WAIT
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    client = BlockingKernelClient(connection_file=str(path))
    client.load_connection_file()
    # No heartbeat: a kernel slow to start on a busy machine is not a dead one. The
    # kernel_info request waits in ZMQ until the kernel is up.
    client.start_channels(hb=False)
    wait_reply(client, client.kernel_info(), "the kernel to start")
    return client


def wait_reply(client: BlockingKernelClient, msg_id: str, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + CELL_WAIT
    while time.monotonic() < deadline:
        try:
            reply = client.get_shell_msg(timeout=1)
        except queue.Empty:
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]
    raise AssertionError(f"timed out waiting for {what}")


def run_cell(client: BlockingKernelClient, code: str) -> dict[str, Any]:
    """Execute ``code`` and return its execute_reply content."""
    return wait_reply(client, client.execute(code), f"the cell {code!r}")


async def test_a_kernels_session_is_attached_live_through_the_bridge(
    server: JupyterServer, work: Path, tmp_path: Path, isolated_runtime_dir: Path
) -> None:
    # As JupyterLab opens a notebook: a session with an iac-kernel kernel.
    opened = server.api(
        "POST",
        "/api/sessions",
        {"path": "work/infra-review.ipynb", "type": "notebook", "kernel": {"name": "iac-kernel"}},
    )
    kernel = await asyncio.to_thread(kernel_client, server, opened["kernel"]["id"])
    try:
        reply = await asyncio.to_thread(run_cell, kernel, "notebook first: which inputs?")
        assert reply["status"] == "ok", reply
        store = store_of(tmp_path)
        (meta,) = store.list()
        sid = meta.session_id
        holder = store.lock_holder(sid)
        assert holder is not None and holder["pid"] != server.process.pid
        # The kernel's endpoint file (and its token) is its user's only.
        assert open_to_others(isolated_runtime_dir) == []

        async with bridge(server.acp_url, server.token, tmp_path / "bridge.log") as (
            conn,
            _process,
            client,
            wire,
        ):
            listed = (await conn.list_sessions(cwd=str(work))).sessions
            assert [s.session_id for s in listed] == [sid]
            assert listed[0].title == "infra-review"
            await asyncio.wait_for(
                conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[]), WAIT
            )
            replay = [u for u in (x for _, x in wire.updates_of(sid))]
            kinds = [u["sessionUpdate"] for u in replay]
            assert kinds[:2] == ["user_message_chunk", "agent_message_chunk"], kinds
            assert "notebook first" in replay[0]["content"]["text"]
            assert replay[1]["content"]["text"].startswith("Notebook answer one")

            client.clear()
            answer = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("editor follow-up: defaults?")]),
                WAIT,
            )
            assert answer.stop_reason == "end_turn"
            assert client.text(sid) == "Editor answer: two of them have no default."
            # The turn ran in the kernel: it still holds the session, one writer.
            assert store.lock_holder(sid)["pid"] == holder["pid"]
        assert user_texts(store, sid) == [
            "notebook first: which inputs?",
            "editor follow-up: defaults?",
        ]
    finally:
        await asyncio.to_thread(kernel.stop_channels)
        server.api("DELETE", f"/api/sessions/{opened['id']}")


async def test_a_dropped_connection_is_resumed(
    server: JupyterServer, work: Path, tmp_path: Path
) -> None:
    log = tmp_path / "bridge.log"
    async with bridge(server.acp_url, server.token, log) as (conn, process, client, _wire):
        sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
        await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("notebook first")]), WAIT
        )
        # The server goes away and comes back on the same address (a restarted pod).
        await asyncio.to_thread(server.stop)
        await wait_until(lambda: "reconnecting" in log.read_text(), "the bridge to notice")
        await asyncio.to_thread(server.start)
        await wait_until(lambda: "reconnected" in log.read_text(), "the bridge to reconnect")
        assert "1 session(s) resumed" in log.read_text()
        client.clear()
        answer = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("editor follow-up")]), WAIT
        )
        assert answer.stop_reason == "end_turn"
        assert client.text(sid) == "Editor answer: two of them have no default."
        assert process.returncode is None
    assert user_texts(store_of(tmp_path), sid) == ["notebook first", "editor follow-up"]
    assert server.token not in log.read_text()


async def test_a_turn_cut_by_a_killed_server_fails_and_the_session_goes_on(
    server: JupyterServer, work: Path, tmp_path: Path
) -> None:
    log = tmp_path / "bridge.log"
    async with bridge(server.acp_url, server.token, log) as (conn, process, client, _wire):
        sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
        turn = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=[text_block("run the slow check")])
        )
        await wait_until(lambda: client.tool_ids(sid), "the slow tool call to start")
        # The pod dies mid-turn (no clean shutdown). The bridge waits to resume; the
        # new server does not know the connection, so the turn gets an error answer.
        await asyncio.to_thread(server.stop, signal.SIGKILL)
        await wait_until(lambda: "reconnecting" in log.read_text(), "the bridge to notice")
        assert not turn.done()
        await asyncio.to_thread(server.start)
        with pytest.raises(RequestError) as lost:
            await asyncio.wait_for(turn, WAIT)
        assert "connection to the server was lost" in json.dumps(lost.value.data)
        await wait_until(lambda: "reconnected" in log.read_text(), "the bridge to reconnect")
        assert "1 session(s) resumed" in log.read_text()
        client.clear()
        answer = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("after the crash")]), WAIT
        )
        assert answer.stop_reason == "end_turn"
        assert client.text(sid) == "Continuing from the stored history."
        assert process.returncode is None
    assert user_texts(store_of(tmp_path), sid)[-1] == "after the crash"


async def test_the_bridge_gives_up_when_the_server_stays_away(
    server: JupyterServer, work: Path, tmp_path: Path
) -> None:
    log = tmp_path / "bridge.log"
    window = {"IAC_KERNEL_REMOTE_RECONNECT": "3"}
    async with bridge(server.acp_url, server.token, log, **window) as (conn, process, *_):
        sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
        await asyncio.to_thread(server.stop, signal.SIGKILL)
        await wait_until(lambda: "reconnecting" in log.read_text(), "the bridge to notice")
        with pytest.raises(RequestError) as failed:
            await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("editor follow-up")]), WAIT
            )
        assert "unreachable" in json.dumps(failed.value.data)
        assert await asyncio.wait_for(process.wait(), WAIT) == 1
    lines = log.read_text().strip().splitlines()
    assert "not restored" in lines[-1] and "cannot reach" in lines[-1], lines


async def test_fork_and_cancel_through_the_bridge(
    server: JupyterServer, work: Path, tmp_path: Path
) -> None:
    async with bridge(server.acp_url, server.token, tmp_path / "bridge.log") as (
        conn,
        _process,
        client,
        _wire,
    ):
        sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
        await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("notebook first")]), WAIT
        )
        fork = await asyncio.wait_for(
            conn.fork_session(session_id=sid, cwd=str(work), mcp_servers=[]), WAIT
        )
        assert fork.session_id != sid
        listed = {s.session_id for s in (await conn.list_sessions(cwd=str(work))).sessions}
        assert listed == {sid, fork.session_id}

        turn = asyncio.ensure_future(
            conn.prompt(session_id=fork.session_id, prompt=[text_block("run the slow check")])
        )
        await wait_until(lambda: client.tool_ids(fork.session_id), "the slow tool call")
        await conn.cancel(session_id=fork.session_id)
        answer = await asyncio.wait_for(turn, WAIT)
        assert answer.stop_reason == "cancelled"
    store = store_of(tmp_path)
    assert user_texts(store, fork.session_id)[0] == "notebook first"


async def test_the_editors_mcp_servers_run_on_the_server(
    root: Path, work: Path, tmp_path: Path, isolated_runtime_dir: Path
) -> None:
    """A stdio MCP server the server can run works; one only the laptop has is reported
    failed in the answer's ``_meta``, and the session works without it."""
    script = Path(__file__).parent / "scripts" / "acp_mcp.json"
    jupyter = JupyterServer(root, server_env(tmp_path, isolated_runtime_dir, script))
    await asyncio.to_thread(jupyter.start)
    try:
        servers = [demo_entry("demo"), stdio_entry("laptop", "/Users/me/bin/mcp-tool", [])]
        log = tmp_path / "bridge.log"
        async with bridge(jupyter.acp_url, jupyter.token, log) as (conn, _p, client, wire):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=servers)).session_id
            (created,) = [
                m["result"] for m in wire.incoming if "sessionId" in (m.get("result") or {})
            ]
            statuses = created["_meta"]["iac_kernel"]["mcpServers"]
            states = {s["name"]: s["status"] for s in statuses}
            assert states == {"demo": "running", "laptop": "failed"}
            answer = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("add after the crash")]), WAIT
            )
            assert answer.stop_reason == "end_turn"
            call = client.tool_ids(sid)[-1]
            assert client.final_status(sid, call) == "completed"
    finally:
        await asyncio.to_thread(jupyter.stop)
