"""One Anthropic SDK client per provider configuration (and event loop), shared by every
session's model; built ahead of time by the warm-up. Real requests go through the fake
Messages API (tests/fake_anthropic.py), whose sockets have TCP_NODELAY."""

from __future__ import annotations

import asyncio
import threading

import anthropic
import pytest

from fake_anthropic import FakeAnthropicServer, StreamedMessage, text
from iac_kernel.models import anthropic as anthropic_model
from iac_kernel.models.anthropic import AnthropicModel, create_anthropic_model
from iac_kernel.models.base import MessageDone, ModelRequest, TextChunk
from iac_kernel.models.registry import create_model, start_warm_up, warm_anthropic


@pytest.fixture(autouse=True)
def credentials(monkeypatch, tmp_path):
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "IAC_KERNEL_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-shared")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setattr(anthropic_model, "_unbound", {})


async def test_sessions_share_one_client_per_configuration(monkeypatch):
    first, second = create_model("claude-sonnet-4-6"), create_model("claude-opus-4-6")
    assert isinstance(first, AnthropicModel) and first.client is second.client
    assert first.client.max_retries == 0
    other_url = create_anthropic_model("claude-sonnet-4-6", base_url="http://127.0.0.1:9")
    assert other_url.client is not first.client
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-other")  # another configuration
    assert create_model("claude-sonnet-4-6").client is not first.client


def test_event_loops_never_share_a_client():
    async def client() -> object:
        return create_model("claude-sonnet-4-6").client

    one, two = asyncio.run(client()), asyncio.run(client())
    assert one is not two
    # Outside any loop each model gets its own client.
    assert create_model("claude-sonnet-4-6").client is not create_model("claude-sonnet-4-6").client


def test_warm_up_builds_the_client_the_first_session_then_uses():
    thread = start_warm_up()
    assert thread is not None
    thread.join(30)
    assert len(anthropic_model._unbound) == 1
    prepared = next(iter(anthropic_model._unbound.values()))

    async def first_session_client() -> object:
        return create_model("claude-sonnet-4-6").client

    assert asyncio.run(first_session_client()) is prepared
    assert anthropic_model._unbound == {}  # taken by that loop, never shared with another


def test_no_warm_up_without_credentials(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert start_warm_up() is None and warm_anthropic() is False


async def test_two_sessions_stream_over_one_kept_alive_connection():
    with FakeAnthropicServer() as server:
        server.enqueue(StreamedMessage([text("one")]), StreamedMessage([text("two")]))
        models = [
            create_anthropic_model("claude-sonnet-4-6", base_url=server.url) for _ in range(2)
        ]
        assert models[0].client is models[1].client
        answers = []
        for model in models:
            request = ModelRequest(system="s", messages=[{"role": "user", "content": "hi"}])
            events = [event async for event in model.stream(request)]
            assert isinstance(events[-1], MessageDone)
            answers.append("".join(e.text for e in events if isinstance(e, TextChunk)))
        assert answers == ["one", "two"]
        assert server.nodelay == [True]  # one connection, reused, with TCP_NODELAY


def test_concurrent_lookups_build_one_client():
    async def many() -> set[int]:
        results: list[object] = []

        def grab() -> None:
            results.append(
                anthropic_model.shared_client(
                    "anthropic", anthropic.AsyncAnthropic, {"max_retries": 0}
                )
            )

        grab()
        threads = [threading.Thread(target=grab) for _ in range(4)]  # no loop: own clients
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        grab()
        return {id(results[0]), id(results[-1])}

    assert len(asyncio.run(many())) == 1
