"""Which provider the environment picks, which model ids exist, Messages-compatible profiles
and the ACP auth methods."""

from __future__ import annotations

import pytest

from fake_anthropic import FakeAnthropicServer, StreamedMessage, sent_credential, text
from fake_openai import FakeOpenAIServer
from iac_kernel.config import Settings
from iac_kernel.models import registry
from iac_kernel.models.base import ModelError, ModelRequest
from iac_kernel.models.providers import active_provider, auth_methods
from iac_kernel.models.registry import (
    available_models,
    canonical_id,
    check_model_id,
    create_model,
    default_model_id,
    resolve,
)


@pytest.fixture(autouse=True)
def fresh_listings():
    registry.forget_listings()
    yield
    registry.forget_listings()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"DEEPSEEK_API_KEY": "d"}, "deepseek"),
        ({"DEEPSEEK_API_KEY": "d", "DASHSCOPE_API_KEY": "q"}, "dashscope"),
        ({"DEEPSEEK_API_KEY": "d", "OPENAI_API_KEY": "o"}, "openai"),
        ({"OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a"}, "anthropic"),
        ({"OPENAI_API_KEY": "o", "IAC_KERNEL_PROVIDER": "ollama"}, "ollama"),
        ({"CLAUDE_CODE_USE_BEDROCK": "1", "OPENAI_API_KEY": "o"}, "bedrock"),
    ],
)
def test_the_first_credentials_found_decide(env, expected):
    assert active_provider(env) == expected


def test_defaults_follow_the_active_provider(monkeypatch):
    assert default_model_id() == "scripted"
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-d-1234")
    assert default_model_id() == "deepseek:deepseek-flash"
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", "ollama")
    assert default_model_id() == "ollama:llama3.2"


def test_model_ids(monkeypatch):
    with pytest.raises(ModelError, match="PROVIDER:MODEL"):
        check_model_id("gpt-4.1")  # no provider takes a bare id yet
    assert resolve("ollama:llama3.2:3b") == ("ollama", "llama3.2:3b")
    assert canonical_id("claude-sonnet-4-6") == "claude-sonnet-4-6"
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", "dashscope")
    assert canonical_id("qwen-max") == "dashscope:qwen-max"
    assert canonical_id("llama3.2:3b") == "dashscope:llama3.2:3b"
    problems: list[str] = []
    settings = Settings.from_env({"IAC_KERNEL_MODEL": "qwen-max"}, problems)
    assert settings.model == "qwen-max" and problems == []
    with pytest.raises(ModelError):
        check_model_id("anthropic:not-a-claude")


def test_bad_provider_names_are_reported():
    problems: list[str] = []
    Settings.from_env({"IAC_KERNEL_PROVIDER": "litellm"}, problems)
    assert problems and "IAC_KERNEL_PROVIDER='litellm' is not valid" in problems[0]


def test_the_picker_lists_what_the_endpoint_serves(monkeypatch):
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("IAC_KERNEL_PROVIDER", "openai")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-1234")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("IAC_KERNEL_MODEL", "my-fine-tune")
        assert registry.fetch_models("openai") == ["fake-large", "fake-small"]
        assert server.requests[-1].headers["authorization"] == "Bearer sk-openai-test-1234"
    models = available_models()
    assert models[0] == "openai:my-fine-tune"
    assert {"openai:gpt-4.1", "openai:fake-large", "openai:fake-small"} <= set(models)
    assert models[-1] == "scripted"


def test_a_silent_endpoint_adds_nothing(monkeypatch):
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", "ollama")
    monkeypatch.setenv("IAC_KERNEL_BASE_URL", "http://127.0.0.1:9/v1")
    assert registry.fetch_models("ollama", timeout=2) == []
    assert available_models() == ["ollama:llama3.2", "scripted"]


def test_auth_methods_only_without_credentials(monkeypatch):
    names = [m["_meta"]["iac_kernel"]["envVar"] for m in auth_methods()]
    assert names == ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY", "DEEPSEEK_API_KEY"]
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-q-1234")
    assert auth_methods() == []
    monkeypatch.delenv("DASHSCOPE_API_KEY")
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", "ollama")  # a local server needs no key
    assert auth_methods() == []
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", "deepseek")  # named, but its key is missing
    assert "DEEPSEEK_API_KEY" in [m["_meta"]["iac_kernel"]["envVar"] for m in auth_methods()]


async def _one_turn(model) -> None:
    request = ModelRequest(
        system="s",
        messages=[{"role": "user", "content": "hi"}],
        tools=[{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
        max_tokens=4000,
        thinking_budget=2000,
    )
    async for _event in model.stream(request):
        pass


async def test_a_messages_compatible_profile_gets_only_what_it_supports(monkeypatch):
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("IAC_KERNEL_PROVIDER", "deepseek_anthropic")
        monkeypatch.setenv("IAC_KERNEL_BASE_URL", server.url)
        monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-test-5678")
        server.enqueue(StreamedMessage([text("ok")]))
        model = create_model("deepseek-v4-pro")
        assert model.capabilities == {"thinking", "tool_choice"}
        await _one_turn(model)
        body = server.requests[0].body
    assert sent_credential(server.requests[0]) == "sk-deepseek-test-5678"
    assert body["model"] == "deepseek-v4-pro"
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert "cache_control" not in str(body)


async def test_a_gateway_behind_anthropic_base_url_can_be_narrowed(monkeypatch):
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000000000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("IAC_KERNEL_ANTHROPIC_CAPABILITIES", "")
        server.enqueue(StreamedMessage([text("ok")]))
        await _one_turn(create_model("anthropic:any-gateway-model"))
        body = server.requests[0].body
    assert body["model"] == "any-gateway-model"
    assert "thinking" not in body and "cache_control" not in str(body)


def test_a_bad_model_setting_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-1234")
    monkeypatch.setenv("IAC_KERNEL_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("IAC_KERNEL_MODEL", "anthropic:not-claude")
    with pytest.raises(ModelError, match="unknown model 'anthropic:not-claude'"):
        check_model_id("anthropic:not-claude")
    assert "openai:gpt-4.1" in available_models()


async def test_iac_kernel_base_url_moves_the_anthropic_endpoint_too(monkeypatch):
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("IAC_KERNEL_PROVIDER", "anthropic")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000000000")
        monkeypatch.setenv("IAC_KERNEL_BASE_URL", server.url)
        server.enqueue(StreamedMessage([text("ok")]))
        await _one_turn(create_model("claude-sonnet-4-6"))
        assert server.requests and server.requests[0].body["model"] == "claude-sonnet-4-6"


def test_iac_kernel_base_url_only_moves_the_named_provider():
    from iac_kernel.models.providers import PROVIDERS, base_url

    env = {"DEEPSEEK_API_KEY": "d", "IAC_KERNEL_BASE_URL": "https://elsewhere.example/v1"}
    assert base_url(PROVIDERS["deepseek"], env) == "https://api.deepseek.com"
    env["IAC_KERNEL_PROVIDER"] = "deepseek"
    assert base_url(PROVIDERS["deepseek"], env) == "https://elsewhere.example/v1"
    assert base_url(PROVIDERS["dashscope"], env).startswith("https://dashscope.aliyuncs.com/")


def test_a_profile_is_not_claude(monkeypatch):
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", "ollama_anthropic")
    assert default_model_id() == "ollama_anthropic:qwen3-coder"
    assert available_models() == ["ollama_anthropic:qwen3-coder", "scripted"]
    assert resolve("claude-sonnet-4-6") == ("anthropic", "claude-sonnet-4-6")
    assert resolve("qwen3-coder:30b") == ("ollama_anthropic", "qwen3-coder:30b")


def test_other_providers_turns_are_made_valid_for_the_messages_api():
    from iac_kernel.models.anthropic import for_messages_api

    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "unsigned reasoning", "signature": ""},
                {
                    "type": "tool_use",
                    "id": "functions.read_file:0",
                    "name": "read_file",
                    "input": {},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "functions.read_file:0", "content": "x"}
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "only", "signature": ""}],
        },
    ]
    out = for_messages_api(history)
    assert out[1]["content"] == [
        {"type": "tool_use", "id": "functions_read_file_0", "name": "read_file", "input": {}}
    ]
    assert out[2]["content"][0]["tool_use_id"] == "functions_read_file_0"
    assert out[3]["content"] == [{"type": "text", "text": "(no text)"}]
    assert history[1]["content"][1]["id"] == "functions.read_file:0"  # the store is untouched


def test_docs_provider_table_is_the_records():
    from pathlib import Path

    from iac_kernel.models.providers import provider_table

    docs = Path(__file__).resolve().parent.parent / "docs" / "providers.md"
    assert provider_table() in docs.read_text()
