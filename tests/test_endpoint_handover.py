"""Hand a notebook session to an editor and back, through the kernel's ACP endpoint.

A real kernel (jupyter_client) and a real ``iac-kernel acp`` (the SDK's client side):
the editor lists the notebook's session, loads it (history replayed from the kernel),
prompts it (the turn runs in the kernel; updates and permission questions reach the
editor), and the notebook's next cell shows the editor's turn. Also: a kernel killed
mid-turn leaves a session ``iac-kernel acp`` loads from disk, repaired; the endpoint
refuses connections without the token; and there is never a second writer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

from iac_kernel.acp.attach.runtime import EndpointInfo, live_endpoints
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from iac_kernel.sessions.store import SessionLockedError, SessionStore
from kernel_harness import KernelHarness, scripted_kernel
from test_acp_support import WAIT, RecordingClient, acp_server, wait_until

SCRIPT = Path(__file__).parent / "scripts" / "endpoint_main.json"
NOTEBOOK = "infra-review.ipynb"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def work(root: Path) -> Path:
    path = root / "work"
    path.mkdir()
    return Path(os.path.realpath(path))


@pytest.fixture
def run_dir(isolated_runtime_dir: Path) -> Path:
    return isolated_runtime_dir


def start_kernel(root: Path, work: Path, run_dir: Path, **env: str) -> KernelHarness:
    return scripted_kernel(
        root,
        work,
        SCRIPT,
        {
            "IAC_KERNEL_RUNTIME_DIR": str(run_dir),
            "JPY_SESSION_NAME": str(work / NOTEBOOK),
            **env,
        },
    )


@pytest.fixture
def kernel(root: Path, work: Path, run_dir: Path) -> Iterator[KernelHarness]:
    harness = start_kernel(root, work, run_dir)
    try:
        yield harness
    finally:
        harness.stop()


def editor_env(root: Path, run_dir: Path) -> dict[str, str]:
    """``iac-kernel acp`` sharing the kernel's store and runtime directory."""
    return {
        "IAC_KERNEL_SESSIONS_DIR": str(root / "sessions"),
        "IAC_KERNEL_RUNTIME_DIR": str(run_dir),
        "IAC_KERNEL_SCRIPT": str(SCRIPT),
        "IAC_KERNEL_LOG_LEVEL": "INFO",
    }


async def cell(kernel: KernelHarness, code: str) -> Any:
    """Run a cell without blocking the loop (the editor's client keeps answering)."""
    return await asyncio.to_thread(kernel.execute, code)


def endpoint_of(run_dir: Path) -> EndpointInfo:
    found = live_endpoints(run_dir)
    assert len(found) == 1, f"expected one kernel endpoint, found {found}"
    return found[0]


def texts(messages: list[dict[str, Any]], role: str) -> list[str]:
    out = []
    for message in messages:
        if message["role"] != role:
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        joined = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if joined:
            out.append(joined)
    return out


async def test_editor_lists_loads_and_prompts_the_notebook_session(
    kernel: KernelHarness, root: Path, work: Path, run_dir: Path
) -> None:
    first = await cell(kernel, "notebook first: which inputs does the module take?")
    assert first.status == "ok", first.markdown()
    info = endpoint_of(run_dir)
    assert len(info.sessions) == 1
    sid = info.sessions[0]
    store = SessionStore(root / "sessions")

    async with acp_server(root, env=editor_env(root, run_dir)) as (conn, _proc, client, wire):
        listed = (await conn.list_sessions(cwd=str(work))).sessions
        assert [s.session_id for s in listed] == [sid]
        assert listed[0].title == "infra-review"  # from the notebook's name
        assert listed[0].updated_at == store.read_meta(sid).updated_at

        await asyncio.wait_for(
            conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[]), WAIT
        )
        load_answer = wire.index_of_answer(lambda m: "modes" in (m.get("result") or {}))
        replay = [(i, u) for i, u in wire.updates_of(sid) if i < load_answer]
        kinds = [u["sessionUpdate"] for _, u in replay]
        assert kinds[:2] == ["user_message_chunk", "agent_message_chunk"], kinds
        assert "notebook first" in replay[0][1]["content"]["text"]
        assert replay[1][1]["content"]["text"].startswith("Notebook answer one")
        # As from a local session: the title (and the commands) come with the load,
        # before its answer; nothing of the load follows the answer.
        info_at = [
            i for i, u in wire.updates_of(sid) if u["sessionUpdate"] == "session_info_update"
        ]
        assert info_at and info_at[0] < load_answer
        assert kinds[-1] == "available_commands_update"
        assert [u for i, u in wire.updates_of(sid) if i > load_answer] == []

        client.clear()
        before = len(wire.incoming)
        answer = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("editor follow-up: any defaults?")]),
            WAIT,
        )
        assert answer.stop_reason == "end_turn"
        assert client.text(sid) == "Editor answer: two of them have no default."
        prompt_answer = wire.index_of_answer(lambda m: (m.get("result") or {}).get("stopReason"))
        chunks = [
            i
            for i, u in wire.updates_of(sid)
            if i >= before and u["sessionUpdate"] == "agent_message_chunk"
        ]
        assert chunks and max(chunks) < prompt_answer  # streamed before the answer

        # The editor's turn ran in the kernel: the kernel still holds the lock.
        assert store.lock_holder(sid)["pid"] == info.pid

    second = await cell(kernel, "notebook again: and now?")
    assert second.status == "ok", second.markdown()
    shown = second.markdown()
    assert "From the editor" in shown
    assert "editor follow-up: any defaults?" in shown
    assert "Editor answer: two of them have no default." in shown
    assert second.answer() == "Notebook answer two: back in the notebook."
    first_display = next(m for m in second.messages if m["msg_type"] == "display_data")
    assert "From the editor" in first_display["content"]["data"]["text/markdown"]

    history = store.read(sid).messages
    assert texts(history, "user") == [
        "notebook first: which inputs does the module take?",
        "editor follow-up: any defaults?",
        "notebook again: and now?",
    ]
    assert texts(history, "assistant") == [
        "Notebook answer one: the module has three inputs.",
        "Editor answer: two of them have no default.",
        "Notebook answer two: back in the notebook.",
    ]
    # Shown once: the next cell has nothing new from the editor.
    third = await cell(kernel, "%session")
    assert "From the editor" not in third.markdown()


async def test_editor_answers_permission_for_a_turn_run_in_the_kernel(
    kernel: KernelHarness, root: Path, work: Path, run_dir: Path
) -> None:
    assert (await cell(kernel, "notebook first")).status == "ok"
    sid = endpoint_of(run_dir).sessions[0]
    target = work / "plan.txt"
    store = SessionStore(root / "sessions")
    client = RecordingClient()
    client.answers.extend(["hold", "allow_once"])
    async with acp_server(root, client, env=editor_env(root, run_dir)) as (conn, *_rest):
        await conn.resume_session(cwd=str(work), session_id=sid, mcp_servers=[])
        prompt = [text_block("write the plan note")]

        first_turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt))
        await wait_until(lambda: client.permissions, "the permission request")
        asked = client.permissions[0]
        assert asked["session_id"] == sid
        assert asked["tool_call"].kind == "edit"
        assert "allow_once" in [o.option_id for o in asked["options"]]
        # While the editor's turn waits, the notebook cannot start a second loop on it.
        busy = await cell(kernel, "notebook again")
        assert busy.status == "error"
        assert "an editor is running a turn" in busy.reply["content"]["evalue"]

        client.release("reject_once")
        refused = await asyncio.wait_for(first_turn, WAIT)
        assert refused.stop_reason == "end_turn"
        assert not target.exists()
        assert client.final_status(sid, client.tool_ids(sid)[-1]) == "failed"

        allowed = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), WAIT)
        assert allowed.stop_reason == "end_turn"
        assert len(client.permissions) == 2
        assert target.read_text() == "reviewed from the editor\n"
        assert client.final_status(sid, client.tool_ids(sid)[-1]) == "completed"

        # The notebook moves on (%new): it shows the editor's turns, then lets the
        # session go, and the editor's next load opens it from the store.
        switched = (await cell(kernel, "%new")).markdown()
        assert switched.count("**Prompt:** write the plan note") == 2
        assert "Tools: `write_file" in switched
        assert endpoint_of(run_dir).sessions not in ([], [sid])
        with pytest.raises(RequestError) as released:
            await conn.prompt(session_id=sid, prompt=[text_block("editor follow-up")])
        assert "no longer holds" in json.dumps(released.value.data)
        await asyncio.wait_for(
            conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[]), WAIT
        )
        assert store.lock_holder(sid)["holder"].startswith("iac-kernel acp")
        again = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("editor follow-up")]), WAIT
        )
        assert again.stop_reason == "end_turn"
    assert texts(store.read(sid).messages, "assistant")[-1] == (
        "Editor answer: two of them have no default."
    )


async def test_kernel_killed_mid_turn_then_the_editor_loads_it_from_disk(
    root: Path, work: Path, run_dir: Path
) -> None:
    kernel = start_kernel(root, work, run_dir)
    try:
        assert (await cell(kernel, "notebook first")).status == "ok"
        info = endpoint_of(run_dir)
        sid = info.sessions[0]
        client = RecordingClient()
        client.answers.append("hold")  # the turn waits on the editor's answer
        async with acp_server(root, client, env=editor_env(root, run_dir)) as (conn, *_rest):
            await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
            turn = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=[text_block("run the slow check")])
            )
            await wait_until(lambda: client.permissions, "the permission request")
            call_id = client.tool_ids(sid)[-1]

            os.kill(info.pid, signal.SIGKILL)
            await asyncio.to_thread(kernel.km.provisioner.process.wait)
            with pytest.raises(RequestError) as failed:
                await asyncio.wait_for(turn, WAIT)
            assert failed.value.code == -32603
            assert "send session/load again" in json.dumps(failed.value.data)
            assert client.final_status(sid, call_id) == "failed"  # the editor's card closes
            client.release("allow_once")

            client.clear()
            await asyncio.wait_for(
                conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[]), WAIT
            )
            replayed = [u.session_update for u in client.of(sid)]
            assert "tool_call" in replayed
            assert client.final_status(sid, call_id) == "failed"
            store = SessionStore(root / "sessions")
            repaired = store.read(sid).messages[-1]
            assert repaired["role"] == "user"
            assert repaired["content"][0]["tool_use_id"] == call_id
            assert repaired["content"][0]["is_error"] is True
            assert store.lock_holder(sid)["holder"].startswith("iac-kernel acp")

            client.clear()
            again = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("after the crash")]), WAIT
            )
            assert again.stop_reason == "end_turn"
            assert client.text(sid) == "Continuing from the stored history."
        # The dead kernel's runtime file is cleaned up by the next reader.
        assert live_endpoints(run_dir) == []
        assert not (run_dir / f"kernel-{info.pid}.json").exists()
    finally:
        kernel.km.shutdown_kernel(now=True)
        kernel.stop()


async def raw_exchange(socket_path: str, first_line: bytes) -> list[dict[str, Any]]:
    """Send one line, then read everything until the endpoint closes the connection."""
    reader, writer = await asyncio.open_unix_connection(socket_path)
    try:
        writer.write(first_line)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), WAIT)  # returns at EOF only
    finally:
        writer.close()
    return [json.loads(line) for line in data.splitlines() if line.strip()]


async def test_endpoint_refuses_connections_without_the_token(
    kernel: KernelHarness, run_dir: Path
) -> None:
    assert (await cell(kernel, "notebook first")).status == "ok"
    info = endpoint_of(run_dir)
    assert private_modes(run_dir, info) == (0o700, 0o600, 0o600)

    initialize = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {"protocolVersion": 1},
    }
    wrong = await raw_exchange(info.socket, b'{"token": "not-the-token"}\n')
    assert len(wrong) == 1
    assert wrong[0]["error"]["code"] == -32600
    assert wrong[0]["error"]["message"] == "unauthorized"

    missing = await raw_exchange(info.socket, json.dumps(initialize).encode() + b"\n")
    assert len(missing) == 1 and "result" not in missing[0]
    assert missing[0]["id"] == 7 and missing[0]["error"]["message"] == "unauthorized"

    # The same request after the right token is answered.
    reader, writer = await asyncio.open_unix_connection(info.socket)
    try:
        writer.write(json.dumps({"token": info.token}).encode() + b"\n")
        writer.write(json.dumps(initialize).encode() + b"\n")
        await writer.drain()
        answer = json.loads(await asyncio.wait_for(reader.readline(), WAIT))
    finally:
        writer.close()
    assert answer["id"] == 7 and answer["result"]["protocolVersion"] == 1
    # The refusals were logged to the kernel's own stderr, not into a notebook cell.
    streamed = await asyncio.to_thread(iopub_streams_until_next_cell, kernel)
    assert not [text for text in streamed if "refused" in text], streamed

    await asyncio.to_thread(kernel.stop)
    assert leftovers(run_dir, info) == []


def iopub_streams_until_next_cell(kernel: KernelHarness) -> list[str]:
    """Every stream text on IOPub, whatever its parent, up to the end of a new cell
    (ipykernel flushes pending stream output before a cell's reply)."""
    msg_id = kernel.kc.execute("%session")
    texts = []
    while True:
        message = kernel.kc.get_iopub_msg(timeout=WAIT)
        if message["msg_type"] == "stream":
            texts.append(message["content"]["text"])
        if (
            message["msg_type"] == "status"
            and message["content"]["execution_state"] == "idle"
            and message["parent_header"].get("msg_id") == msg_id
        ):
            return texts


def private_modes(run_dir: Path, info: EndpointInfo) -> tuple[int, ...]:
    """Permission bits of the runtime directory, the runtime file and the socket."""
    files = (run_dir, run_dir / f"kernel-{info.pid}.json", Path(info.socket))
    return tuple(stat.S_IMODE(path.stat().st_mode) for path in files)


def leftovers(run_dir: Path, info: EndpointInfo) -> list[Path]:
    """The endpoint's files still on disk."""
    files = (run_dir / f"kernel-{info.pid}.json", Path(info.socket))
    return [path for path in files if path.exists()]


async def test_one_writer_the_loser_is_told_who_holds_the_session(
    root: Path, work: Path, run_dir: Path
) -> None:
    # No endpoint: nothing can attach, so the lock alone decides.
    kernel = start_kernel(root, work, run_dir, IAC_KERNEL_ENDPOINT="off")
    try:
        assert (await cell(kernel, "notebook first")).status == "ok"
        assert live_endpoints(run_dir) == []
        store = SessionStore(root / "sessions")
        (meta,) = store.list(str(work))
        sid = meta.session_id
        kernel_pid = store.lock_holder(sid)["pid"]
        assert kernel_pid != os.getpid()

        settings = Settings.from_env()
        settings.sessions_dir = root / "sessions"
        other = SessionManager(settings, holder="a test writer")
        with pytest.raises(SessionLockedError) as locked:
            other.load(sid)
        assert locked.value.holder["pid"] == kernel_pid
        assert f"iac-kernel Jupyter kernel (pid {kernel_pid}" in str(locked.value)

        async with acp_server(root, env=editor_env(root, run_dir)) as (conn, *_rest):
            with pytest.raises(RequestError) as refused:
                await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
            assert refused.value.code == -32602
            detail = refused.value.data["session_id"]
            assert "Session is in use" in detail and f"pid {kernel_pid}" in detail
            assert "Traceback" not in json.dumps(refused.value.data)

            # And the other way round: the editor's own session is not the kernel's.
            mine = await conn.new_session(cwd=str(work), mcp_servers=[])
            taken = await cell(kernel, f"%load {mine.session_id}")
            assert taken.status == "error"
            assert "iac-kernel acp (pid" in taken.reply["content"]["evalue"]
    finally:
        kernel.stop()
