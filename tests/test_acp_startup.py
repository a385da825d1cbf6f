"""``initialize`` and ``session/new``, the two requests an editor sends at spawn, are
answered before the ACP SDK is imported, ``initialize`` before the agent core too
(timing is in bench/startup.py), and the answers
are the SDK's: they validate with its models and it would put them on the wire unchanged;
bad params are one -32602 naming every bad field; the session is a real one afterwards.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import InitializeResponse, NewSessionResponse

from iac_kernel.acp.routes import PROTOCOL_VERSION
from iac_kernel.acp.serve.server import serve
from iac_kernel.acp.wire.connection import wire_result
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from test_acp_support import RawServer, server_env, wait_until

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


class Sink:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.lines.extend(json.loads(line) for line in data.splitlines())

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None

    def answer(self, request_id: int) -> dict[str, Any] | None:
        found = [m for m in self.lines if m.get("id") == request_id and "method" not in m]
        return found[0] if found else None


async def exchange(
    manager: SessionManager, *params: tuple[str, Any], initialize: Any = INITIALIZE["params"]
) -> list[dict[str, Any]]:
    """``initialize``, then each ``(method, params)`` request; their answers, in order."""
    reader, sink = asyncio.StreamReader(), Sink()
    serving = asyncio.ensure_future(serve(reader, sink, manager))
    requests = [{**INITIALIZE, "params": initialize}] + [
        {"jsonrpc": "2.0", "id": i, "method": method, "params": p}
        for i, (method, p) in enumerate(params, 2)
    ]
    for request in requests:
        reader.feed_data(json.dumps(request).encode() + b"\n")
    ids = [r["id"] for r in requests]
    await wait_until(lambda: all(sink.answer(i) for i in ids), "the answers")
    reader.feed_eof()
    await asyncio.wait_for(serving, 30)
    return [sink.answer(i) for i in ids]  # type: ignore[misc]


def manager_for(tmp_path: Path, **settings: Any) -> SessionManager:
    settings = {"sessions_dir": str(tmp_path / "sessions"), **settings}
    return SessionManager(Settings(**settings), holder="t", origin="acp")


def test_protocol_version_is_the_sdks():
    assert PROTOCOL_VERSION == acp.PROTOCOL_VERSION


@pytest.mark.parametrize(
    "params",
    [
        {"protocolVersion": 1},
        {"protocolVersion": 1, "clientCapabilities": {}},
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True}, "terminal": True},
            "clientInfo": {"name": "zed", "version": "0.200", "title": "Zed"},
            "_meta": {"x": 1},
        },
        {"protocolVersion": "2024-11-05", "clientCapabilities": 5},  # what Zed once sent
    ],
)
async def test_the_initialize_answer_is_the_sdks(tmp_path, params):
    manager = manager_for(tmp_path)
    answer, listed = await exchange(manager, ("session/list", {}), initialize=params)
    assert "result" in listed  # initialized: the next request is served
    result = answer["result"]
    assert result["protocolVersion"] == PROTOCOL_VERSION
    assert result["agentCapabilities"]["loadSession"] is True
    assert wire_result(InitializeResponse.model_validate(result)) == result
    await manager.close_all()


@pytest.mark.parametrize("params", [None, {}, {"clientInfo": {"name": "x"}}])
async def test_initialize_needs_a_protocol_version(tmp_path, params):
    refused, listed = await exchange(manager_for(tmp_path), ("session/list", {}), initialize=params)
    assert refused["error"]["code"] == -32602
    assert "protocolVersion" in refused["error"]["data"]
    assert listed["error"]["code"] == -32600  # still not initialized


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"mode": "bypass", "max_tokens": 3000, "max_turn_requests": 7},
        {"mode": "read_only", "model": "scripted:/opt/scripts/runbook.json"},
        {"mode": "accept_edits", "model": "claude-opus-4-6", "max_tokens": 1024},
    ],
)
async def test_the_session_new_answer_is_the_sdks(tmp_path, settings):
    manager = manager_for(tmp_path, **settings)
    _, created = await exchange(manager, ("session/new", {"cwd": str(tmp_path)}))
    answer = created["result"]
    assert manager.get(answer["sessionId"]).session_id == answer["sessionId"]
    assert answer["modes"]["currentModeId"] == (settings.get("mode") or "default")
    # The SDK's model takes the answer and would put it on the wire unchanged; ``models``
    # (not in schema 1.19) is sent for the clients that still read it.
    known = wire_result(NewSessionResponse.model_validate(answer))
    assert known == {k: v for k, v in answer.items() if k != "models"}
    assert answer["models"]["currentModelId"] == manager.get(answer["sessionId"]).model_id
    await manager.close_all()


async def test_session_new_params_are_checked_field_by_field(tmp_path):
    folder = tmp_path / "dir"
    folder.mkdir()
    good = [
        {"cwd": str(tmp_path)},
        {"cwd": str(tmp_path), "mcpServers": None, "_meta": {"zed": 1}},
        {"cwd": str(tmp_path) + "/./", "additionalDirectories": [str(folder)]},
    ]
    bad = [
        (None, {"cwd"}),
        ({"cwd": 5, "mcpServers": "no"}, {"cwd", "mcpServers"}),
        ({"cwd": "relative", "additionalDirectories": "/tmp"}, {"cwd", "additionalDirectories"}),
        ({"cwd": str(tmp_path), "additionalDirectories": [str(tmp_path / "gone")]},
         {"additionalDirectories"}),
        ({"cwd": str(tmp_path), "mcpServers": [{"name": "fs"}]}, {"mcpServers"}),
        ({"cwd": str(tmp_path / "missing")}, {"cwd"}),
    ]  # fmt: skip
    manager = manager_for(tmp_path)
    answers = await exchange(manager, *[("session/new", p) for p in good + [b for b, _ in bad]])
    made = answers[1 : 1 + len(good)]
    assert all("sessionId" in a["result"] for a in made), made
    assert manager.get(made[2]["result"]["sessionId"]).meta.additional_directories == [str(folder)]
    for answer, (_, fields) in zip(answers[1 + len(good) :], bad, strict=True):
        assert answer["error"]["code"] == -32602, answer
        assert set(answer["error"]["data"]) == fields, answer
    await manager.close_all()


def test_initialize_and_session_new_are_answered_before_the_sdk_is_imported(tmp_path):
    """And ``initialize`` before the agent core: the session manager is made after it."""
    code = """
import asyncio, json, sys
from iac_kernel.acp.serve.stdio import make_manager
from iac_kernel.acp.serve.server import serve

class Sink:
    lines = []
    def write(self, data):
        for line in data.splitlines():
            core = "iac_kernel.agent.session" in sys.modules
            self.lines.append((json.loads(line), "acp" in sys.modules, core))
    async def drain(self): pass
    def close(self): pass

async def main():
    reader, sink = asyncio.StreamReader(), Sink()
    serving = asyncio.ensure_future(serve(reader, sink, make_manager))
    reader.feed_data(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {"protocolVersion": 1}}).encode() + b"\\n")
    while not sink.lines:  # an editor sends session/new on the answer
        await asyncio.sleep(0.01)
    reader.feed_data(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                                 "params": {"cwd": sys.argv[1]}}).encode() + b"\\n")
    while len(sink.lines) < 3:  # the answers, then the session's commands
        await asyncio.sleep(0.01)
    reader.feed_eof()
    await serving
    print(json.dumps([(m.get("id"), m.get("method"), sdk, core) for m, sdk, core in sink.lines]))

asyncio.run(main())
"""
    env = {"IAC_KERNEL_SESSIONS_DIR": str(tmp_path / "s"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, env=env, check=True, timeout=120)  # fmt: skip
    sent = json.loads(out.stdout.splitlines()[-1])
    assert sent[:2] == [[1, None, False, False], [2, None, False, True]], sent
    assert sent[2] == [None, "session/update", True, True]  # the commands use the SDK's models


def test_the_kernel_and_the_acp_package_start_without_the_sdk():
    """Nor the libraries only some calls need: nbformat's jsonschema import alone takes a
    second and a half (the pull request's notebook), the forges' clients as long."""
    code = (
        "import sys\n"
        "import iac_kernel.acp, iac_kernel.acp.serve.stdio, iac_kernel.kernel.kernel\n"
        "import iac_kernel.tools.registry\n"
        "late = {'acp', 'anthropic', 'openai', 'nbformat', 'jsonschema', 'github', 'gitlab'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & late))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    assert out.stdout.strip() == "[]", out.stdout


async def test_a_session_made_at_spawn_is_a_real_session(tmp_path):
    """initialize + session/new written at once: the commands follow the answer, and the
    session prompts and lists like any other."""
    env = server_env(IAC_KERNEL_SESSIONS_DIR=str(tmp_path / "sessions"))
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.send(INITIALIZE)
        await server.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                           "params": {"cwd": str(tmp_path), "mcpServers": []}})  # fmt: skip
        assert "result" in await server.answer(1)
        session_id = (await server.answer(2))["result"]["sessionId"]
        update = await server.read()
        assert update["method"] == "session/update"
        assert update["params"]["sessionId"] == session_id
        assert update["params"]["update"]["sessionUpdate"] == "available_commands_update"
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]}
        assert (await server.call("session/prompt", prompt))["result"]["stopReason"] == "end_turn"
        said = [json.loads(line) for line in server.lines]
        updates = [m["params"]["update"] for m in said if m.get("method") == "session/update"]
        text = "".join(
            u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert text == "Hello from the script."
        listed = (await server.call("session/list", {}))["result"]["sessions"]
        assert session_id in [s["sessionId"] for s in listed]
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def test_stdio_that_is_a_file_is_one_readable_line(tmp_path):
    """An editor starts ``iac-kernel acp`` on pipes; stdin from a file is refused with one
    line naming why (asyncio watches pipes, sockets and terminals only)."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(INITIALIZE) + "\n")
    env = {**server_env(IAC_KERNEL_SESSIONS_DIR=str(tmp_path / "s")), "PATH": "/usr/bin:/bin"}
    with requests.open("rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "iac_kernel", "acp"], stdin=stdin,
                              capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "must be pipes, sockets or terminals, not files" in line
