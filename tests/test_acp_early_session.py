"""``session/new`` answered while the ACP SDK still imports (issue 16), checked for
correctness (timing is in bench/): the early answer validates with the SDK's models and
the SDK would serialize it the same, it is the answer the SDK path gives field by field,
only plainly valid requests are taken, creating the session imports nothing the loader
did not import first, and the session is a real one afterwards (commands, prompt, list).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from acp.schema import NewSessionResponse

from iac_kernel.acp import early, sdk, session_state
from iac_kernel.acp.agent import IacAgent
from iac_kernel.acp.early_start import CORE_MODULES
from iac_kernel.acp.routes import Dispatcher, NewSessionParams
from iac_kernel.acp.server import check_session_answer, sdk_serialized
from iac_kernel.config import Settings
from iac_kernel.sessions.manager import SessionManager
from test_acp_support import RawServer, server_env

SETTINGS = [
    {},
    {"mode": "bypass", "max_tokens": 3000, "max_turn_requests": 7},
    {"mode": "read_only", "model": "scripted:/opt/scripts/runbook.json"},
    {"mode": "accept_edits", "model": "claude-opus-4-6", "max_tokens": 1024},
]
ACCEPTED = [
    {"cwd": "/work"},
    {"cwd": "/work", "mcpServers": []},
    {"cwd": "/work/a b/ü", "mcpServers": [], "_meta": {"zed": {"x": 1}}},
    {"cwd": "/", "_meta": None},
]
DECLINED = [
    None,
    [],
    {},
    {"cwd": "relative/path"},
    {"cwd": 5},
    {"cwd": "/work", "mcpServers": None},  # the SDK takes it; the early path leaves it
    {"cwd": "/work", "mcpServers": [{"name": "fs", "command": "x", "args": [], "env": []}]},
    {"cwd": "/work", "mcpServers": {}},
    {"cwd": "/work", "additionalDirectories": ["/tmp"]},
    {"cwd": "/work", "_meta": 3},
]


def manager_for(tmp_path: Path, **settings) -> SessionManager:
    return SessionManager(
        Settings(sessions_dir=str(tmp_path / "sessions"), **settings), holder="t", origin="acp"
    )


@pytest.mark.parametrize("settings", SETTINGS)
async def test_early_answer_is_the_sdk_paths_answer_field_by_field(tmp_path, settings):
    manager = manager_for(tmp_path, **settings)
    early_session = manager.new(str(tmp_path))
    early_session.gate.prefix_rules["bash"] = {"terraform plan": "allow"}
    answer = session_state.new_session_answer(early_session)

    agent = IacAgent(manager)
    dispatcher = Dispatcher(agent)
    await dispatcher("initialize", {"protocolVersion": 1}, False)
    agent.attach(_NullChannel())
    params = {"cwd": str(tmp_path), "mcpServers": []}
    sdk_answer = sdk_serialized(await dispatcher("session/new", params, False))
    sdk_session = manager.get(sdk_answer["sessionId"])
    sdk_session.gate.prefix_rules["bash"] = {"terraform plan": "allow"}
    sdk_answer["_meta"] = session_state.answer_meta(sdk_session)["_meta"]

    assert set(answer) == set(sdk_answer)
    for field in answer:
        if field != "sessionId":
            assert answer[field] == sdk_answer[field], field
    assert answer["sessionId"] == early_session.session_id != sdk_answer["sessionId"]
    # The SDK's own model takes the early answer and puts it on the wire unchanged.
    NewSessionResponse.model_validate(answer)
    known = check_session_answer(answer)
    assert known == {k: v for k, v in answer.items() if k != "models"}
    assert answer["modes"]["currentModeId"] == (settings.get("mode") or "default")
    await manager.close_all()


def test_a_changed_answer_is_reported(caplog, tmp_path):
    """The runtime check can fail: an answer the SDK would serialize differently."""
    answer = {"sessionId": "s", "modes": {"currentModeId": "default", "availableModes": []}}
    answer["configOptions"] = [{"type": "select", "id": "m", "name": "M", "currentValue": "a",
                                "options": [], "category": None}]  # fmt: skip
    check_session_answer(answer)
    assert "differs from the SDK's" in caplog.text


@pytest.mark.parametrize("params", ACCEPTED)
def test_plain_session_new_requests_are_taken_and_validate(params):
    assert early.plainly_valid_new(params)
    NewSessionParams.model_validate(params)  # what the SDK path accepts
    line = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params})
    assert early.parse_new_session(line.encode())["params"] == params


@pytest.mark.parametrize("params", DECLINED)
def test_other_session_new_requests_are_left_to_the_sdk(params):
    assert not early.plainly_valid_new(params)
    line = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params})
    assert early.parse_new_session(line.encode()) is None


def test_only_session_new_requests_are_taken():
    ok = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/w"}}
    assert early.parse_new_session(json.dumps(ok).encode()) == ok
    for bad in (
        {**ok, "method": "session/load"},
        {**ok, "id": None},
        {**ok, "id": True},
        {k: v for k, v in ok.items() if k != "id"},
        {**ok, "extra": 1},
    ):
        assert early.parse_new_session(json.dumps(bad).encode()) is None


def test_creating_a_session_imports_nothing_the_loader_did_not(tmp_path):
    """Only the core modules are imported before the session is made: the main thread
    never waits on a module lock the SDK import holds, and neither pydantic nor the SDK
    is needed for the answer."""
    code = (
        "import sys, importlib, json\n"
        f"for name in {CORE_MODULES!r}: importlib.import_module(name)\n"
        "before = set(sys.modules)\n"
        "from iac_kernel.acp.stdio import make_manager\n"
        "from iac_kernel.acp.session_state import new_session_answer\n"
        "after_stdio = set(sys.modules)\n"
        "answer = new_session_answer(make_manager().new(sys.argv[1]))\n"
        "print(json.dumps([sorted(after_stdio - before), sorted(set(sys.modules) - after_stdio),"
        " answer['modes']['currentModeId']]))\n"
    )
    env = {"IAC_KERNEL_SESSIONS_DIR": str(tmp_path / "s"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, env=env, check=True, timeout=120)  # fmt: skip
    stdio_modules, made, mode = json.loads(out.stdout)
    assert made == [] and mode == "default", out.stdout
    assert not any(m.split(".")[0] in ("acp", "pydantic") for m in stdio_modules), stdio_modules


def test_the_loader_signals_the_core_before_the_sdk():
    loader = sdk.start_loading(("iac_kernel.acp.server",), core=("iac_kernel.config",))
    assert loader.core_ready()
    loader.wait()
    assert loader.core_loaded.is_set() and loader.loaded.is_set()
    failing = sdk.start_loading((), core=("iac_kernel.no_such_module",))
    assert not failing.core_ready()
    with pytest.raises(ModuleNotFoundError):
        failing.wait()


async def test_session_new_answered_early_is_a_real_session(tmp_path):
    """initialize + session/new written at spawn: both answered before the SDK loaded
    (the server logs it), the commands follow the answer, and the session prompts,
    lists and refuses a bad cwd like any other."""
    env = server_env(IAC_KERNEL_SESSIONS_DIR=str(tmp_path / "sessions"))
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": 1}})  # fmt: skip
        await server.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                           "params": {"cwd": str(tmp_path), "mcpServers": []}})  # fmt: skip
        assert "result" in await server.answer(1)
        created = await server.answer(2)
        session_id = created["result"]["sessionId"]
        NewSessionResponse.model_validate(created["result"])
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
        bad = await server.call("session/new", {"cwd": str(tmp_path / "missing")})
        assert bad["error"]["code"] == -32602 and "cwd" in json.dumps(bad["error"]["data"])
    log = (tmp_path / "stderr.log").read_text()
    assert "1 session/new answered before" in log, log
    assert "differs" not in log and "Traceback" not in log, log


async def test_a_bad_early_cwd_is_answered_by_the_sdk_with_the_field(tmp_path):
    env = server_env(IAC_KERNEL_SESSIONS_DIR=str(tmp_path / "sessions"))
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": 1}})  # fmt: skip
        params = {"cwd": str(tmp_path / "nope"), "mcpServers": []}
        await server.send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params})
        bad = await server.answer(2)
        assert bad["error"]["code"] == -32602 and "cwd" in json.dumps(bad["error"]["data"])
        listed = (await server.call("session/list", {}))["result"]["sessions"]
        assert listed == []


class _NullChannel:
    """A client channel that takes the session updates the SDK path sends."""

    async def update(self, session_id, update, extra=None) -> None:
        return None
