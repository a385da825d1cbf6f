"""``additionalDirectories`` (schema 1.25) on session/new, load, resume and fork: more
workspace roots. Tools use them like the cwd (no "outside the folder" question), the
bash sandbox binds them writable, and the agent advertises the capability."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from guard_support import Asker, Harness, make_fakes
from iac_kernel.agent.permissions import PermissionGate, PermissionRequest
from iac_kernel.config import Settings
from iac_kernel.guard.call import writable_paths
from iac_kernel.guard.sandbox import bwrap as sandbox
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.read_file import ReadFileTool
from node_schema import schema_failures
from test_acp_support import RawServer, server_env


@pytest.fixture
def extra() -> Path:
    """A directory outside the cwd that the sandbox sees (not under the private /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="iac-extra-root-", dir="/var/tmp"))
    (path / "note.txt").write_text("from the extra root\n")
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def _asked(settings: Settings, cwd: Path, path: Path) -> list[PermissionRequest]:
    asker = Asker()
    tool = ReadFileTool()
    args = {"path": str(path)}
    ctx = ToolContext(cwd=cwd, settings=settings)
    request = PermissionRequest("c1", tool.name, tool.title(args), tool.kind, args, [], "")
    decision = await PermissionGate(mode="default").check(tool, args, ctx, request, asker)
    assert decision.allowed
    return asker.requests


async def test_a_read_in_an_additional_root_asks_nothing_a_read_elsewhere_asks(
    workspace, extra, tmp_path
):
    settings = Settings(additional_directories=str(extra))
    assert await _asked(settings, workspace, extra / "note.txt") == []
    other = tmp_path / "other.txt"
    other.write_text("x")
    (asked,) = await _asked(settings, workspace, other)
    assert "outside the working directory" in asked.reason
    (asked,) = await _asked(Settings(), workspace, extra / "note.txt")  # no roots: asks


def test_the_sandbox_binds_the_roots_writable(extra):
    settings = Settings(sandbox_writable_paths="/var/tmp/a", additional_directories=str(extra))
    assert writable_paths(settings) == [Path("/var/tmp/a"), extra.resolve()]


@pytest.mark.skipif(sandbox.unusable_reason() is not None, reason="no bwrap")
async def test_bash_writes_in_an_additional_root_and_still_not_beside_it(tmp_path, extra):
    bin_dir, log = make_fakes(tmp_path)
    harness = Harness(tmp_path / "ws", bin_dir, log)
    beside = Path(tempfile.mkdtemp(prefix="iac-beside-", dir="/var/tmp"))
    try:
        harness.settings.additional_directories = str(extra)
        command = f"echo yes > {extra}/made.txt; echo no > {beside}/made.txt; echo rc=$?"
        result = await harness.run(command, Asker())
        assert result is not None and result.raw_output["sandbox"] == "bwrap"
        assert (extra / "made.txt").read_text() == "yes\n"
        assert not (beside / "made.txt").exists() and "Read-only file system" in result.content
    finally:
        shutil.rmtree(beside, ignore_errors=True)


async def test_acp_sessions_take_additional_directories(tmp_path, workspace, extra):
    script = tmp_path / "script.json"
    read = {"name": "read_file", "input": {"path": str(extra / "note.txt")}}
    script.write_text(
        json.dumps(
            {
                "name": "extra-root",
                "exchanges": [
                    {"match": "^read", "turns": [{"tool_use": [read]}, {"text": "Read it."}]}
                ],
            }
        )
    )
    async with RawServer.start(server_env(script=script), tmp_path / "stderr.log") as server:
        init = (await server.initialize())["result"]
        assert init["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"] == {}
        params = {"cwd": str(workspace), "mcpServers": [], "additionalDirectories": [str(extra)]}
        made = await server.call("session/new", params)
        sid = made["result"]["sessionId"]
        # In the default mode a read outside the roots would ask; this one runs at once.
        answer = await server.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "read"}]}
        )
        assert answer["result"]["stopReason"] == "end_turn"
        messages = [json.loads(line) for line in server.lines]
        assert not any(m.get("method") == "session/request_permission" for m in messages)
        assert "from the extra root" in json.dumps(messages)
        for method in ("session/load", "session/resume"):
            again = await server.call(method, {**params, "sessionId": sid})
            assert "result" in again, again
        for bad in (["relative/dir"], [str(tmp_path / "missing")], "not-a-list"):
            refused = await server.call("session/new", {**params, "additionalDirectories": bad})
            assert refused["error"]["code"] == -32602, refused
            assert "additionalDirectories" in json.dumps(refused["error"])
    items = [("zNewSessionRequest", params), ("zInitializeResponse", init)]
    assert schema_failures(items) == []


def _roots_script(path: Path, extra: Path) -> Path:
    read = {"name": "read_file", "input": {"path": str(extra / "note.txt")}}
    write = {"name": "write_file", "input": {"path": str(extra / "made.txt"), "content": "{{n}}"}}
    path.write_text(
        json.dumps(
            {
                "name": "roots",
                "vars": {"n": {"pattern": "write (\\w+)", "default": "x"}},
                "exchanges": [
                    {"match": "^read", "turns": [{"tool_use": [read]}, {"text": "Read."}]},
                    {"match": "^write", "turns": [{"tool_use": [write]}, {"text": "Wrote."}]},
                ],
            }
        )
    )
    return path


async def test_the_roots_are_stored_listed_and_activated_again_on_resume(
    tmp_path, workspace, extra
):
    """Over the SDK's client, across two server processes: the roots a session had are in
    its metadata and in session/list; a resume (or load) naming them reads and writes
    there without a question; one without them activates none, as the schema says."""
    from acp import text_block

    from test_acp_support import RecordingClient, acp_server

    env = server_env(script=_roots_script(tmp_path / "script.json", extra))
    cwd = str(workspace)
    client = RecordingClient(default="reject_once")  # a question refuses the call
    async with acp_server(tmp_path, client, env) as (conn, _p, _c, _w):
        made = await conn.new_session(cwd=cwd, additional_directories=[str(extra)])
        sid = made.session_id
        await conn.set_session_mode(mode_id="accept_edits", session_id=sid)
        await conn.prompt(session_id=sid, prompt=[text_block("write one")])
        assert (extra / "made.txt").read_text() == "one" and client.permissions == []

    async with acp_server(tmp_path, client, env) as (conn, _p, _c, _w):
        (info,) = (await conn.list_sessions(cwd=cwd)).sessions
        assert info.session_id == sid and info.additional_directories == [str(extra)]
        await conn.resume_session(
            session_id=sid, cwd=cwd, additional_directories=info.additional_directories
        )
        await conn.prompt(session_id=sid, prompt=[text_block("write two")])
        await conn.prompt(session_id=sid, prompt=[text_block("read it")])
        assert (extra / "made.txt").read_text() == "two" and client.permissions == []
        assert "from the extra root" in json.dumps(
            [u.model_dump(mode="json") for _, u in client.updates]
        )
        await conn.close_session(session_id=sid)

    async with acp_server(tmp_path, client, env) as (conn, _p, _c, _w):
        await conn.load_session(session_id=sid, cwd=cwd)  # no roots named: none active
        await conn.prompt(session_id=sid, prompt=[text_block("write three")])
        (asked,) = client.permissions
        assert (
            "outside the working directory" in asked["tool_call"].field_meta["iac_kernel"]["reason"]
        )
        assert (extra / "made.txt").read_text() == "two"  # the question was refused
        (info,) = (await conn.list_sessions(cwd=cwd)).sessions
        assert not info.additional_directories
    listed = {"sessionId": sid, "cwd": cwd, "additionalDirectories": [str(extra)]}
    assert schema_failures([("zSessionInfo", listed)]) == []
