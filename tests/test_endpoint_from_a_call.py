"""Issue 22, point 1: a bash call can neither see nor attach to the kernel's endpoint.

Live: a real kernel (jupyter_client) whose scripted model runs a bash call that knows the
endpoint's socket path and token (as if leaked) and the kernel's connection file, and
tries to read the runtime folder and session store and to attach; it sees nothing and
cannot connect, and the session's mode is unchanged. Unit: even a process that reaches
the socket is refused while it belongs to a running call (``guard.sandbox.processes``), and the
same client is served once it does not.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from iac_kernel.acp.attach.runtime import live_endpoints
from iac_kernel.acp.serve.endpoint import start_endpoint
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from iac_kernel.guard.sandbox import processes
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from kernel_harness import scripted_kernel

CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("connect failed:", exc)
    raise SystemExit(0)
s.sendall(json.dumps({"token": sys.argv[2]}).encode() + b"\\n"
          + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": 1}}).encode() + b"\\n")
s.settimeout(20)
print("answer:", s.recv(65536).decode())
"""


async def _client(sock: str, token: str, register: bool) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, sock, token, stdout=asyncio.subprocess.PIPE
    )
    if register:
        processes.started(proc.pid)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        processes.ended(proc.pid)
    return out.decode()


async def test_a_peer_inside_a_running_call_is_refused(workspace: Path, tmp_path: Path) -> None:
    settings = Settings.from_env()
    settings.model = "scripted"
    manager = SessionManager(settings, holder="a test kernel", origin="kernel")
    session = manager.new(str(workspace))
    endpoint = await start_endpoint(
        manager, runtime_dir=tmp_path / "run", sessions=[session.session_id]
    )
    try:
        refused = await _client(str(endpoint.socket_path), endpoint.token, register=True)
        assert "unauthorized" in refused and "tool call" in refused
        served = await _client(str(endpoint.socket_path), endpoint.token, register=False)
        assert "unauthorized" not in served and '"result"' in served
    finally:
        await endpoint.close()


def test_descendants_of_a_call_are_from_the_call() -> None:
    processes.started(os.getppid())
    try:
        assert processes.from_a_call(os.getpid())
    finally:
        processes.ended(os.getppid())
    assert not processes.from_a_call(os.getpid())


ATTACK = """
import glob, json, os, socket
RUN, SOCK, TOKEN, CONN, SESSIONS = {args!r}
print("runtime files:", glob.glob(RUN + "/*"))
try:
    print("connection file:", repr(open(CONN).read()))
except OSError as exc:
    print("connection file:", type(exc).__name__)
print("sessions:", os.listdir(SESSIONS) if os.path.isdir(SESSIONS) else None)
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(SOCK)
    s.sendall(json.dumps({{"token": TOKEN}}).encode() + b"\\n")
    s.sendall(json.dumps({{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {{"protocolVersion": 1}}}}).encode() + b"\\n")
    s.settimeout(10)
    print("ATTACHED:", s.recv(4000).decode())
except OSError as exc:
    print("connect failed:", type(exc).__name__)
"""


@pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")
def test_a_bash_call_in_a_live_kernel_cannot_reach_the_endpoint(
    outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = outside_tmp  # not under /tmp: the empty mounts are what is checked
    isolated_runtime_dir = tmp_path / "run"
    isolated_runtime_dir.mkdir()
    monkeypatch.setenv("IAC_KERNEL_RUNTIME_DIR", str(isolated_runtime_dir))
    work = tmp_path / "work"
    work.mkdir()
    work = Path(os.path.realpath(work))
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "name": "attack",
                "exchanges": [
                    {
                        "match": "attack",
                        "turns": [
                            {
                                "text": "Trying.",
                                "tool_use": [
                                    {"name": "bash", "input": {"command": "python attack.py"}}
                                ],
                            },
                            {"text": "Done."},
                        ],
                    }
                ],
                "fallback": "ok",
            }
        )
    )
    env = {"IAC_KERNEL_RUNTIME_DIR": str(isolated_runtime_dir), "IAC_KERNEL_MODE": "bypass"}
    kernel = scripted_kernel(tmp_path, work, script, env)
    try:
        assert kernel.execute("%session").reply["content"]["status"] == "ok"
        (info,) = live_endpoints(isolated_runtime_dir)
        sessions = tmp_path / "sessions"
        args = (str(isolated_runtime_dir), info.socket, info.token)
        args += (str(kernel.km.connection_file), str(sessions))
        (work / "attack.py").write_text(ATTACK.format(args=args))
        result = kernel.execute("attack the endpoint")
        text = json.dumps([m["content"] for m in result.messages])
        assert "runtime files: []" in text
        assert "connection file: ''" in text or "connection file: FileNotFoundError" in text
        assert '"key"' in Path(kernel.km.connection_file).read_text()  # the host's file
        assert "sessions: []" in text
        assert "connect failed" in text and "ATTACHED" not in text
        assert "bypass" in kernel.execute("%mode").markdown()  # unchanged, as set by the user
        assert os.listdir(sessions)  # the store is there on the host
    finally:
        kernel.stop()


async def test_a_client_is_asked_only_the_questions_of_turns_it_started(
    workspace: Path, tmp_path: Path
) -> None:
    from iac_kernel.acp.attach.proxy import RemoteSession
    from test_endpoint_units import SCRIPT, FakeEditor

    settings = Settings.from_env()
    settings.script, settings.model = str(SCRIPT), "scripted"
    manager = SessionManager(settings, holder="a test kernel", origin="kernel")
    session = manager.new(str(workspace))
    sid = session.session_id
    endpoint = await start_endpoint(manager, runtime_dir=tmp_path / "run", sessions=[sid])
    owner, other = FakeEditor(), FakeEditor()
    first = await RemoteSession.attach(sid, endpoint.info, owner)
    second = await RemoteSession.attach(sid, endpoint.info, other)
    try:
        params = {"cwd": str(workspace), "sessionId": sid, "mcpServers": []}
        await first.forward("session/load", params)
        await second.forward("session/load", params)
        text = [{"type": "text", "text": "write the plan note"}]
        answer = await first.forward("session/prompt", {"sessionId": sid, "prompt": text})
        assert answer["stopReason"] == "end_turn"
        assert [m for m, _ in owner.requests] == ["session/request_permission"]
        assert other.requests == []
    finally:
        await first.close()
        await second.close()
        await endpoint.close()
