"""The offline scripted model: script loading, turn selection, streaming, limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from core_support import write_script
from iac_kernel.models.base import (
    MessageDone,
    ModelError,
    ModelRequest,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
)
from iac_kernel.models.registry import create_model, default_model_id
from iac_kernel.models.scripted import Script, ScriptedModel, ScriptError


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def collect(model: ScriptedModel, messages: list[dict], **kwargs) -> list:
    return [e async for e in model.stream(ModelRequest(system="", messages=messages, **kwargs))]


@pytest.fixture
def model(tmp_path: Path) -> ScriptedModel:
    path = write_script(
        tmp_path / "s.json",
        [
            {
                "match": "security group",
                "turns": [
                    {
                        "thinking": "grep it",
                        "text": "Searching.",
                        "tool_use": [{"name": "grep", "input": {"pattern": "0.0.0.0/0"}}],
                    },
                    {"text": "One group is open."},
                ],
            },
            {"turns": [{"text": "second prompt answer"}]},
        ],
        fallback="no idea",
    )
    return ScriptedModel(Script.load(path))


async def test_matching_exchange_streams_thinking_text_and_tool_use(model):
    events = await collect(model, [user("check the security group rules")])
    assert [type(e) for e in events] == [
        ThinkingChunk,
        ThinkingChunk,
        TextChunk,
        ToolUseBegin,
        ToolUseEnd,
        MessageDone,
    ]
    done = events[-1]
    assert done.stop_reason == "tool_use"
    tool_use = done.content[-1]
    assert tool_use["input"] == {"pattern": "0.0.0.0/0"} and tool_use["id"].startswith("toolu_")
    assert done.usage.input_tokens > 0 and done.usage.output_tokens > 0


async def test_turn_follows_the_assistant_messages_since_the_prompt(model):
    first = await collect(model, [user("security group please")])
    history = [
        user("security group please"),
        {"role": "assistant", "content": first[-1].content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": first[-1].content[-1]["id"], "content": "x"}
            ],
        },
    ]
    second = await collect(model, history)
    assert "".join(e.text for e in second if isinstance(e, TextChunk)) == "One group is open."
    assert second[-1].stop_reason == "end_turn"


async def test_position_and_fallback(model):
    history = [user("a"), {"role": "assistant", "content": "x"}, user("b")]
    events = await collect(model, history)
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "second prompt answer"
    events = await collect(model, [user("unmatched first prompt")])
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "no idea"


async def test_max_tokens_truncates(model):
    events = await collect(model, [user("security group")], max_tokens=1)
    assert events[-1].stop_reason == "max_tokens"
    assert not any(isinstance(e, ToolUseBegin) for e in events)


async def test_error_turn_raises(tmp_path: Path):
    model = ScriptedModel(
        Script.load(write_script(tmp_path / "e.json", [{"turns": [{"error": "boom"}]}]))
    )
    with pytest.raises(ModelError, match="boom"):
        await collect(model, [user("x")])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"exchanges": [{"x": 1}]}', "needs a 'turns' list"),
        ('{"exchanges": [{"match": "(", "turns": []}]}', "match"),
    ],
)
def test_bad_scripts_are_clear_errors(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ScriptError, match=message):
        Script.load(path)
    with pytest.raises(ScriptError, match="cannot read"):
        Script.load(tmp_path / "missing.json")


def test_registry_defaults_to_scripted_without_a_key():
    assert default_model_id() == "scripted"
    model = create_model("scripted")
    assert model.model_id == "scripted" and model.script.name == "default"


async def test_packaged_default_script_lists_files():
    model = create_model("scripted")
    events = await collect(model, [user("list the files here")])
    names = [e.name for e in events if isinstance(e, ToolUseBegin)]
    assert names == ["list_files"]


async def test_merged_prompts_match_on_the_newest(model):
    merged = {
        "role": "user",
        "content": [
            {"type": "text", "text": "security group"},
            {"type": "text", "text": "second one"},
        ],
    }
    events = await collect(model, [merged])
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "no idea"
