"""`iac-kernel acp` on an OpenAI-compatible endpoint (the fake one on loopback): auth
methods, the model option, a failed call that leaves the server serving, usage summed."""

from __future__ import annotations

from acp import text_block

from fake_openai import Call, Chat, Failure, FakeOpenAIServer
from test_acp_support import acp_server, server_env


async def test_an_acp_session_on_an_openai_compatible_endpoint(tmp_path, workspace):
    (workspace / "main.tf").write_text('resource "aws_s3_bucket" "logs" {}\n')
    with FakeOpenAIServer() as server:
        env = server_env(
            None,
            IAC_KERNEL_PROVIDER="openai",
            OPENAI_API_KEY="sk-openai-acp-test-99",
            OPENAI_BASE_URL=server.url,
            IAC_KERNEL_MODEL="fake-large",
        )
        server.enqueue(
            Failure(401, "bad key sk-openai-acp-test-99"),
            Chat(
                reasoning="look first",
                calls=[Call("call_x", "read_file", ['{"path"', ': "main.tf"}'])],
                finish_reason="tool_calls",
                usage={"prompt_tokens": 50, "completion_tokens": 5},
            ),
            Chat(text="One bucket.", usage={"prompt_tokens": 80, "completion_tokens": 3}),
        )
        async with acp_server(tmp_path, env=env, initialize=False) as (conn, _p, _client, wire):
            init = await conn.initialize(protocol_version=1)
            assert init.auth_methods == []  # credentials are configured
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            sid = session.session_id
            (model,) = [o for o in session.config_options if o.id == "model"]
            assert model.current_value == "openai:fake-large"
            offered = {o.value for o in model.options}
            assert {"openai:fake-large", "openai:gpt-4.1", "scripted"} <= offered

            failed = await conn.prompt(session_id=sid, prompt=[text_block("what is here?")])
            assert failed.stop_reason == "end_turn"
            texts = [
                u["content"]["text"]
                for _, u in wire.updates_of(sid)
                if u["sessionUpdate"] == "agent_message_chunk"
            ]
            assert any("OPENAI_API_KEY" in t and "401" in t for t in texts)
            assert not any("sk-openai-acp-test-99" in t for t in texts)

            answer = await conn.prompt(session_id=sid, prompt=[text_block("what is here?")])
            assert answer.stop_reason == "end_turn"
            assert answer.usage.input_tokens == 130 and answer.usage.output_tokens == 8
            kinds = [u["sessionUpdate"] for _, u in wire.updates_of(sid)]
            assert "agent_thought_chunk" in kinds and "tool_call" in kinds
            switched = await conn.set_config_option(
                session_id=sid, config_id="model", value="scripted"
            )
            assert switched is not None
    assert server.chat_requests()[0].body["model"] == "fake-large"
