"""Raw input the SDK never sends: the server answers each with the right JSON-RPC error
and keeps serving. Also the method aliases, and a clean stdout under noisy code."""

from __future__ import annotations

import json
import os

from test_acp_support import CHECKOUT, SCRIPTS, RawServer, server_env

SECRET = "s3cr3t-value-do-not-leak"


async def _ok(server: RawServer, cwd: str) -> None:
    """The server still answers a valid request."""
    answer = await server.call("session/list", {"cwd": cwd})
    assert "result" in answer, answer


def _error(message: dict, code: int) -> dict:
    assert "error" in message, message
    assert message["error"]["code"] == code, message
    text = json.dumps(message["error"])
    assert "Traceback" not in text and 'File "' not in text
    assert SECRET not in text
    return message["error"]


async def test_malformed_input_suite(tmp_path, workspace):
    env = server_env(MY_API_TOKEN=SECRET)
    cwd = str(workspace)
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        # Nothing before initialize; a notification before it is ignored.
        await server.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}}
        )
        early = await server.call("session/new", {"cwd": cwd, "mcpServers": []})
        assert "initialize" in _error(early, -32600)["data"]["details"]
        assert (await server.initialize())["result"]["protocolVersion"] == 1
        await _ok(server, cwd)

        raw_cases = [
            (b"this is not json", -32700),
            (b'{"jsonrpc": "2.0", "id": 1, "method": "session/list"', -32700),
            (b"\xff\xfe{}", -32700),
            (b"[" * 100_000 + b"]" * 100_000, -32700),
            (b'[{"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}]', -32600),
            (b"[]", -32600),
            (b"42", -32600),
            (b'"a string"', -32600),
            (b"{}", -32600),
            (b'{"id": 7, "method": "session/list", "params": {}}', -32600),
            (b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "session/list"}', -32600),
            (b'{"jsonrpc": "2.0", "id": 8, "method": 5}', -32600),
            (b'{"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": "x"}', -32600),
            (b'{"jsonrpc": "2.0", "id": 10}', -32600),
        ]
        for line, code in raw_cases:
            await server.send_line(line)
            message = await server.read()
            _error(message, code)
            await _ok(server, cwd)

        # A huge line of garbage, then a huge valid prompt.
        await server.send_line(b"x" * (5 * 1024 * 1024))
        _error(await server.read(), -32700)
        await _ok(server, cwd)
        new = await server.call("session/new", {"cwd": cwd, "mcpServers": []})
        sid = new["result"]["sessionId"]
        big = "hello " + "terraform " * 300_000
        answer = await server.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": big}]}
        )
        assert answer["result"]["stopReason"] == "end_turn"

        unknown = await server.call("session/teleport", {"sessionId": sid})
        assert _error(unknown, -32601)["data"] == {"method": "session/teleport"}
        _error(await server.call("_iac/extension", {}), -32601)
        _error(await server.call("authenticate", {"methodId": "x"}), -32601)

        wrong_types = await server.call("session/new", {"cwd": 5, "mcpServers": "no"})
        data = _error(wrong_types, -32602)["data"]
        assert "cwd" in data and "mcpServers" in data
        no_prompt = await server.call("session/prompt", {"sessionId": sid})
        assert "prompt" in _error(no_prompt, -32602)["data"]
        bad_block = await server.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "hologram"}]}
        )
        _error(bad_block, -32602)
        missing = await server.call("session/prompt", {"sessionId": "nope", "prompt": []})
        assert _error(missing, -32602)["data"] == {"session_id": "Session not found"}
        for method in ("session/close", "session/set_mode"):
            params = {"sessionId": "nope", "modeId": "default"}
            assert _error(await server.call(method, params), -32602)["data"] == {
                "session_id": "Session not found"
            }
        secret_cwd = await server.call("session/new", {"cwd": f"/no/{SECRET}", "mcpServers": []})
        assert "REDACTED" in json.dumps(_error(secret_cwd, -32602))

        # An unexpected failure is -32603 with one line of detail, and the server lives on.
        internal = await server.call("session/list", {"cwd": cwd, "_meta": {"self": 1}})
        assert "TypeError" in _error(internal, -32603)["data"]["details"]
        await _ok(server, cwd)
        assert server.process.returncode is None


async def test_aliases_and_set_model(tmp_path, workspace):
    cwd = str(workspace)
    async with RawServer.start(server_env(), tmp_path / "stderr.log") as server:
        await server.initialize()
        sid = (await server.call("session/new", {"cwd": cwd, "mcpServers": []}))["result"][
            "sessionId"
        ]
        listed = await server.call("sessions/list", {"cwd": cwd})
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]

        changed = await server.call(
            "config/set", {"sessionId": sid, "configId": "max_tokens", "value": 2048}
        )
        options = {o["id"]: o["currentValue"] for o in changed["result"]["configOptions"]}
        assert options["max_tokens"] == "2048"
        unknown = await server.call("config/set", {"sessionId": sid, "configId": "x", "value": "1"})
        _error(unknown, -32602)

        model = f"scripted:{SCRIPTS / 'acp_model_b.json'}"
        assert (await server.call("session/set_model", {"sessionId": sid, "modelId": model}))[
            "result"
        ] == {}
        answer = await server.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
        )
        assert answer["result"]["stopReason"] == "end_turn"
        texts = [
            json.loads(line)["params"]["update"]["content"]["text"]
            for line in server.lines
            if b"agent_message_chunk" in line
        ]
        assert "".join(texts) == "Answer from script B."
        bad = await server.call("session/set_model", {"sessionId": sid, "modelId": "scripted:/no"})
        assert "modelId" in _error(bad, -32602)["data"]


NOISE = """
import os, sys, warnings
import iac_kernel.tools.bash as bash

_run = bash.BashTool.run

async def noisy_run(self, args, ctx):
    print("LIBRARY NOISE on sys.stdout")
    sys.stdout.flush()
    os.write(1, b"RAW FD NOISE on fd 1\\n")
    warnings.warn("a library warning")
    return await _run(self, args, ctx)

bash.BashTool.run = noisy_run
"""


async def test_stdout_carries_only_json_rpc_even_when_code_prints(tmp_path, workspace):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOISE)
    env = server_env(PYTHONPATH=os.pathsep.join((str(site), str(CHECKOUT))))
    stderr = tmp_path / "stderr.log"
    async with RawServer.start(env, stderr) as server:
        await server.initialize()
        sid = (await server.call("session/new", {"cwd": str(workspace), "mcpServers": []}))[
            "result"
        ]["sessionId"]
        await server.call("session/set_mode", {"sessionId": sid, "modeId": "bypass"})
        answer = await server.call(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "run a command"}]},
        )
        assert answer["result"]["stopReason"] == "end_turn"
    for line in server.lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
    assert any(b"from-bash" in line for line in server.lines)
    log = stderr.read_text()
    assert "LIBRARY NOISE" in log and "RAW FD NOISE" in log and "a library warning" in log
