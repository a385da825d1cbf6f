"""Providers the user did not pick are never contacted: a session start, the model
picker and a turn reach only the provider in use. Each other provider's base URL is a
loopback server that counts what arrives."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_anthropic import FakeAnthropicServer, StreamedMessage, text
from fake_openai import Chat, FakeOpenAIServer
from iac_kernel.acp.session import state as session_state
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from iac_kernel.models import registry
from iac_kernel.models.base import ModelRequest
from iac_kernel.models.providers import PROVIDERS
from iac_kernel.models.registry import available_models, create_model

OTHERS = ("openai", "dashscope", "deepseek", "ollama")


@pytest.fixture
def endpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, FakeOpenAIServer]]:
    """A counting loopback server behind every OpenAI-compatible provider, each with its
    key set (so each one is a provider the user could pick)."""
    registry.forget_listings()
    servers = {name: FakeOpenAIServer().start() for name in OTHERS}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-unpicked-1234")
    monkeypatch.setenv("OPENAI_BASE_URL", servers["openai"].url)
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-unpicked-1234")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-unpicked-1234")
    for name in ("dashscope", "deepseek", "ollama"):
        moved = dataclasses.replace(PROVIDERS[name], base_url=servers[name].url)
        monkeypatch.setitem(PROVIDERS, name, moved)
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()
        registry.forget_listings()


def _settle() -> None:
    """Wait for every background model listing this process started."""
    for thread in threading.enumerate():
        if thread.name == "list-models":
            thread.join(10)


async def _start_and_run(workspace: Path, model_id: str | None = None) -> list[str]:
    """What a session start shows (its models) and one turn on the picked model."""
    manager = SessionManager(Settings(), holder="test", origin="acp")
    session = manager.new(str(workspace))
    answer = session_state.new_session_answer(session)
    offered = [m["modelId"] for m in answer["models"]["availableModels"]]
    available_models()  # the picker, as %model and the config option ask it
    model = create_model(model_id or session.model_id)
    request = ModelRequest(system="s", messages=[{"role": "user", "content": "hi"}])
    async for _event in model.stream(request):
        pass
    await manager.close_all()
    _settle()
    return offered


async def test_a_session_on_anthropic_contacts_no_other_provider(
    endpoints: dict[str, FakeOpenAIServer], workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeAnthropicServer() as anthropic:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-picked-1234567890")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.url)
        anthropic.enqueue(StreamedMessage([text("ok")]))
        offered = await _start_and_run(workspace)
        assert len(anthropic.requests) == 1
    # Providers with keys are still offered (their preset ids), but never asked.
    assert "openai:gpt-4.1" in offered and "dashscope:qwen-plus" in offered
    assert {name: server.requests for name, server in endpoints.items()} == {
        name: [] for name in OTHERS
    }


async def test_the_picked_provider_alone_is_asked_for_its_models(
    endpoints: dict[str, FakeOpenAIServer], workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IAC_KERNEL_PROVIDER", "deepseek")
    endpoints["deepseek"].enqueue(Chat(text="ok"))
    await _start_and_run(workspace)
    picked = [(r.method, r.path) for r in endpoints["deepseek"].requests]
    assert ("POST", "/v1/chat/completions") in picked
    # Its own listing (the picker's) may have gone out; nobody else heard a thing.
    assert {m for m, _ in picked} <= {"GET", "POST"}
    for name in ("openai", "dashscope", "ollama"):
        assert endpoints[name].requests == [], name
