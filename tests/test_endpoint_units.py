"""The endpoint's parts in one process: runtime files, the token line, the proxy against
an in-process endpoint, and the notebook's record of editor turns."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from iac_kernel.acp.attach.proxy import AttachError, RemoteSession
from iac_kernel.acp.attach.runtime import (
    EndpointInfo,
    ensure_private_dir,
    find_endpoint,
    info_path,
    live_endpoints,
    write_info,
)
from iac_kernel.acp.protocol.client_features import ClientFeatures
from iac_kernel.acp.serve.endpoint import parse_token_line, start_endpoint, unauthorized
from iac_kernel.agent.manager import SessionManager
from iac_kernel.agent.session import AgentSession
from iac_kernel.config import Settings
from iac_kernel.kernel.session.editors import EditorTurns, summary_markdown
from store_support import dangling_tool_uses
from test_acp_support import wait_until

SCRIPT = Path(__file__).parent / "scripts" / "endpoint_main.json"


@pytest.fixture
def manager() -> SessionManager:
    settings = Settings.from_env()
    settings.script = str(SCRIPT)
    settings.model = "scripted"
    return SessionManager(settings, holder="a test kernel", origin="kernel")


async def prompt(session: AgentSession, text: str) -> None:
    await session.prompt([{"type": "text", "text": text}], lambda _event: None, None)


class FakeEditor:
    """The editor side of a proxy: records updates, answers permission questions."""

    def __init__(self, hold: bool = False) -> None:
        self.updates: list[dict[str, Any]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        #: With ``hold``, permission questions are never answered.
        self.hold = hold

    async def forward_update(self, params: dict[str, Any]) -> None:
        self.updates.append(params)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.requests.append((method, params))
        if self.hold:
            await asyncio.Event().wait()
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


# -- runtime files ---------------------------------------------------------------------------


def info_for(pid: int, sock: Path, sessions: list[str]) -> EndpointInfo:
    return EndpointInfo(pid=pid, socket=str(sock), token="t0k", started="now", sessions=sessions)


def test_runtime_file_is_private_and_found_by_session(tmp_path: Path) -> None:
    run = ensure_private_dir(tmp_path / "run")
    path = write_info(run, info_for(os.getpid(), run / "k.sock", ["s-1"]))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    found = find_endpoint("s-1", directory=run)
    assert found is not None and found.token == "t0k" and found.pid == os.getpid()
    assert find_endpoint("s-2", directory=run) is None
    # The lock's holder decides: another pid's file does not capture the session.
    assert find_endpoint("s-1", holder_pid=os.getpid() + 1, directory=run) is None


def test_runtime_files_of_dead_processes_are_removed(tmp_path: Path) -> None:
    run = ensure_private_dir(tmp_path / "run")
    dead = subprocess.Popen(["true"])
    dead.wait()
    sock_path = run / f"kernel-{dead.pid}.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_path))
    listener.close()
    stale = write_info(run, info_for(dead.pid, sock_path, ["s-1"]))
    broken = run / "kernel-99.json"
    broken.write_text("{not json")
    assert live_endpoints(run) == []
    assert not stale.exists() and not sock_path.exists()
    assert broken.exists()  # unreadable: skipped, not ours to judge


def test_private_dir_is_tightened(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    ensure_private_dir(loose)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700


def test_runtime_info_rejects_wrong_types() -> None:
    assert EndpointInfo.from_dict({"pid": "1", "socket": "s", "token": "t"}) is None
    assert EndpointInfo.from_dict({"pid": 1, "socket": "s", "token": "t", "sessions": [1]}) is None
    assert EndpointInfo.from_dict([]) is None
    assert EndpointInfo.from_dict({"pid": 1, "socket": "s", "token": "t"}).sessions == []


# -- the token line ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "token", "request_id"),
    [
        (b'{"token": "abc"}\n', "abc", None),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "initialize"}\n', None, 3),
        (b'{"token": 5, "id": "x"}\n', None, "x"),
        (b"not json\n", None, None),
        (b"[1, 2]\n", None, None),
        (b"", None, None),
        (b'{"id": {"nested": 1}}\n', None, None),
    ],
)
def test_parse_token_line(line: bytes, token: str | None, request_id: Any) -> None:
    assert parse_token_line(line) == (token, request_id)


def test_unauthorized_is_one_json_rpc_error_line() -> None:
    line = unauthorized(3, "wrong token")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    message = json.loads(line)
    assert message["id"] == 3 and message["error"]["code"] == -32600


# -- proxy and endpoint in one process -------------------------------------------------------


async def test_proxy_loads_prompts_and_detaches(
    manager: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    session = manager.new(str(workspace), title="nb")
    sid = session.session_id
    await prompt(session, "notebook first")
    endpoint = await start_endpoint(manager, runtime_dir=tmp_path / "run", sessions=[sid])
    editor = FakeEditor()
    remote = await RemoteSession.attach(sid, endpoint.info, editor)
    try:
        params = {"cwd": str(workspace), "sessionId": sid, "mcpServers": []}
        loaded = await remote.forward("session/load", params)
        assert "modes" in loaded
        kinds = [u["update"]["sessionUpdate"] for u in editor.updates]
        assert kinds[:2] == ["user_message_chunk", "agent_message_chunk"]  # before the answer

        editor.updates.clear()
        answer = await remote.forward(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "write the plan note"}]},
        )
        assert answer["stopReason"] == "end_turn"
        assert [method for method, _ in editor.requests] == ["session/request_permission"]
        assert (workspace / "plan.txt").read_text() == "reviewed from the editor\n"
        assert len(session.conversation.messages) == 6  # the same runtime took the turn

        with pytest.raises(RequestError) as refused:
            await remote.forward("session/new", {"cwd": str(workspace), "mcpServers": []})
        assert refused.value.code == -32602
        assert await remote.forward("session/close", {"sessionId": sid}) == {}
        assert not session.closed and manager.sessions[sid] is session
    finally:
        await remote.close()
        await endpoint.close()
    assert not info_path(endpoint.directory).exists() and not endpoint.socket_path.exists()


async def test_the_kernel_sends_what_the_editor_declared(
    manager: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    """Schema 1.25: the editor's capabilities reach the kernel's agent (boolean options
    in its answers), and a typed confirmation the kernel asks goes on to the editor."""
    session = manager.new(str(workspace), title="nb")
    sid = session.session_id
    endpoint = await start_endpoint(manager, runtime_dir=tmp_path / "run", sessions=[sid])
    editor = FakeEditor()
    editor.features = ClientFeatures(
        {"session": {"configOptions": {"boolean": {}}}, "elicitation": {"form": {}}}
    )
    remote = await RemoteSession.attach(sid, endpoint.info, editor)
    try:
        params = {"cwd": str(workspace), "sessionId": sid, "mcpServers": []}
        loaded = await remote.forward("session/load", params)
        kinds = {option["type"] for option in loaded["configOptions"]}
        assert kinds == {"select", "boolean"}
        asked = {"sessionId": sid, "mode": "form", "message": "type it", "requestedSchema": {}}
        await remote._from_kernel("elicitation/create", asked, False)
        assert editor.requests == [("elicitation/create", asked)]
    finally:
        await remote.close()
        await endpoint.close()


async def test_proxy_with_a_wrong_token_cannot_attach(
    manager: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    session = manager.new(str(workspace))
    endpoint = await start_endpoint(
        manager, runtime_dir=tmp_path / "run", sessions=[session.session_id]
    )
    try:
        forged = dataclasses.replace(endpoint.info, token="guess")
        with pytest.raises(AttachError, match="could not attach"):
            await RemoteSession.attach(session.session_id, forged, FakeEditor())
    finally:
        await endpoint.close()


async def test_proxy_notices_the_kernel_released_the_session(
    manager: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    session = manager.new(str(workspace))
    sid = session.session_id
    endpoint = await start_endpoint(manager, runtime_dir=tmp_path / "run", sessions=[sid])
    remote = await RemoteSession.attach(sid, endpoint.info, FakeEditor())
    try:
        await manager.close(sid)  # the notebook ran %new
        with pytest.raises(RequestError) as released:
            await remote.forward(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
            )
        assert "no longer holds" in json.dumps(released.value.data)
        assert remote.released and remote.gone
    finally:
        await remote.close()
        await endpoint.close()


async def test_editor_leaving_mid_turn_cancels_its_turn_in_the_kernel(
    manager: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    session = manager.new(str(workspace))
    sid = session.session_id
    endpoint = await start_endpoint(manager, runtime_dir=tmp_path / "run", sessions=[sid])
    editor = FakeEditor(hold=True)
    remote = await RemoteSession.attach(sid, endpoint.info, editor)
    try:
        turn = asyncio.ensure_future(
            remote.forward(
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "write the plan note"}]},
            )
        )
        await wait_until(lambda: editor.requests, "the permission question")
        assert session.busy
        await remote.close()  # the editor went away
        await wait_until(lambda: not session.busy, "the kernel to cancel the turn")
        with pytest.raises(RequestError):
            await turn
        assert not session.closed  # still the notebook's
        assert dangling_tool_uses(session.conversation.messages) == []
        assert not (workspace / "plan.txt").exists()
    finally:
        await endpoint.close()


# -- the notebook's record of editor turns -----------------------------------------------------


async def test_editor_turns_are_recorded_once_and_notebook_turns_never(
    manager: SessionManager, workspace: Path
) -> None:
    session = manager.new(str(workspace))
    in_notebook = {"now": True}
    turns = EditorTurns(lambda _s: in_notebook["now"])
    turns.watch(session)
    await prompt(session, "notebook first")
    assert turns.take(session) == []

    in_notebook["now"] = False
    await prompt(session, "editor follow-up")
    taken = turns.take(session)
    assert [t.prompt for t in taken] == ["editor follow-up"]
    assert taken[0].answer == "Editor answer: two of them have no default."
    text = summary_markdown(taken)
    assert "From the editor" in text and "> **Prompt:** editor follow-up" in text
    assert turns.take(session) == []

    other = manager.new(str(workspace))
    turns.watch(other)
    assert session.observers == []  # stopped watching the old session
    await prompt(session, "editor follow-up")
    assert turns.take(other) == [] and turns.take(session) == []
