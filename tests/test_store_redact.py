"""Secrets never leave in a diff: the ACP permission request, tool_call updates, a load's
replay, and the notebook card in all three MIME types show ``[REDACTED:NAME]``."""

from __future__ import annotations

import json
from pathlib import Path

from kernel_harness import scripted_kernel
from test_acp_support import RawServer, server_env

SECRET = "s3cr3t-deploy-value-4242"
NAME = "DEPLOY_API_TOKEN"


def secret_script(path: Path) -> Path:
    edit = {
        "name": "edit_file",
        "input": {
            "path": "app.env",
            "old_string": f"token = {SECRET}",
            "new_string": f"token = {SECRET}-rotated",
        },
    }
    write = {"name": "write_file", "input": {"path": "copy.env", "content": f"t={SECRET}\n"}}
    script = {
        "name": "secrets",
        "exchanges": [
            {
                "match": "^rotate",
                "turns": [{"tool_use": [edit]}, {"tool_use": [write]}, {"text": "Rotated."}],
            }
        ],
        "fallback": "ok",
    }
    path.write_text(json.dumps(script))
    return path


async def test_acp_diffs_are_redacted_live_and_in_a_replay(tmp_path: Path, workspace: Path):
    (workspace / "app.env").write_text(f"token = {SECRET}\n")
    env = server_env(secret_script(tmp_path / "s.json"), **{NAME: SECRET})
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.initialize()
        new = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = new["result"]["sessionId"]
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": "rotate it"}]}
        await server.send({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": params})
        asked = 0
        while True:
            message = await server.read()
            if message.get("method") == "session/request_permission":
                asked += 1
                answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
                await server.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
            elif message.get("id") == 5 and "method" not in message:
                assert message["result"]["stopReason"] == "end_turn"
                break
        assert asked == 2
        loaded = await server.call(
            "session/load", {"cwd": str(workspace), "sessionId": sid, "mcpServers": []}
        )
        assert "result" in loaded
    assert f"{SECRET}-rotated" in (workspace / "app.env").read_text()  # the edit was real
    diffs = []
    for raw in server.lines:
        assert SECRET.encode() not in raw, raw[:300]
        message = json.loads(raw)
        params = message.get("params") or {}
        contents = (params.get("toolCall") or params.get("update") or {}).get("content")
        for content in contents if isinstance(contents, list) else []:
            if content.get("type") == "diff":
                diffs.append((message.get("method"), content))
    kinds = {method for method, _ in diffs}
    assert kinds == {"session/request_permission", "session/update"}
    assert any(f"[REDACTED:{NAME}]" in (d["oldText"] or "") for _, d in diffs)
    assert any(f"[REDACTED:{NAME}]-rotated" in d["newText"] for _, d in diffs)


def test_kernel_cards_redact_diffs_in_every_mime_type(tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.env").write_text(f"token = {SECRET}\n")
    kernel = scripted_kernel(tmp_path, work, secret_script(tmp_path / "s.json"), {NAME: SECRET})
    try:
        assert kernel.execute("%mode bypass").status == "ok"
        result = kernel.execute("rotate the token")
        assert result.status == "ok"
    finally:
        kernel.stop()
    assert f"{SECRET}-rotated" in (work / "app.env").read_text()
    bundles = [b for d, bs in result.displays().items() if d.startswith("iac-tool-") for b in bs]
    assert bundles
    mimes = set()
    for bundle in bundles:
        for mime, data in bundle.items():
            mimes.add(mime)
            assert SECRET not in json.dumps(data), mime
    assert {"text/plain", "text/html"} <= mimes and len(mimes) >= 3
    final = [cards[-1] for cards in result.cards()]
    # masked by name (the environment's secret) or, found as a value in the workspace's
    # variable-file-like text, as a sensitive value: either way never the value itself
    olds = [(c["diff"] or {}).get("oldText") or "" for c in final]
    assert any(f"[REDACTED:{NAME}]" in old or "(sensitive)" in old for old in olds), olds
