"""A bash apply through ``iac-kernel acp``: one question to the ACP client, with the plan,
and an audit record naming that client (real terraform, real guard)."""

from __future__ import annotations

import os
from pathlib import Path

from acp import text_block
from acp.schema import Implementation

from apply_support import trail_records
from core_support import write_script
from terraform_support import (
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
)
from test_acp_support import WAIT, RecordingClient, acp_server, server_env

pytestmark = needs_terraform


async def test_an_acp_client_approves_a_bash_apply_once_and_is_recorded(
    applied: Path, tmp_path: Path, isolated_store: Path
):
    import asyncio

    ws = stage2_copy(applied, tmp_path / "ws", plan="p.tfplan")
    command = "terraform apply -input=false -no-color p.tfplan"
    turns = [{"tool_use": [{"name": "bash", "input": {"command": command}}]}, {"text": "done"}]
    script = write_script(tmp_path / "apply.json", [{"turns": turns}])
    env = server_env(script, PATH=os.environ["PATH"], TF_CLI_CONFIG_FILE="/dev/null")
    env["TMPDIR"] = os.environ.get("TMPDIR", "/tmp")
    client = RecordingClient()
    client.answers.append("allow_once")
    async with acp_server(tmp_path, client, env=env, initialize=False) as (conn, *_rest):
        info = Implementation(name="test-editor", version="1")
        await asyncio.wait_for(conn.initialize(protocol_version=1, client_info=info), WAIT)
        sid = (await conn.new_session(cwd=str(ws))).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("apply it")])
    assert answer.stop_reason == "end_turn"
    (question,) = client.permissions
    meta = question["tool_call"].field_meta["iac_kernel"]
    assert "Apply of the saved plan p.tfplan: 2 to destroy" in meta["reason"]
    assert "terraform_data.new[0]" in addresses(ws)
    (record,) = trail_records(isolated_store)
    assert record["approver"] == "ACP client (test-editor)"
    assert record["origin"] == "acp" and record["outcome"] == "applied"
