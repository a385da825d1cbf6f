"""The agent loop on the real Anthropic provider, against the local fake Messages API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core_support import RecordingPersist, assert_history_valid
from fake_anthropic import ErrorResponse, FakeAnthropicServer, StreamedMessage, text, tool_use
from iac_kernel.agent.loop import AgentLoop, Conversation
from iac_kernel.agent.permissions import PermissionGate
from iac_kernel.config import Settings
from iac_kernel.events import ErrorNotice, TextDelta, ToolCallResult
from iac_kernel.models.anthropic import AnthropicModel, RetryPolicy
from iac_kernel.tools.registry import build_tools


async def test_tool_round_trip_with_a_retry(tmp_path: Path):
    (tmp_path / "main.tf").write_text('resource "aws_s3_bucket" "logs" {}\n')
    with FakeAnthropicServer() as server:
        server.enqueue(
            ErrorResponse.rate_limited(retry_after="0"),
            StreamedMessage(
                [text("Reading main.tf."), tool_use("toolu_1", "read_file", {"path": "main.tf"})],
                stop_reason="tool_use",
            ),
            StreamedMessage([text("It defines one bucket.")]),
        )
        model = AnthropicModel(
            "claude-sonnet-4-6",
            base_url=server.url,
            api_key="sk-ant-test-0000000000",
            retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, jitter=0),
        )
        persist = RecordingPersist()
        loop = AgentLoop(
            model=model,
            tools=build_tools(),
            gate=PermissionGate(),
            settings=Settings(),
            cwd=tmp_path,
            system_prompt="sys",
            conversation=Conversation(),
            persist=persist,
        )
        events: list[Any] = []
        ended = await loop.run_turn(
            [{"type": "text", "text": "what is here?"}], events.append, None
        )
        bodies = [r.body for r in server.requests]

    assert ended.stop_reason == "end_turn"
    assert any(isinstance(e, ErrorNotice) and "retry 1" in e.message for e in events)
    result = next(e for e in events if isinstance(e, ToolCallResult))
    assert result.status == "completed" and "aws_s3_bucket" in result.output
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).endswith("one bucket.")
    # The second real call carried the tool result back to the API.
    last = bodies[-1]["messages"][-1]
    assert last["role"] == "user" and last["content"][0]["type"] == "tool_result"
    assert {t["name"] for t in bodies[-1]["tools"]} >= {"read_file", "bash", "edit_file"}
    assert ended.usage.input_tokens == 20
    assert_history_valid(persist.messages)
