"""AnthropicModel through the real anthropic SDK, against the local fake Messages API."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

from iac_kernel.events import Usage
from iac_kernel.models.anthropic import (
    CONTEXT_1M_BETA,
    AnthropicModel,
    RetryPolicy,
    create_anthropic_model,
    resolve_model,
)
from iac_kernel.models.base import (
    MessageDone,
    ModelError,
    ModelRequest,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
)
from iac_kernel.models.providers import claude_available, provider_from_env

sys.path.insert(0, str(Path(__file__).parent))
from fake_anthropic import (
    ErrorResponse,
    FakeAnthropicServer,
    StreamedMessage,
    redacted_thinking,
    sent_credential,
    text,
    thinking,
    tool_use,
)

API_KEY = "sk-ant-test-0123456789abcdef"
FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)

ENV_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_PROFILE",
    "IAC_KERNEL_PROVIDER",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "AWS_BEARER_TOKEN_BEDROCK",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "ANTHROPIC_VERTEX_BASE_URL",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    # Keep the SDK away from any credential profile on this machine.
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))


@pytest.fixture
def server():
    with FakeAnthropicServer() as fake:
        yield fake


class Retries:
    """An on_retry callback that records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, float, str]] = []

    def __call__(self, attempt: int, delay: float, reason: str) -> None:
        self.calls.append((attempt, delay, reason))


def make_model(server: FakeAnthropicServer, model_id: str = "claude-sonnet-4-5", **kwargs: Any):
    kwargs.setdefault("retry", FAST)
    return AnthropicModel(model_id, base_url=server.url, api_key=API_KEY, **kwargs)


def request(**kwargs: Any) -> ModelRequest:
    kwargs.setdefault("system", "You are an IaC agent.")
    kwargs.setdefault("messages", [{"role": "user", "content": "hello"}])
    return ModelRequest(**kwargs)


async def collect(model: AnthropicModel, req: ModelRequest | None = None) -> list[Any]:
    return [event async for event in model.stream(req or request())]


async def collect_until_error(model: AnthropicModel, req: ModelRequest | None = None):
    events: list[Any] = []
    with pytest.raises(ModelError) as info:
        async for event in model.stream(req or request()):
            events.append(event)
    return events, info.value


def texts(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextChunk)]


def done(events: list[Any]) -> MessageDone:
    assert isinstance(events[-1], MessageDone)
    assert sum(isinstance(e, MessageDone) for e in events) == 1
    return events[-1]


# --- streaming -------------------------------------------------------------------------------


async def test_text_deltas_arrive_in_order_and_request_is_mapped(server):
    server.enqueue(StreamedMessage([text("Hello from the fake API")], chunk_size=4))
    model = make_model(server, prompt_caching=False)
    events = await collect(model, request(max_tokens=1234))

    assert texts(events) == ["Hell", "o fr", "om t", "he f", "ake ", "API"]
    message = done(events)
    assert message.content == [{"type": "text", "text": "Hello from the fake API"}]
    assert message.stop_reason == "end_turn"

    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.body["model"] == "claude-sonnet-4-5"
    assert sent.body["max_tokens"] == 1234
    assert sent.body["stream"] is True
    assert sent.body["system"] == "You are an IaC agent."
    assert sent.body["messages"] == [{"role": "user", "content": "hello"}]
    assert "thinking" not in sent.body and "tools" not in sent.body
    assert sent_credential(sent) == API_KEY
    # Our retry policy, not the SDK's.
    assert sent.headers["x-stainless-retry-count"] == "0"


async def test_text_is_yielded_while_the_server_is_still_streaming(server):
    message = StreamedMessage([text("first second")], chunk_size=6, hold_before=4)
    server.enqueue(message)
    stream = make_model(server).stream(request())
    try:
        first = await anext(stream)
        while not isinstance(first, TextChunk):
            first = await anext(stream)
        assert first.text == "first "
        # The server is parked before its 5th event, so the provider cannot have buffered.
        assert message.events_sent <= 4
        message.release()
        rest = [event async for event in stream]
    finally:
        message.release()
        await stream.aclose()
    assert texts(rest) == ["second"]
    assert done(rest).content == [{"type": "text", "text": "first second"}]


async def test_tool_use_input_is_assembled_from_json_chunks(server):
    server.enqueue(
        StreamedMessage(
            [
                text("Let me look."),
                tool_use(
                    "toolu_1",
                    "bash",
                    partial_json=['{"comm', 'and": "terraform', ' plan", "timeout"', ": 30}"],
                ),
                tool_use("toolu_2", "list_files", partial_json=[]),
            ],
            stop_reason="tool_use",
        )
    )
    tools = [
        {"name": "bash", "description": "run", "input_schema": {"type": "object"}},
        {"name": "list_files", "description": "ls", "input_schema": {"type": "object"}},
    ]
    events = await collect(make_model(server), request(tools=tools))

    kinds = [type(e).__name__ for e in events if not isinstance(e, TextChunk)]
    assert kinds == ["ToolUseBegin", "ToolUseEnd", "ToolUseBegin", "ToolUseEnd", "MessageDone"]
    begins = [e for e in events if isinstance(e, ToolUseBegin)]
    ends = [e for e in events if isinstance(e, ToolUseEnd)]
    assert [(b.id, b.name) for b in begins] == [("toolu_1", "bash"), ("toolu_2", "list_files")]
    assert ends[0].input == {"command": "terraform plan", "timeout": 30}
    assert ends[1].input == {}
    message = done(events)
    assert message.stop_reason == "tool_use"
    assert message.content == [
        {"type": "text", "text": "Let me look."},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "bash",
            "input": {"command": "terraform plan", "timeout": 30},
        },
        {"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}},
    ]
    sent_tools = server.requests[0].body["tools"]
    assert [t["name"] for t in sent_tools] == ["bash", "list_files"]


async def test_thinking_signature_and_redacted_thinking_are_preserved(server):
    server.enqueue(
        StreamedMessage(
            [
                thinking("The plan shows two changes.", "EqQBCgIYAhIM-signature"),
                redacted_thinking("EmwKAhgBEgy-opaque"),
                text("Two resources change."),
            ]
        )
    )
    events = await collect(make_model(server), request(max_tokens=4096, thinking_budget=2048))

    thoughts = [e.text for e in events if isinstance(e, ThinkingChunk)]
    assert "".join(thoughts) == "The plan shows two changes."
    assert len(thoughts) > 1
    # Thinking streams before the text.
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextChunk))
    last_thought = max(i for i, e in enumerate(events) if isinstance(e, ThinkingChunk))
    assert last_thought < first_text
    assert done(events).content == [
        {
            "type": "thinking",
            "thinking": "The plan shows two changes.",
            "signature": "EqQBCgIYAhIM-signature",
        },
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy-opaque"},
        {"type": "text", "text": "Two resources change."},
    ]
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


@pytest.mark.parametrize(
    "stop_reason", ["max_tokens", "refusal", "stop_sequence", "pause_turn", "end_turn"]
)
async def test_stop_reason_is_passed_through(server, stop_reason):
    server.enqueue(StreamedMessage([text("partial")], stop_reason=stop_reason))
    message = done(await collect(make_model(server)))
    assert message.stop_reason == stop_reason
    assert message.content == [{"type": "text", "text": "partial"}]


async def test_usage_combines_message_start_and_message_delta(server):
    server.enqueue(
        StreamedMessage(
            [text("ok")],
            usage={
                "input_tokens": 25,
                "output_tokens": 42,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 300,
            },
        )
    )
    usage = done(await collect(make_model(server))).usage
    assert usage == Usage(
        input_tokens=25, output_tokens=42, cache_read_tokens=1000, cache_write_tokens=300
    )
    assert usage.total_tokens == 1367


async def test_message_delta_usage_is_cumulative_and_replaces_start_values(server):
    server.enqueue(
        StreamedMessage(
            [text("ok")],
            usage={"input_tokens": 10, "cache_read_input_tokens": 7},
            delta_usage={"input_tokens": 12, "output_tokens": 99},
        )
    )
    usage = done(await collect(make_model(server))).usage
    # Output replaced (not 1 + 99), input replaced, cache read kept from message_start.
    assert usage == Usage(input_tokens=12, output_tokens=99, cache_read_tokens=7)


async def test_empty_text_blocks_are_not_stored(server):
    server.enqueue(
        StreamedMessage([text(""), tool_use("toolu_9", "glob", {"pattern": "*.tf"})], "tool_use")
    )
    message = done(await collect(make_model(server)))
    assert [b["type"] for b in message.content] == ["tool_use"]
    assert message.content[0]["input"] == {"pattern": "*.tf"}


async def test_invalid_tool_json_is_a_model_error(server):
    server.enqueue(
        StreamedMessage([tool_use("toolu_1", "bash", partial_json=['{"command": '])], "tool_use")
    )
    events, error = await collect_until_error(make_model(server))
    assert [type(e) for e in events] == [ToolUseBegin]
    assert "bash" in str(error) and "JSON" in str(error)
    assert len(server.requests) == 1


async def test_tool_call_cut_off_by_max_tokens_is_dropped_from_content(server):
    server.enqueue(
        StreamedMessage(
            [text("Running it."), tool_use("toolu_1", "bash", partial_json=['{"command": "terr'])],
            stop_reason="max_tokens",
        )
    )
    events = await collect(make_model(server))
    assert not any(isinstance(e, ToolUseEnd) for e in events)
    message = done(events)
    assert message.stop_reason == "max_tokens"
    assert message.content == [{"type": "text", "text": "Running it."}]


async def test_prompt_caching_marks_breakpoints_without_touching_the_request(server):
    server.enqueue(StreamedMessage([text("ok")]))
    tools = [
        {"name": "a", "description": "a", "input_schema": {"type": "object"}},
        {"name": "b", "description": "b", "input_schema": {"type": "object"}},
    ]
    messages = [
        {"role": "user", "content": "plan it"},
        {"role": "assistant", "content": [{"type": "text", "text": "sure"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
    ]
    req = request(tools=tools, messages=messages)
    await collect(make_model(server), req)

    body = server.requests[0].body
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "You are an IaC agent.", "cache_control": ephemeral}
    ]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == ephemeral
    assert body["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    assert body["messages"][:2] == messages[:2]
    # The caller's objects are unchanged.
    assert "cache_control" not in tools[1]
    assert "cache_control" not in messages[-1]["content"][-1]
    assert req.system == "You are an IaC agent."


async def test_one_million_suffix_sends_the_beta_and_strips_the_suffix(server):
    server.enqueue(StreamedMessage([text("ok")]))
    model = make_model(server, "claude-sonnet-4-5[1m]")
    assert model.context_window == 1_000_000
    await collect(model)
    [sent] = server.requests
    assert sent.body["model"] == "claude-sonnet-4-5"
    assert CONTEXT_1M_BETA in sent.headers.get("anthropic-beta", "")


@pytest.mark.parametrize(
    ("req", "needle"),
    [
        (ModelRequest("s", [{"role": "user", "content": "x"}], max_tokens=0), "max_tokens"),
        (
            ModelRequest(
                "s", [{"role": "user", "content": "x"}], max_tokens=2000, thinking_budget=2000
            ),
            "thinking_budget",
        ),
        (ModelRequest("s", []), "message"),
    ],
)
async def test_bad_requests_fail_before_anything_is_sent(server, req, needle):
    _, error = await collect_until_error(make_model(server), req)
    assert needle in str(error)
    assert error.retryable is False
    assert server.requests == []


async def test_caller_stopping_early_leaves_the_model_usable(server):
    server.enqueue(StreamedMessage([text("a long answer that nobody reads")], chunk_size=2))
    server.enqueue(StreamedMessage([text("second")]))
    model = make_model(server)
    stream = model.stream(request())
    async for event in stream:
        if isinstance(event, TextChunk):
            break
    await stream.aclose()
    assert texts(await collect(model)) == ["secon", "d"]


# --- retries ---------------------------------------------------------------------------------


async def test_429_then_success_retries_once_and_yields_one_message(server):
    server.enqueue(ErrorResponse.rate_limited(), StreamedMessage([text("after the wait")]))
    retries = Retries()
    events = await collect(make_model(server, on_retry=retries))

    assert len(server.requests) == 2
    assert [c[0] for c in retries.calls] == [1]
    _, delay, reason = retries.calls[0]
    assert 0 <= delay <= FAST.max_delay
    assert "429" in reason and "rate limit" in reason
    assert texts(events) == ["after", " the ", "wait"]
    assert done(events).content == [{"type": "text", "text": "after the wait"}]


async def test_retry_after_header_sets_the_delay_and_is_capped(server):
    server.enqueue(
        ErrorResponse.rate_limited(retry_after="0.004"),
        ErrorResponse.rate_limited(retry_after="3600"),
        ErrorResponse(429, "rate_limit_error", "slow down", {"retry-after-ms": "6"}),
        StreamedMessage([text("ok")]),
    )
    retries = Retries()
    policy = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.02)
    await collect(make_model(server, on_retry=retries, retry=policy))
    assert [round(c[1], 4) for c in retries.calls] == [0.004, 0.02, 0.006]


@pytest.mark.parametrize(
    ("error", "needle"),
    [
        (ErrorResponse.overloaded(), "529"),
        (ErrorResponse(500, "api_error", "Internal server error"), "500"),
        (ErrorResponse(503, "api_error", "unavailable"), "503"),
        (ErrorResponse(408, "timeout_error", "timed out"), "408"),
    ],
)
async def test_transient_statuses_are_retried(server, error, needle):
    server.enqueue(error, StreamedMessage([text("recovered")]))
    retries = Retries()
    events = await collect(make_model(server, on_retry=retries))
    assert len(retries.calls) == 1 and needle in retries.calls[0][2]
    assert done(events).content == [{"type": "text", "text": "recovered"}]


async def test_x_should_retry_false_is_obeyed(server):
    server.enqueue(
        ErrorResponse(500, "api_error", "do not retry this", {"x-should-retry": "false"}),
        StreamedMessage([text("never")]),
    )
    _, error = await collect_until_error(make_model(server))
    assert "do not retry this" in str(error)
    assert len(server.requests) == 1 and server.pending == 1


async def test_retries_exhausted_raise_model_error(server):
    server.enqueue(*(ErrorResponse.overloaded() for _ in range(3)), StreamedMessage([text("x")]))
    retries = Retries()
    policy = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)
    events, error = await collect_until_error(make_model(server, on_retry=retries, retry=policy))

    assert events == []
    assert len(server.requests) == 3
    assert [c[0] for c in retries.calls] == [1, 2]
    assert error.retryable is True and error.status == 529
    assert "3 attempts" in str(error) and "Overloaded" in str(error)


@pytest.mark.parametrize(
    ("status", "error_type", "message"),
    [
        (400, "invalid_request_error", "messages.0.content: Field required"),
        (401, "authentication_error", "invalid x-api-key"),
        (403, "permission_error", "Your API key does not have permission to use this model"),
        (404, "not_found_error", "model: claude-nope"),
    ],
)
async def test_client_errors_fail_at_once_with_the_api_message(server, status, error_type, message):
    server.enqueue(ErrorResponse(status, error_type, message), StreamedMessage([text("never")]))
    retries = Retries()
    events, error = await collect_until_error(make_model(server, on_retry=retries))

    assert events == [] and retries.calls == []
    assert len(server.requests) == 1 and server.pending == 1
    assert error.retryable is False and error.status == status
    assert message in str(error) and str(status) in str(error)


async def test_connection_dropped_before_output_is_retried(server):
    # message_start and content_block_start only: nothing reaches the caller.
    server.enqueue(
        StreamedMessage([text("lost answer")], drop_after=2),
        StreamedMessage([text("fresh answer")]),
    )
    retries = Retries()
    events = await collect(make_model(server, on_retry=retries))
    assert len(server.requests) == 2
    assert len(retries.calls) == 1 and "dropped" in retries.calls[0][2]
    assert "".join(texts(events)) == "fresh answer"
    assert done(events).content == [{"type": "text", "text": "fresh answer"}]


async def test_stream_ending_without_message_stop_is_retried(server):
    server.enqueue(StreamedMessage([text("abc")], end_after=2), StreamedMessage([text("complete")]))
    retries = Retries()
    events = await collect(make_model(server, on_retry=retries))
    assert len(retries.calls) == 1 and "cut short" in retries.calls[0][2]
    assert "".join(texts(events)) == "complete"


async def test_overloaded_error_event_before_output_is_retried(server):
    server.enqueue(
        StreamedMessage([text("abc")], error_after=1), StreamedMessage([text("second try")])
    )
    retries = Retries()
    events = await collect(make_model(server, on_retry=retries))
    assert len(retries.calls) == 1 and "overloaded" in retries.calls[0][2]
    assert "".join(texts(events)) == "second try"


async def test_connection_dropped_after_output_raises_without_retry(server):
    # Events: 0 message_start, 1 block start, 2 "Hello", 3 " worl", 4 "d" -> cut before 4.
    server.enqueue(
        StreamedMessage([text("Hello world")], drop_after=4),
        StreamedMessage([text("Hello world")]),
    )
    retries = Retries()
    events, error = await collect_until_error(make_model(server, on_retry=retries))

    assert texts(events) == ["Hello", " worl"]
    assert not any(isinstance(e, MessageDone) for e in events)
    assert retries.calls == [] and len(server.requests) == 1 and server.pending == 1
    assert "after output had started" in str(error)


async def test_error_event_after_output_raises_without_retry(server):
    server.enqueue(
        StreamedMessage([text("Hello world")], error_after=3), StreamedMessage([text("again")])
    )
    events, error = await collect_until_error(make_model(server))
    assert texts(events) == ["Hello"]
    assert len(server.requests) == 1
    assert "Overloaded" in str(error) and error.status == 529
    assert error.retryable is False


async def test_connection_refused_is_retried_then_reported():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port now.
    retries = Retries()
    model = AnthropicModel(
        "claude-sonnet-4-5",
        base_url=f"http://127.0.0.1:{port}",
        api_key=API_KEY,
        retry=RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.01),
        on_retry=retries,
    )
    _, error = await collect_until_error(model)
    assert len(retries.calls) == 1 and "connect" in retries.calls[0][2]
    assert "2 attempts" in str(error) and error.retryable is True


async def test_async_and_failing_retry_callbacks_are_handled(server):
    seen: list[int] = []

    async def async_callback(attempt: int, delay: float, reason: str) -> None:
        seen.append(attempt)

    def broken_callback(attempt: int, delay: float, reason: str) -> None:
        raise RuntimeError("notice failed")

    server.enqueue(ErrorResponse.overloaded(), StreamedMessage([text("one")]))
    server.enqueue(ErrorResponse.overloaded(), StreamedMessage([text("two")]))
    assert texts(await collect(make_model(server, on_retry=async_callback))) == ["one"]
    assert seen == [1]
    assert texts(await collect(make_model(server, on_retry=broken_callback))) == ["two"]


def test_retry_policy_rejects_nonsense():
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(base_delay=-1)


def test_backoff_doubles_within_jitter_and_is_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.25)
    for attempt, full in [(1, 1.0), (2, 2.0), (3, 4.0)]:
        for _ in range(20):
            assert full * 0.75 <= policy.delay(attempt) <= full
    assert policy.delay(10) == 5.0
    assert policy.delay(1, retry_after=2.5) == 2.5
    assert policy.delay(1, retry_after=99) == 5.0


# --- credentials, environment, secrets -------------------------------------------------------


async def test_anthropic_base_url_and_api_key_env_are_honoured(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    server.enqueue(StreamedMessage([text("via env")]))
    model = AnthropicModel("claude-sonnet-4-5", retry=FAST)
    assert "".join(texts(await collect(model))) == "via env"
    assert sent_credential(server.requests[0]) == API_KEY


async def test_auth_token_env_is_sent_as_bearer(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "oauth-token-abcdef123456")
    server.enqueue(StreamedMessage([text("ok")]))
    model = create_anthropic_model("claude-sonnet-4-5", retry=FAST)
    await collect(model)
    assert server.requests[0].headers["authorization"] == "Bearer oauth-token-abcdef123456"


async def test_explicit_api_key_never_appears_in_errors(server):
    # The server echoes the key back; it is not in the environment, so only the model's own
    # scrubbing can hide it.
    server.enqueue(ErrorResponse(401, "authentication_error", f"invalid x-api-key {API_KEY}"))
    _, error = await collect_until_error(make_model(server))
    assert API_KEY not in str(error)
    assert "[REDACTED" in str(error) and "401" in str(error)


async def test_env_api_key_never_appears_in_errors(server, monkeypatch):
    secret = "sk-ant-env-secret-987654321"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.enqueue(*(ErrorResponse(500, "api_error", f"boom {secret}") for _ in range(2)))
    model = AnthropicModel(
        "claude-sonnet-4-5", retry=RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.01)
    )
    retries = Retries()
    model.on_retry = retries
    _, error = await collect_until_error(model)
    assert secret not in str(error)
    assert all(secret not in reason for _, _, reason in retries.calls)


def test_claude_available():
    assert claude_available({}) is False
    assert claude_available({"ANTHROPIC_API_KEY": "k"}) is True
    assert claude_available({"ANTHROPIC_AUTH_TOKEN": "t"}) is True
    assert claude_available({"ANTHROPIC_API_KEY": ""}) is False
    assert claude_available({"ANTHROPIC_PROFILE": "work"}) is True
    assert claude_available({"CLAUDE_CODE_USE_BEDROCK": "1"}) is True
    assert claude_available({"CLAUDE_CODE_USE_VERTEX": "true"}) is True
    assert claude_available({"CLAUDE_CODE_USE_VERTEX": "0"}) is False
    assert claude_available({"IAC_KERNEL_PROVIDER": "bedrock"}) is True
    assert claude_available({"IAC_KERNEL_PROVIDER": "anthropic"}) is False
    # The explicit provider wins over the Claude Code switches.
    env = {"IAC_KERNEL_PROVIDER": "anthropic", "CLAUDE_CODE_USE_BEDROCK": "1"}
    assert claude_available(env) is False
    # A Messages-compatible profile is not Claude; an OpenAI-compatible provider neither.
    profile = {"IAC_KERNEL_PROVIDER": "deepseek_anthropic", "DEEPSEEK_API_KEY": "d"}
    assert claude_available(profile) is False
    assert claude_available({**profile, "ANTHROPIC_API_KEY": "k"}) is True
    assert claude_available({"IAC_KERNEL_PROVIDER": "openai", "ANTHROPIC_API_KEY": "k"}) is False
    assert claude_available({"IAC_KERNEL_PROVIDER": "nonesuch"}) is True


def test_provider_from_env():
    assert provider_from_env({}) == "anthropic"
    assert provider_from_env({"CLAUDE_CODE_USE_BEDROCK": "1"}) == "bedrock"
    assert provider_from_env({"CLAUDE_CODE_USE_VERTEX": "1"}) == "vertex"
    assert provider_from_env({"IAC_KERNEL_PROVIDER": "Vertex", "CLAUDE_CODE_USE_BEDROCK": "1"}) == (
        "vertex"
    )
    with pytest.raises(ValueError, match="IAC_KERNEL_PROVIDER"):
        provider_from_env({"IAC_KERNEL_PROVIDER": "nonesuch"})


def test_factory_builds_bedrock_client_from_env(monkeypatch):
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "1")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key")
    model = create_anthropic_model("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert isinstance(model.client, anthropic.AsyncAnthropicBedrock)
    assert model.client.max_retries == 0
    assert model.client.aws_region == "eu-west-1"
    assert model.context_window == 200_000


def test_factory_builds_vertex_client(monkeypatch):
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "my-project")
    monkeypatch.setenv("CLAUDE_CODE_USE_VERTEX", "1")
    model = create_anthropic_model("claude-opus-4-6@20260205")
    assert isinstance(model.client, anthropic.AsyncAnthropicVertex)
    assert model.client.max_retries == 0
    assert model.client.region == "us-east5"
    assert model.client.project_id == "my-project"
    assert model.context_window == 1_000_000


def test_factory_explicit_provider_and_kwargs(server):
    model = create_anthropic_model(
        "claude-haiku-4-5", provider="anthropic", base_url=server.url, api_key=API_KEY
    )
    assert type(model.client) is anthropic.AsyncAnthropic
    assert model.client.max_retries == 0
    bedrock = create_anthropic_model("claude-haiku-4-5", provider="bedrock", aws_region="us-west-2")
    assert isinstance(bedrock.client, anthropic.AsyncAnthropicBedrock)


def test_factory_config_errors_are_clear(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="unknown provider"):
        create_anthropic_model("claude-sonnet-4-5", provider="azure")
    monkeypatch.delenv("CLOUD_ML_REGION", raising=False)
    with pytest.raises(ValueError, match="vertex"):
        create_anthropic_model("claude-sonnet-4-5", provider="vertex")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    with pytest.raises(ValueError, match="bedrock"):
        create_anthropic_model("claude-sonnet-4-5", provider="bedrock")


def test_a_client_with_sdk_retries_is_switched_to_ours(server):
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key=API_KEY, max_retries=5)
    model = AnthropicModel("claude-sonnet-4-5", client=client)
    assert model.client.max_retries == 0


# --- context windows -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "window"),
    [
        ("claude-sonnet-4-5", 200_000),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("claude-haiku-4-5-20251001", 200_000),
        ("claude-opus-4-5-20251101", 200_000),
        ("claude-opus-4-20250514", 200_000),
        ("some-future-model", 200_000),
        ("claude-opus-4-6", 1_000_000),
        ("claude-sonnet-4-6", 1_000_000),
        ("global.anthropic.claude-opus-4-6-v1", 1_000_000),
        ("claude-opus-4-7", 1_000_000),
        ("claude-sonnet-4[1m]", 1_000_000),
        ("claude-sonnet-4-5-20250929[1m]", 1_000_000),
    ],
)
def test_context_window_per_model(model_id, window):
    assert resolve_model(model_id)[1] == window


def test_resolve_model_betas_and_errors():
    assert resolve_model("claude-sonnet-4-5[1m]") == (
        "claude-sonnet-4-5",
        1_000_000,
        [CONTEXT_1M_BETA],
    )
    assert resolve_model("claude-opus-4-6[1m]") == ("claude-opus-4-6", 1_000_000, [])
    with pytest.raises(ValueError, match="1M"):
        resolve_model("claude-haiku-4-5[1m]")
    with pytest.raises(ValueError, match="empty"):
        resolve_model("  ")


def test_context_window_override(server):
    assert make_model(server, context_window=50_000).context_window == 50_000


async def test_adaptive_only_models_get_adaptive_thinking(server):
    server.enqueue(StreamedMessage([text("ok")]))
    # A budget above max_tokens is fine here: adaptive thinking has no budget.
    await collect(
        make_model(server, "claude-opus-4-7"), request(max_tokens=1000, thinking_budget=4000)
    )
    assert server.requests[0].body["thinking"] == {"type": "adaptive"}


async def test_missing_credentials_are_reported_clearly(monkeypatch, tmp_path):
    monkeypatch.delenv("ANTHROPIC_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    model = AnthropicModel("claude-sonnet-4-5", base_url="http://127.0.0.1:9", retry=FAST)
    _, error = await collect_until_error(model)
    assert "no credentials" in str(error) and "ANTHROPIC_API_KEY" in str(error)
    assert error.retryable is False


def test_unusable_credential_config_is_a_value_error():
    # clean_env points ANTHROPIC_CONFIG_DIR at an empty directory: the SDK cannot load it.
    with pytest.raises(ValueError, match="cannot set up the anthropic client"):
        AnthropicModel("claude-sonnet-4-5")
