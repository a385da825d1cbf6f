"""session/request_permission: every option, the alias answer forms, and refusals that
never run the tool (checked on the file system)."""

from __future__ import annotations

import pytest
from acp import text_block

from test_acp_support import RecordingClient, acp_server

WRITTEN = "written by the agent\n"


async def _write(tmp_path, workspace, answers, prompt="write the file"):
    client = RecordingClient()
    client.answers.extend(answers)
    async with acp_server(tmp_path, client) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block(prompt)])
    return client, sid, answer


async def test_allow_once_runs_the_tool(tmp_path, workspace):
    client, sid, answer = await _write(tmp_path, workspace, ["allow_once"])
    assert answer.stop_reason == "end_turn"
    assert (workspace / "out.txt").read_text() == WRITTEN
    (call_id,) = client.tool_ids(sid)
    assert client.permissions[0]["tool_call"].tool_call_id == call_id
    assert client.final_status(sid, call_id) == "completed"


@pytest.mark.parametrize(
    "answer",
    [
        "reject_once",
        "reject_always",
        {"outcome": "denied"},
        {"outcome": {"outcome": "selected", "optionId": "not_an_option"}},
        {"something": "unreadable"},
    ],
    ids=["reject_once", "reject_always", "denied-alias", "unknown-option", "unreadable"],
)
async def test_refusals_never_run_the_tool(tmp_path, workspace, answer):
    (workspace / "out.txt").write_text("original\n")
    client, sid, prompt_answer = await _write(tmp_path, workspace, [answer])
    assert prompt_answer.stop_reason == "end_turn"
    assert (workspace / "out.txt").read_text() == "original\n"
    (call_id,) = client.tool_ids(sid)
    final = client.tool_updates(sid, call_id)[-1]
    assert final.status == "failed"
    assert final.raw_output is None  # a plain result's text is sent once, as content
    assert final.content[0].content.text.startswith("Permission denied.")
    # The model was told and finished its turn.
    assert client.text(sid).endswith("Done writing.")


async def test_allowed_alias_form_runs_the_tool(tmp_path, workspace):
    answer = {"outcome": "allowed", "option_id": "allow_once"}
    client, sid, prompt_answer = await _write(tmp_path, workspace, [answer])
    assert prompt_answer.stop_reason == "end_turn"
    assert (workspace / "out.txt").read_text() == WRITTEN
    assert [client.final_status(sid, c) for c in client.tool_ids(sid)] == ["completed"]


async def test_allowed_alias_naming_a_reject_option_is_a_refusal(tmp_path, workspace):
    answer = {"outcome": "allowed", "option_id": "reject_once"}
    client, sid, _answer = await _write(tmp_path, workspace, [answer])
    assert not (workspace / "out.txt").exists()
    assert [client.final_status(sid, c) for c in client.tool_ids(sid)] == ["failed"]


async def test_allow_always_does_not_ask_again(tmp_path, workspace):
    client, sid, answer = await _write(tmp_path, workspace, ["allow_always"], "write twice")
    assert answer.stop_reason == "end_turn"
    assert len(client.permissions) == 1
    assert [client.final_status(sid, c) for c in client.tool_ids(sid)] == ["completed"] * 2
    assert (workspace / "a.txt").read_text() == "first\n"
    assert (workspace / "b.txt").read_text() == "second\n"


async def test_reject_once_asks_again(tmp_path, workspace):
    client, sid, _answer = await _write(
        tmp_path, workspace, ["reject_once", "reject_once"], "write twice"
    )
    assert len(client.permissions) == 2
    assert [p["tool_call"].tool_call_id for p in client.permissions] == client.tool_ids(sid)
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()


async def test_reject_always_stops_asking_and_never_runs(tmp_path, workspace):
    client, sid, answer = await _write(tmp_path, workspace, ["reject_always"], "write twice")
    assert answer.stop_reason == "end_turn"
    assert len(client.permissions) == 1
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    statuses = [client.final_status(sid, c) for c in client.tool_ids(sid)]
    assert statuses == ["failed", "failed"]


async def test_cancelled_outcome_ends_the_turn_cancelled(tmp_path, workspace):
    client, sid, answer = await _write(tmp_path, workspace, ["cancelled"])
    assert answer.stop_reason == "cancelled"
    assert not (workspace / "out.txt").exists()
    (call_id,) = client.tool_ids(sid)
    assert client.final_status(sid, call_id) == "failed"


async def test_dangerous_command_gets_only_per_call_options(tmp_path, workspace):
    client = RecordingClient(default="reject_once")
    async with acp_server(tmp_path, client) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.set_config_option(config_id="mode", session_id=sid, value="bypass")
        answer = await conn.prompt(session_id=sid, prompt=[text_block("apply the plan")])
    assert answer.stop_reason == "end_turn"
    (request,) = client.permissions
    assert request["tool_call"].title == "bash: terraform apply -auto-approve"
    assert [o.option_id for o in request["options"]] == ["allow_once", "reject_once"]
