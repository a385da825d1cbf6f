"""session/prompt over a real ACP client: streaming, tool calls, stop reasons, usage,
content blocks, and config options that change behaviour."""

from __future__ import annotations

import os

import pytest
from acp import RequestError, text_block
from acp.schema import (
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextResourceContents,
)

from iac_kernel.sessions.store import SessionStore
from test_acp_support import SCRIPTS, acp_server


def stored_messages(session_id: str) -> list[dict]:
    return SessionStore(os.environ["IAC_KERNEL_SESSIONS_DIR"]).read(session_id).messages


async def test_initialize_answers_capabilities(tmp_path):
    async with acp_server(tmp_path, initialize=False) as (conn, _p, _c, _w):
        answer = await conn.initialize(protocol_version=1)
    assert answer.protocol_version == 1
    caps = answer.agent_capabilities
    assert caps.load_session is True
    assert caps.prompt_capabilities.embedded_context is True
    assert caps.prompt_capabilities.image is False
    assert caps.prompt_capabilities.audio is False
    sessions = caps.session_capabilities
    assert sessions.list is not None and sessions.close is not None
    assert sessions.fork is not None and sessions.resume is not None
    assert answer.agent_info.name == "iac-kernel"
    # No credentials here: one env-var method per provider that could be configured.
    methods = [m.model_dump(by_alias=True, exclude_none=True) for m in answer.auth_methods]
    assert [m["_meta"]["iac_kernel"]["envVar"] for m in methods] == [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "DASHSCOPE_API_KEY",
        "DEEPSEEK_API_KEY",
    ]
    assert all(m["description"].startswith("Set ") for m in methods)


async def test_prompt_streams_thought_and_text_before_the_answer(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, wire):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        assert session.modes.current_mode_id == "default"
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hello there")])
        assert answer.stop_reason == "end_turn"
        assert (answer.usage.input_tokens, answer.usage.output_tokens) == (11, 7)
        assert answer.usage.total_tokens == 18
        assert client.text(sid, "agent_thought_chunk") == "The user greets me."
        assert client.text(sid) == "Hello from the script."
        # The usage update arrived with the turn, before the answer.
        assert client.of(sid, "usage_update")

    prompt_answer = wire.index_of_answer(lambda m: m.get("result", {}).get("stopReason"))
    updates = wire.updates_of(sid)
    chunks = [i for i, u in updates if u["sessionUpdate"].endswith("_chunk")]
    before = {u["sessionUpdate"] for i, u in updates if i < prompt_answer}
    assert chunks and max(chunks) < prompt_answer
    # The title and the usage belong to the turn: sent before its answer, none after.
    assert {"session_info_update", "usage_update"} <= before
    assert [u for i, u in updates if i > prompt_answer] == []
    title = next(u for _i, u in updates if u["sessionUpdate"] == "session_info_update")
    assert title["title"] == "hello there"


async def test_usage_is_summed_over_the_turn(tmp_path, workspace):
    (workspace / "out.txt").write_text("old\n")
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("write the file")])
    assert answer.stop_reason == "end_turn"
    assert answer.usage.input_tokens == 30
    assert answer.usage.output_tokens == 8
    assert answer.usage.total_tokens == 38


async def test_usage_update_follows_each_model_call(tmp_path, workspace):
    """ModelCallDone -> usage_update: a client's context meter moves during the turn."""
    (workspace / "out.txt").write_text("old\n")
    async with acp_server(tmp_path) as (conn, _p, _c, wire):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("write the file")])
    kinds = [u["sessionUpdate"] for _i, u in wire.updates_of(sid)]
    # Two model calls (the write, then the text after it), then the turn's own update.
    assert kinds.count("usage_update") == 3
    first = kinds.index("usage_update")
    result = max(i for i, k in enumerate(kinds) if k == "tool_call_update")
    assert kinds.index("tool_call") < first < result, "the first call's usage before the tool ran"
    sizes = [u for _i, u in wire.updates_of(sid) if u["sessionUpdate"] == "usage_update"]
    assert all(u["size"] > 0 and u["used"] >= 0 for u in sizes)


async def test_write_tool_call_has_title_kind_input_locations_and_diff(tmp_path, workspace):
    (workspace / "out.txt").write_text("old content\n")
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("write the file")])
    assert answer.stop_reason == "end_turn"
    (call_id,) = client.tool_ids(sid)
    start, with_input, result = client.tool_updates(sid, call_id)
    assert start.session_update == "tool_call"
    assert (start.kind, start.status) == ("edit", "in_progress")
    assert with_input.title == "write_file: out.txt"
    assert with_input.raw_input == {"path": "out.txt", "content": "written by the agent\n"}
    assert [loc.path for loc in with_input.locations] == [str(workspace / "out.txt")]
    (diff,) = with_input.content
    assert (diff.type, diff.old_text, diff.new_text) == (
        "diff",
        "old content\n",
        "written by the agent\n",
    )
    assert result.status == "completed"
    assert result.raw_output["path"] == str(workspace / "out.txt")
    assert any(c.type == "diff" for c in result.content)
    # The permission request speaks of the same tool call.
    (request,) = client.permissions
    assert request["tool_call"].tool_call_id == call_id
    assert request["tool_call"].title == "write_file: out.txt"
    assert request["tool_call"].kind == "edit"
    assert [o.option_id for o in request["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert (workspace / "out.txt").read_text() == "written by the agent\n"


async def test_edit_read_and_bash_tool_calls(tmp_path, workspace):
    (workspace / "main.tf").write_text('resource "aws_instance" "web" {\n  type = "t2.micro"\n}\n')
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        for prompt in ("edit the file", "read the file", "run a command"):
            answer = await conn.prompt(session_id=sid, prompt=[text_block(prompt)])
            assert answer.stop_reason == "end_turn"
    edit, read, bash = client.tool_ids(sid)
    edit_input = client.tool_updates(sid, edit)[1]
    assert edit_input.title == "edit_file: main.tf"
    assert edit_input.content[0].new_text.count("t3.small") == 1
    assert client.final_status(sid, edit) == "completed"
    assert "t3.small" in (workspace / "main.tf").read_text()

    read_updates = client.tool_updates(sid, read)
    assert read_updates[0].kind == "read"
    assert read_updates[1].locations[0].path == str(workspace / "main.tf")
    assert client.final_status(sid, read) == "completed"

    bash_updates = client.tool_updates(sid, bash)
    assert bash_updates[0].kind == "execute"
    assert bash_updates[1].title == "bash: echo from-bash"
    assert bash_updates[-1].status == "completed"
    assert bash_updates[-1].raw_output["exit_code"] == 0
    assert "from-bash" in bash_updates[-1].content[0].content.text
    # Reads run without asking; the edit and the command asked.
    assert [p["tool_call"].tool_call_id for p in client.permissions] == [edit, bash]


async def test_stop_reasons_end_turn_max_tokens_refusal(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("hello")])).stop_reason == (
            "end_turn"
        )
        cut = await conn.prompt(session_id=sid, prompt=[text_block("cut off")])
        assert cut.stop_reason == "max_tokens"
        refused = await conn.prompt(session_id=sid, prompt=[text_block("refuse")])
        assert refused.stop_reason == "refusal"
        assert "I will not help with that." in client.text(sid)


async def test_max_tokens_config_cuts_a_long_answer(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        options = await conn.set_config_option(config_id="max_tokens", session_id=sid, value="5")
        current = {o.id: o.current_value for o in options.config_options}
        assert current["max_tokens"] == "5"
        answer = await conn.prompt(session_id=sid, prompt=[text_block("long answer")])
        assert answer.stop_reason == "max_tokens"
        assert "omega" not in client.text(sid)
        await conn.set_config_option(config_id="max_tokens", session_id=sid, value="8192")
        client.clear()
        answer = await conn.prompt(session_id=sid, prompt=[text_block("long answer")])
        assert answer.stop_reason == "end_turn"
        assert client.text(sid).endswith("omega.")


async def test_max_turn_requests_config_stops_a_tool_loop(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.set_config_option(config_id="max_turn_requests", session_id=sid, value="2")
        answer = await conn.prompt(session_id=sid, prompt=[text_block("keep reading")])
        assert answer.stop_reason == "max_turn_requests"
        calls = client.tool_ids(sid)
        assert len(calls) == 2
        assert all(client.final_status(sid, c) == "completed" for c in calls)
        assert "Finally done reading." not in client.text(sid)


async def test_unknown_config_option_and_bad_values_are_invalid_params(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        with pytest.raises(RequestError) as unknown:
            await conn.set_config_option(config_id="warp_speed", session_id=sid, value="9")
        assert unknown.value.code == -32602
        assert "configId" in unknown.value.data
        with pytest.raises(RequestError) as bad:
            await conn.set_config_option(config_id="max_tokens", session_id=sid, value="lots")
        assert bad.value.code == -32602 and "value" in bad.value.data
        with pytest.raises(RequestError) as mode:
            await conn.set_session_mode(session_id=sid, mode_id="yolo")
        assert mode.value.code == -32602 and "modeId" in mode.value.data
        with pytest.raises(RequestError) as missing:
            await conn.set_config_option(config_id="mode", session_id="nope", value="default")
        assert missing.value.code == -32602
        assert missing.value.data == {"session_id": "Session not found"}


async def test_model_switch_changes_the_answers(tmp_path, workspace):
    model_a = f"scripted:{SCRIPTS / 'acp_model_a.json'}"
    model_b = f"scripted:{SCRIPTS / 'acp_model_b.json'}"
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        session = await conn.new_session(cwd=str(workspace))
        sid = session.session_id
        model = next(o for o in session.config_options if o.id == "model")
        assert model.current_value == "scripted"
        options = await conn.set_config_option(config_id="model", session_id=sid, value=model_a)
        assert next(o for o in options.config_options if o.id == "model").current_value == model_a
        await conn.prompt(session_id=sid, prompt=[text_block("who are you")])
        assert client.text(sid) == "Answer from script A."
        client.clear()
        await conn.set_config_option(config_id="model", session_id=sid, value=model_b)
        await conn.prompt(session_id=sid, prompt=[text_block("who are you")])
        assert client.text(sid) == "Answer from script B."
        with pytest.raises(RequestError) as bad:
            await conn.set_config_option(
                config_id="model", session_id=sid, value="scripted:/no/such/script.json"
            )
        assert bad.value.code == -32602


async def test_mode_config_option_read_only_denies_writes_without_asking(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        options = await conn.set_config_option(config_id="mode", session_id=sid, value="read_only")
        assert next(o for o in options.config_options if o.id == "mode").current_value == (
            "read_only"
        )
        answer = await conn.prompt(session_id=sid, prompt=[text_block("write the file")])
        assert answer.stop_reason == "end_turn"
        (call_id,) = client.tool_ids(sid)
        final = client.tool_updates(sid, call_id)[-1]
        assert final.status == "failed"
        assert final.raw_output is None and "read_only" in final.content[0].content.text
        await _wait_for_update(client, sid, "current_mode_update")
    assert client.permissions == []
    assert not (workspace / "out.txt").exists()


async def test_set_mode_accept_edits_writes_without_asking(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.set_session_mode(session_id=sid, mode_id="accept_edits")
        answer = await conn.prompt(session_id=sid, prompt=[text_block("write the file")])
        assert answer.stop_reason == "end_turn"
        await _wait_for_update(client, sid, "config_option_update")
    assert client.permissions == []
    assert (workspace / "out.txt").read_text() == "written by the agent\n"


async def test_content_blocks_reach_the_model_as_text(tmp_path, workspace):
    prompt = [
        text_block("hello, look at these"),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(
                uri=f"file://{workspace}/vars.tf",
                text='variable "region" {}',
                mime_type="text/plain",
            ),
        ),
        ResourceContentBlock(
            type="resource_link", uri=f"file://{workspace}/main.tf", name="main.tf"
        ),
        ImageContentBlock(type="image", data="aGVsbG8=", mime_type="image/png"),
        AudioContentBlock(type="audio", data="aGVsbG8=", mime_type="audio/wav"),
    ]
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        answer = await conn.prompt(session_id=sid, prompt=prompt)
        assert answer.stop_reason == "end_turn"
        with pytest.raises(RequestError) as empty:
            await conn.prompt(session_id=sid, prompt=[])
        assert empty.value.code == -32602 and "prompt" in empty.value.data
    texts = [b["text"] for b in stored_messages(sid)[0]["content"]]
    assert texts[0] == "hello, look at these"
    assert 'variable "region" {}' in texts[1] and f"{workspace}/vars.tf" in texts[1]
    assert texts[2].startswith(f"[file: {workspace}/main.tf]")
    assert texts[3:] == ["[image: image/png]", "[audio: audio/wav]"]


async def _wait_for_update(client, sid, kind):
    from test_acp_support import wait_until

    await wait_until(lambda: client.of(sid, kind), kind)
