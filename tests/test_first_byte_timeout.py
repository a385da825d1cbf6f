"""A model endpoint that never answers ends the turn with a clear error after
``model_first_byte_timeout``; a slow but steady stream is never cut by it. Both
providers through their real SDKs, against loopback servers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core_support import RecordingPersist
from fake_anthropic import FakeAnthropicServer, StreamedMessage, text
from fake_http import SilentServer
from fake_openai import Chat, FakeOpenAIServer
from iac_kernel.agent.loop import AgentLoop, Conversation
from iac_kernel.agent.permissions import PermissionGate
from iac_kernel.config import Settings
from iac_kernel.events import ErrorNotice, TextDelta
from iac_kernel.models.anthropic import AnthropicModel
from iac_kernel.models.base import ModelError, ModelRequest
from iac_kernel.models.openai import OpenAIModel
from iac_kernel.models.providers import PROVIDERS
from iac_kernel.models.retry import RetryPolicy

#: Short enough for a test; the stream below takes several times this long.
TIMEOUT = 1.0
#: Hang guard: the old code waited for the SDK's 600 s.
GUARD = 30.0
RETRY = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, jitter=0)


def anthropic_model(url: str) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-4-6", base_url=url, api_key="sk-ant-test-0000000000", retry=RETRY
    )


def openai_model(url: str) -> OpenAIModel:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="sk-openai-test-1234", max_retries=0)
    return OpenAIModel(PROVIDERS["openai"], "gpt-4.1", client=client, retry=RETRY)


def request(timeout: float = TIMEOUT) -> ModelRequest:
    return ModelRequest(
        system="s", messages=[{"role": "user", "content": "hi"}], first_byte_timeout=timeout
    )


async def collect(model: Any, req: ModelRequest) -> str:
    out = []
    async for event in model.stream(req):
        if hasattr(event, "text"):
            out.append(event.text)
    return "".join(out)


@pytest.mark.parametrize("make", [anthropic_model, openai_model], ids=["anthropic", "openai"])
async def test_an_endpoint_that_never_answers_fails_after_the_timeout(make: Any) -> None:
    with SilentServer() as silent:
        url = silent.root + ("/v1" if make is openai_model else "")
        with pytest.raises(ModelError) as failed:
            await asyncio.wait_for(collect(make(url), request()), GUARD)
    message = str(failed.value)
    assert "did not answer" in message and "1 s" in message
    assert "model_first_byte_timeout" in message
    assert not failed.value.retryable
    assert silent.connections == 1  # not retried: the setting bounds the whole wait


async def test_headers_then_silence_is_no_first_byte_either() -> None:
    """Anthropic's answer starts (200 and headers) but no event ever comes."""
    with FakeAnthropicServer() as server:
        held = StreamedMessage([text("never sent")], hold_before=0)
        server.enqueue(held)
        with pytest.raises(ModelError, match="did not answer"):
            await asyncio.wait_for(collect(anthropic_model(server.url), request()), GUARD)
        held.release()


async def test_a_slow_steady_stream_outlives_the_timeout_anthropic() -> None:
    words = "one two three four five six seven eight"
    with FakeAnthropicServer() as server:
        # ~20 events 0.25 s apart: several timeouts long, never 1 s without a byte.
        server.enqueue(StreamedMessage([text(words)], chunk_size=3, pace=0.25))
        loop = asyncio.get_running_loop()
        started = loop.time()
        got = await asyncio.wait_for(collect(anthropic_model(server.url), request()), GUARD)
        assert loop.time() - started > 3 * TIMEOUT  # the premise: longer than the timeout
    assert got == words


async def test_a_slow_steady_stream_outlives_the_timeout_openai() -> None:
    words = "one two three four five six seven eight"
    with FakeOpenAIServer() as server:
        server.enqueue(Chat(text=words, chunk_size=3, pace=0.25))
        loop = asyncio.get_running_loop()
        started = loop.time()
        got = await asyncio.wait_for(collect(openai_model(server.url), request()), GUARD)
        assert loop.time() - started > 3 * TIMEOUT
    assert got == words


async def test_zero_means_no_limit() -> None:
    with FakeAnthropicServer() as server:
        server.enqueue(StreamedMessage([text("late")], hold_before=0))
        task = asyncio.ensure_future(collect(anthropic_model(server.url), request(0)))
        await asyncio.sleep(2 * TIMEOUT)
        assert not task.done()
        server._served[0].release()
        assert await asyncio.wait_for(task, GUARD) == "late"


async def test_the_setting_ends_the_turn_with_the_error(tmp_path: Path) -> None:
    settings = Settings()
    settings.set("model_first_byte_timeout", "1")
    with SilentServer() as silent:
        loop = AgentLoop(
            model=anthropic_model(silent.root),
            tools={},
            gate=PermissionGate(),
            settings=settings,
            cwd=tmp_path,
            system_prompt="sys",
            conversation=Conversation(),
            persist=RecordingPersist(),
        )
        events: list[Any] = []
        ended = await asyncio.wait_for(
            loop.run_turn([{"type": "text", "text": "hi"}], events.append, None), GUARD
        )
        connections = silent.connections
    notices = [e.message for e in events if isinstance(e, ErrorNotice)]
    assert any("did not answer" in n and "model_first_byte_timeout" in n for n in notices)
    assert not [e for e in events if isinstance(e, TextDelta)]
    assert ended.stop_reason == "end_turn"  # a model error ends the turn, told in a notice
    assert connections == 1
