"""Start-up without the ACP SDK on the critical path, checked for correctness (timing
is in bench/): the early ``initialize`` answer is the one the SDK path gives, it is only
given for params the SDK accepts, the fast SDK import keeps every field description, and
the kernel starts without importing the SDK."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import acp
import pytest
from acp.schema import InitializeRequest, InitializeResponse

from iac_kernel.acp import early
from iac_kernel.acp.agent import IacAgent
from iac_kernel.acp.routes import Dispatcher
from iac_kernel.acp.server import sdk_serialized
from iac_kernel.config import Settings
from iac_kernel.sessions.manager import SessionManager

PARAMS = [
    {"protocolVersion": 1},
    {"protocolVersion": 1, "clientCapabilities": {}},
    {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
        },
        "clientInfo": {"name": "zed", "version": "0.200", "title": "Zed"},
        "_meta": {"x": 1},
    },
    {"protocolVersion": 0, "clientInfo": {"name": "c", "version": "1", "_meta": None}},
]
DECLINED = [
    None,
    [],
    {},
    {"protocolVersion": "1"},  # the SDK coerces it; the early path leaves it to the SDK
    {"protocolVersion": True},
    {"protocolVersion": -1},
    {"protocolVersion": 70000},
    {"protocolVersion": 1, "clientCapabilities": 5},
    {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": "yes"}}},
    {"protocolVersion": 1, "clientCapabilities": {"elicitation": {}}},
    {"protocolVersion": 1, "clientInfo": {"name": "c"}},
    {"protocolVersion": 1, "clientInfo": {"name": 5, "version": "1"}},
    {"protocolVersion": 1, "extra": 1},
]


def test_protocol_version_is_the_sdks():
    assert early.PROTOCOL_VERSION == acp.PROTOCOL_VERSION


@pytest.mark.parametrize("params", PARAMS)
async def test_early_answer_is_the_agents_answer(params, tmp_path):
    assert early.plainly_valid(params)
    InitializeRequest.model_validate(params)  # the SDK accepts what the early path answers
    manager = SessionManager(Settings(sessions_dir=str(tmp_path)), holder="t", origin="acp")
    agent = IacAgent(manager)
    answer = sdk_serialized(await Dispatcher(agent)("initialize", params, False))
    assert answer == early.initialize_result()
    assert agent.initialized
    validated = InitializeResponse.model_validate(early.initialize_result())
    assert sdk_serialized(validated) == early.initialize_result()


@pytest.mark.parametrize("params", DECLINED)
def test_unusual_params_are_left_to_the_sdk(params):
    assert not early.plainly_valid(params)
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert early.parse_initialize(line.encode()) is None


def test_only_initialize_requests_are_answered_early():
    ok = {"jsonrpc": "2.0", "id": "a", "method": "initialize", "params": {"protocolVersion": 1}}
    assert early.parse_initialize(json.dumps(ok).encode()) == ok
    for bad in (
        {**ok, "method": "session/new"},
        {**ok, "id": None},
        {**ok, "id": 1.5},
        {k: v for k, v in ok.items() if k != "id"},  # a notification
        {**ok, "jsonrpc": "1.0"},
    ):
        assert early.parse_initialize(json.dumps(bad).encode()) is None
    assert early.parse_initialize(b"not json") is None
    line = early.answer_bytes(7)
    assert line.endswith(b"\n") and json.loads(line) == {
        "jsonrpc": "2.0", "id": 7, "result": early.initialize_result()
    }  # fmt: skip


def test_every_initialize_the_early_path_takes_validates():
    """Variants of the accepted shapes: whatever the early path answers, the SDK accepts."""
    values = [None, True, False, 0, "x", {}, {"a": 1}, [], 1.5]
    for cap_key in ("fs", "terminal", "_meta"):
        for value in values:
            params = {"protocolVersion": 1, "clientCapabilities": {cap_key: value}}
            if early.plainly_valid(params):
                InitializeRequest.model_validate(params)
    for fs_key in ("readTextFile", "writeTextFile", "_meta"):
        for value in values:
            params = {"protocolVersion": 1, "clientCapabilities": {"fs": {fs_key: value}}}
            if early.plainly_valid(params):
                InitializeRequest.model_validate(params)
    for info_key in ("name", "version", "title", "_meta"):
        for value in values:
            info = {"name": "n", "version": "v", info_key: value}
            params = {"protocolVersion": 1, "clientInfo": info}
            if early.plainly_valid(params):
                InitializeRequest.model_validate(params)


async def test_initialize_answered_while_the_sdk_loads_then_served_by_the_sdk(tmp_path):
    """The answer comes before the SDK import finished (the server logs it), validates,
    and the agent is initialized: the next request is served, not refused."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "IAC_"))}
    env.update(IAC_KERNEL_SESSIONS_DIR=str(tmp_path), IAC_KERNEL_LOG_LEVEL="INFO")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "iac_kernel", "acp",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": PARAMS[2]}
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    await proc.stdin.drain()
    answer = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
    assert answer["id"] == 1
    InitializeResponse.model_validate(answer["result"])
    new = {"jsonrpc": "2.0", "id": 2, "method": "session/new",
           "params": {"cwd": str(tmp_path), "mcpServers": []}}  # fmt: skip
    proc.stdin.write(json.dumps(new).encode() + b"\n")
    await proc.stdin.drain()
    created = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
    assert created["id"] == 2 and created["result"]["sessionId"], created
    proc.stdin.close()
    stderr = (await asyncio.wait_for(proc.stderr.read(), 60)).decode()
    await proc.wait()
    assert "initialize was answered before" in stderr, stderr
    assert "differs" not in stderr, stderr


def test_the_kernel_and_the_acp_package_start_without_the_sdk():
    code = (
        "import sys\n"
        "import iac_kernel.acp, iac_kernel.acp.stdio, iac_kernel.kernel.kernel\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'acp', 'anthropic'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    assert out.stdout.strip() == "[]", out.stdout


async def test_serve_counts_an_early_initialize_and_replays_it(tmp_path, monkeypatch):
    from iac_kernel.acp import server

    replayed: list[dict] = []

    async def record(dispatcher, message):
        replayed.append(message)
        return await real(dispatcher, message)

    real = server.replay_initialize
    monkeypatch.setattr(server, "replay_initialize", record)
    monkeypatch.setattr(server, "REPLAY_DELAY", 0.0)
    manager = SessionManager(Settings(sessions_dir=str(tmp_path)), holder="t", origin="acp")
    reader = asyncio.StreamReader()
    written: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> None:
            written.append(data)

        async def drain(self) -> None:
            return None

        def close(self) -> None:
            return None

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": PARAMS[2]}
    serving = asyncio.ensure_future(server.serve(reader, Sink(), manager, initialized=init))
    listing = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
    reader.feed_data(json.dumps(listing).encode() + b"\n")
    for _ in range(200):
        await asyncio.sleep(0.01)
        if written and replayed:
            break
    reader.feed_eof()
    await asyncio.wait_for(serving, 10)
    answers = [json.loads(line) for chunk in written for line in chunk.splitlines()]
    assert [a["id"] for a in answers] == [2] and "result" in answers[0], answers
    assert replayed == [init]
    await manager.close_all()
