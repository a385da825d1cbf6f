"""Switching a live session between providers keeps the conversation, tool calls included:
scripted -> OpenAI-compatible -> Anthropic, each through its real SDK on a loopback fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core_support import write_script
from fake_anthropic import FakeAnthropicServer, StreamedMessage, text, thinking, tool_use
from fake_openai import Call, Chat, FakeOpenAIServer
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from iac_kernel.events import ErrorNotice, TextDelta, ToolCallResult


async def prompt(session, words: str) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    ended = await session.prompt([{"type": "text", "text": words}], events.append, None)
    return ended, events


async def test_scripted_to_openai_to_anthropic_and_back(workspace: Path, tmp_path, monkeypatch):
    (workspace / "main.tf").write_text('resource "aws_s3_bucket" "logs" {}\n')
    script = write_script(
        tmp_path / "s.json",
        [
            {
                "match": "look",
                "turns": [
                    {"tool_use": [{"name": "read_file", "input": {"path": "main.tf"}}]},
                    {"text": "one bucket"},
                ],
            }
        ],
    )
    settings = Settings.from_env()
    settings.script = str(script)
    manager = SessionManager(settings, holder="t")
    session = manager.new(str(workspace))
    assert session.model_id == "scripted" and session.provider == "scripted"
    await prompt(session, "look at main.tf")
    scripted_call = session.conversation.messages[1]["content"][0]
    assert scripted_call["type"] == "tool_use"

    with FakeOpenAIServer() as openai_fake, FakeAnthropicServer() as anthropic_fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-1234")
        monkeypatch.setenv("OPENAI_BASE_URL", openai_fake.url)
        note = session.set_model("openai:gpt-4.1")
        assert session.model_id == "openai:gpt-4.1" and session.provider == "openai"
        assert "2 messages" not in note and "1 tool calls" in note
        openai_fake.enqueue(
            Chat(
                reasoning="check the tags too",
                calls=[Call("call_a", "read_file", ['{"path":', ' "main.tf"}'])],
                finish_reason="tool_calls",
            ),
            Chat(text="Still one bucket, no tags."),
        )
        ended, events = await prompt(session, "and the tags?")
        assert ended.stop_reason == "end_turn"
        assert any(isinstance(e, ErrorNotice) and "Switched to" in e.message for e in events)
        sent = openai_fake.chat_requests()[0].body["messages"]
        # The scripted call and its result went across in Chat Completions shape.
        assistant = next(m for m in sent if m.get("tool_calls"))
        assert assistant["tool_calls"][0]["id"] == scripted_call["id"]
        tool = next(m for m in sent if m["role"] == "tool")
        assert tool["tool_call_id"] == scripted_call["id"] and "aws_s3_bucket" in tool["content"]
        assert sent[-1] == {"role": "user", "content": "and the tags?"}

        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000000000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_fake.url)
        note = session.set_model("claude-sonnet-4-6")
        assert session.provider == "anthropic"
        assert "1 thinking block(s) are not sent" in note
        anthropic_fake.enqueue(
            StreamedMessage(
                [
                    thinking("Check once more.", "c2lnbmVk"),
                    tool_use("toolu_c", "read_file", {"path": "main.tf"}),
                ],
                stop_reason="tool_use",
            ),
            StreamedMessage([text("Agreed: one bucket.")]),
        )
        ended, events = await prompt(session, "sure?")
        said = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert said.endswith("Agreed: one bucket.")
        body = anthropic_fake.requests[0].body
        blocks = [b for m in body["messages"] for b in m["content"]]
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert uses == results == [scripted_call["id"], "call_a"]
        assert not [b for b in blocks if b["type"] == "thinking"]  # DeepSeek-style reasoning

        # Claude's signed thinking came back to Claude within its tool loop.
        again = anthropic_fake.requests[1].body["messages"][-2]["content"]
        assert again[0] == {
            "type": "thinking",
            "thinking": "Check once more.",
            "signature": "c2lnbmVk",
        }

        # And back to the OpenAI-compatible provider: Claude's calls and answer go along.
        note = session.set_model("openai:gpt-4.1")
        assert "3 tool calls" in note and "2 thinking block(s) are not sent" in note
        openai_fake.enqueue(Chat(text="Done."))
        await prompt(session, "thanks")
        sent = openai_fake.chat_requests()[-1].body["messages"]
        assert {"role": "assistant", "content": "Agreed: one bucket."} in sent
        assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == [
            scripted_call["id"],
            "call_a",
            "toolu_c",
        ]
        assert not [m for m in sent if "reasoning_content" in m]

    # The stored model id means the same provider when the session is loaded again.
    session_id = session.session_id
    await session.close()
    again = SessionManager(settings, holder="t2").load(session_id)
    assert again.model_id == "openai:gpt-4.1"
    results = [e for e in again.replay() if isinstance(e, ToolCallResult)]
    assert [r.status for r in results] == ["completed"] * 3
