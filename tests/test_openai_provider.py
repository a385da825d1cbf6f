"""The OpenAI-compatible provider through the real ``openai`` SDK, against a fake endpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core_support import RecordingPersist, assert_history_valid
from fake_openai import Call, Chat, Empty, Failure, FakeOpenAIServer
from iac_kernel.agent.loop import AgentLoop, Conversation
from iac_kernel.agent.permissions import PermissionGate
from iac_kernel.config import Settings
from iac_kernel.events import ErrorNotice, TextDelta, ThinkingDelta, ToolCallResult, ToolCallStarted
from iac_kernel.models.base import ModelError, ModelRequest
from iac_kernel.models.openai import create_openai_model
from iac_kernel.models.registry import create_model
from iac_kernel.models.retry import RetryPolicy
from iac_kernel.tools.registry import build_tools

FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, jitter=0)


@pytest.fixture
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def use(monkeypatch: pytest.MonkeyPatch, provider: str, url: str, key: str | None = None) -> None:
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", provider)
    monkeypatch.setenv("IAC_KERNEL_BASE_URL", url)
    env = {"openai": "OPENAI_API_KEY", "deepseek": "DEEPSEEK_API_KEY"}
    env["dashscope"] = "DASHSCOPE_API_KEY"
    if key and provider in env:
        monkeypatch.setenv(env[provider], key)


async def run(model: Any, cwd: Path, text: str = "what is here?", **settings: Any):
    persist = RecordingPersist()
    loop = AgentLoop(
        model=model,
        tools=build_tools(),
        gate=PermissionGate(),
        settings=Settings(**settings),
        cwd=cwd,
        system_prompt="sys",
        conversation=Conversation(),
        persist=persist,
    )
    events: list[Any] = []
    ended = await loop.run_turn([{"type": "text", "text": text}], events.append, None)
    return ended, events, persist


async def test_reasoning_text_and_a_fragmented_tool_call_then_an_answer(
    server, monkeypatch, workspace
):
    (workspace / "main.tf").write_text('resource "aws_s3_bucket" "logs" {}\n')
    use(monkeypatch, "deepseek", server.url, "sk-deepseek-test-1234")
    usage = {"prompt_tokens": 100, "completion_tokens": 20}
    usage["prompt_tokens_details"] = {"cached_tokens": 30}
    server.enqueue(
        Chat(
            reasoning="I should read main.tf first.",
            text="Reading it.",
            calls=[Call("call_1", "read_file", ['{"pa', 'th": "ma', 'in.tf"', "}"])],
            finish_reason="tool_calls",
            usage=usage,
        ),
        Chat(text="It defines one bucket.", usage={"prompt_tokens": 150, "completion_tokens": 7}),
    )
    model = create_model("deepseek:deepseek-flash")
    ended, events, persist = await run(model, workspace)

    assert ended.stop_reason == "end_turn"
    thought = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thought == "I should read main.tf first."
    said = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert said == "Reading it.It defines one bucket."
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(s.call_id, s.name) for s in started] == [("call_1", "read_file")]
    result = next(e for e in events if isinstance(e, ToolCallResult))
    assert result.status == "completed" and "aws_s3_bucket" in result.output
    # Usage summed over both calls; cached tokens counted apart.
    assert (ended.usage.input_tokens, ended.usage.cache_read_tokens) == (70 + 150, 30)
    assert ended.usage.output_tokens == 27
    # What the second request carried back: the call, its reasoning (DeepSeek wants it
    # within the tool loop) and the result as a tool message with the matching id.
    first, second = (r.body for r in server.chat_requests())
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert first["messages"][0] == {"role": "system", "content": "sys"}
    assert first["max_tokens"] == 8192
    tools = {t["function"]["name"]: t for t in first["tools"]}
    assert tools["read_file"]["type"] == "function"
    assert tools["read_file"]["function"]["parameters"]["type"] == "object"
    assistant, tool = second["messages"][-2:]
    assert assistant["role"] == "assistant" and assistant["content"] == "Reading it."
    assert assistant["reasoning_content"] == "I should read main.tf first."
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "main.tf"}'},
        }
    ]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert "aws_s3_bucket" in tool["content"]
    # The key reached the Authorization header.
    assert server.chat_requests()[0].headers["authorization"] == "Bearer sk-deepseek-test-1234"
    # Stored in the one history shape: thinking (unsigned), text, tool_use.
    stored = persist.messages[1]["content"]
    assert [b["type"] for b in stored] == ["thinking", "text", "tool_use"]
    assert stored[0]["signature"] == "" and stored[2]["input"] == {"path": "main.tf"}
    assert_history_valid(persist.messages)


@pytest.mark.parametrize(
    ("finish", "stop"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "refusal")],
)
async def test_finish_reasons(server, monkeypatch, workspace, finish, stop):
    use(monkeypatch, "openai", server.url, "sk-openai-test-1234")
    server.enqueue(Chat(text="Partial answer", finish_reason=finish))
    ended, _events, _persist = await run(create_model("openai:gpt-4.1"), workspace)
    assert ended.stop_reason == stop
    # OpenAI's own API takes the limit as max_completion_tokens.
    assert server.chat_requests()[0].body["max_completion_tokens"] == 8192


async def test_a_malformed_tool_call_gets_an_error_result_and_the_turn_goes_on(
    server, monkeypatch, workspace
):
    use(monkeypatch, "openai", server.url, "sk-openai-test-1234")
    server.enqueue(
        Chat(calls=[Call("call_9", "read_file", ['{"path": "ma'])], finish_reason="tool_calls"),
        Chat(text="Sorry, retried in words."),
    )
    ended, events, persist = await run(create_model("openai:gpt-4.1"), workspace)
    assert ended.stop_reason == "end_turn"
    result = next(e for e in events if isinstance(e, ToolCallResult))
    assert result.status == "failed" and "not a JSON object" in result.output
    tool = server.chat_requests()[1].body["messages"][-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_9"
    assert tool["content"].startswith("Error: Not run:")
    assert_history_valid(persist.messages)


async def test_401_names_the_provider_and_the_variable(server, monkeypatch, workspace):
    use(monkeypatch, "dashscope", server.url, "sk-dashscope-bad-0000")
    server.enqueue(Failure(401, "Incorrect API key provided: sk-dashscope-bad-0000"))
    ended, events, _persist = await run(create_model("dashscope:qwen-plus"), workspace)
    notice = next(e.message for e in events if isinstance(e, ErrorNotice))
    assert "DashScope" in notice and "DASHSCOPE_API_KEY" in notice and "401" in notice
    assert "sk-dashscope-bad-0000" not in notice
    assert ended.stop_reason == "end_turn"
    # The preset's own key reached the Authorization header.
    assert server.chat_requests()[0].headers["authorization"] == "Bearer sk-dashscope-bad-0000"


async def test_404_lists_the_endpoints_models(server, monkeypatch):
    use(monkeypatch, "openai", server.url, "sk-openai-test-1234")
    server.enqueue(Failure(404, "The model `gpt-nope` does not exist"))
    model = create_openai_model("openai", "gpt-nope", retry=FAST)
    with pytest.raises(ModelError) as caught:
        await _drain(model)
    text = str(caught.value)
    assert "gpt-nope" in text and "fake-large, fake-small" in text and caught.value.status == 404


async def test_429_then_success(server, monkeypatch):
    use(monkeypatch, "openai", server.url, "sk-openai-test-1234")
    server.enqueue(Failure(429, "slow down", {"retry-after": "0"}), Chat(text="fine"))
    retries: list[str] = []
    model = create_openai_model(
        "openai", "gpt-4.1", retry=FAST, on_retry=lambda a, d, r: retries.append(r)
    )
    events = await _drain(model)
    assert events[-1].content == [{"type": "text", "text": "fine"}]
    assert retries == ["rate limited by OpenAI (429)"]


async def test_a_stream_dropped_before_output_is_retried_as_dropped(server, monkeypatch):
    # The role chunk only, then the connection is cut: nothing reached the caller.
    use(monkeypatch, "openai", server.url, "sk-openai-test-1234")
    server.enqueue(Chat(text="lost", drop_after=1), Chat(text="fresh"))
    retries: list[str] = []
    model = create_openai_model(
        "openai", "gpt-4.1", retry=FAST, on_retry=lambda a, d, r: retries.append(r)
    )
    events = await _drain(model)
    assert events[-1].content == [{"type": "text", "text": "fresh"}]
    assert retries == ["the response stream was dropped"]


async def test_5xx_gives_up_with_one_clear_line(server, monkeypatch):
    use(monkeypatch, "openai", server.url, "sk-openai-test-1234")
    server.enqueue(*[Failure(503, "busy")] * 3)
    model = create_openai_model("openai", "gpt-4.1", retry=FAST)
    with pytest.raises(ModelError) as caught:
        await _drain(model)
    assert "gave up after 3 attempts" in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.retryable


async def test_an_empty_stream_hints_at_the_v1_suffix(monkeypatch):
    with FakeOpenAIServer(prefix="") as server:
        use(monkeypatch, "ollama", server.url)
        server.enqueue(Empty())
        with pytest.raises(ModelError, match="need a /v1 suffix"):
            await _drain(create_openai_model("ollama", "llama3.2", retry=FAST))
        # Ollama needs no key: the SDK's placeholder is sent, never OPENAI_API_KEY.
        assert server.chat_requests()[0].headers["authorization"] == "Bearer ollama"


async def test_an_unreachable_url_is_named(monkeypatch):
    use(monkeypatch, "ollama", "http://127.0.0.1:9/v1")
    with pytest.raises(ModelError, match=r"could not connect to Ollama at http://127.0.0.1:9/v1"):
        await _drain(create_openai_model("ollama", "llama3.2", retry=FAST))


@pytest.mark.parametrize("provider", ["openai", "deepseek", "ollama"])
async def test_openai_account_headers_go_to_openai_only(server, monkeypatch, provider):
    """OPENAI_ORG_ID / OPENAI_PROJECT_ID name an OpenAI account: another endpoint (a
    preset, or OPENAI_BASE_URL pointed elsewhere) never gets them; OpenAI's host does."""
    monkeypatch.setenv("OPENAI_ORG_ID", "org-private-1234")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj_private_5678")
    use(monkeypatch, provider, server.url, key="sk-test-1234")
    server.enqueue(Chat(text="ok"))
    await _drain(create_openai_model(provider, "m", retry=FAST))
    headers = server.chat_requests()[0].headers
    assert "openai-organization" not in headers and "openai-project" not in headers
    assert "org-private-1234" not in json.dumps(headers)
    monkeypatch.setenv("IAC_KERNEL_BASE_URL", "https://api.openai.com/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-1234")
    official = create_openai_model("openai", "gpt-4.1").client
    assert (official.organization, official.project) == ("org-private-1234", "proj_private_5678")


def test_a_preset_never_borrows_the_openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-only-1234")
    with pytest.raises(ModelError, match="set DEEPSEEK_API_KEY"):
        create_openai_model("deepseek", "deepseek-flash")


async def _drain(model: Any) -> list[Any]:
    request = ModelRequest(system="s", messages=[{"role": "user", "content": "hi"}])
    return [event async for event in model.stream(request)]


def test_stored_history_converts_to_chat_messages():
    from iac_kernel.models.openai import convert_messages

    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "c2ln"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom"},
                {"type": "text", "text": "and now?"},
            ],
        },
    ]
    history[2]["content"][0]["is_error"] = True
    out = convert_messages(history)
    assert out[0] == {"role": "user", "content": "look"}
    assert out[1]["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    assert "reasoning_content" not in out[1]  # Claude's thinking is not sent elsewhere
    assert out[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: boom"}
    assert out[3] == {"role": "user", "content": "and now?"}
    assert json.dumps(out)  # plain JSON all the way


def test_parallel_calls_that_reuse_index_zero_stay_apart():
    from types import SimpleNamespace as NS

    from iac_kernel.models.openai import ChunkBuilder

    def fragment(id, name, args):
        return NS(index=0, id=id, function=NS(name=name, arguments=args))

    builder = ChunkBuilder()
    for piece in (
        fragment("c1", "read_file", '{"path": "a"}'),
        fragment("c2", "read_file", '{"path":'),
        fragment(None, None, ' "b"}'),
    ):
        delta = NS(content=None, tool_calls=[piece], model_extra={})
        builder.feed(NS(usage=None, choices=[NS(index=0, delta=delta, finish_reason=None)]))
    ends = [e for e in builder.finish_tools() if type(e).__name__ == "ToolUseEnd"]
    assert [(e.id, e.input) for e in ends] == [("c1", {"path": "a"}), ("c2", {"path": "b"})]
