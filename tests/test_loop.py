"""The agent loop: every stop reason, every cancellation point, usage, compaction."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core_support import TouchTool, assert_history_valid, make_loop, write_script
from iac_kernel.agent.permissions import PermissionGate
from iac_kernel.config import Settings
from iac_kernel.events import (
    Compacted,
    CompactionStatus,
    ErrorNotice,
    ModelCallDone,
    TextDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
)
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolResult

PROMPT = [{"type": "text", "text": "go"}]


class SlowTool(Tool):
    """Sleeps, and records whether it finished or was cancelled."""

    name = "slow"
    description = "Wait."
    input_schema = {"type": "object", "properties": {}}
    kind = "read"
    category = Category.READ

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ToolResult("slept")


class EchoTool(Tool):
    name = "echo"
    description = "Echo text."
    input_schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    kind = "read"
    category = Category.READ

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(args.get("text", ""))


def tool_turn(name: str, args: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"tool_use": [{"name": name, "input": args or {}}], **extra}


async def run(loop, ask=None) -> tuple[TurnEnded, list[Any]]:
    events: list[Any] = []
    ended = await loop.run_turn(PROMPT, events.append, ask)
    return ended, events


async def test_end_turn_streams_text_and_sums_usage(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json",
        [
            {
                "turns": [
                    {
                        "text": "Reading.",
                        **tool_turn("echo", {"text": "hi"}),
                        "usage": {"input_tokens": 10, "output_tokens": 3},
                    },
                    {"text": "All done here.", "usage": {"input_tokens": 20, "output_tokens": 5}},
                ]
            }
        ],
    )
    loop, persist = make_loop(script, tmp_path, [EchoTool()])
    ended, events = await run(loop)
    assert ended.stop_reason == "end_turn"
    assert (ended.usage.input_tokens, ended.usage.output_tokens) == (30, 8)
    assert ended.usage.total_tokens == 38
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Reading.All done here."
    kinds = [type(e) for e in events if not isinstance(e, TextDelta)]
    assert kinds == [
        ToolCallStarted,
        ToolCallInput,
        ModelCallDone,
        ToolCallResult,
        ModelCallDone,
        TurnEnded,
    ]
    # The turn's usage so far, after each model call.
    calls = [e.usage for e in events if isinstance(e, ModelCallDone)]
    assert [(u.input_tokens, u.output_tokens) for u in calls] == [(10, 3), (30, 8)]
    result = next(e for e in events if isinstance(e, ToolCallResult))
    assert (result.status, result.output) == ("completed", "hi")
    assert [m["role"] for m in persist.messages] == ["user", "assistant", "user", "assistant"]
    assert_history_valid(persist.messages)


async def test_max_turn_requests_stops_a_tool_loop(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json", [{"turns": [tool_turn("echo", {"text": str(i)}) for i in range(10)]}]
    )
    settings = Settings(max_turn_requests=3)
    loop, persist = make_loop(script, tmp_path, [EchoTool()], settings)
    ended, events = await run(loop)
    assert ended.stop_reason == "max_turn_requests"
    assert sum(isinstance(e, ToolCallResult) for e in events) == 3
    assert_history_valid(persist.messages)


async def test_max_tokens_from_the_model(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json", [{"turns": [{"text": "cut off", "stop_reason": "max_tokens"}]}]
    )
    loop, _ = make_loop(script, tmp_path, [])
    ended, _ = await run(loop)
    assert ended.stop_reason == "max_tokens"


async def test_max_tokens_setting_really_truncates(tmp_path: Path):
    long_text = "word " * 400
    script = write_script(tmp_path / "s.json", [{"turns": [{"text": long_text}]}])
    loop, persist = make_loop(script, tmp_path, [], Settings(max_tokens=10))
    ended, events = await run(loop)
    assert ended.stop_reason == "max_tokens"
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert 0 < len(streamed) <= 40
    assert persist.messages[-1]["content"][0]["text"] == streamed


async def test_max_tokens_with_a_tool_call_does_not_run_it(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json",
        [{"turns": [tool_turn("touch", {"path": "x"}, stop_reason="max_tokens")]}],
    )
    loop, persist = make_loop(script, tmp_path, [TouchTool()], gate=PermissionGate("bypass"))
    ended, events = await run(loop)
    assert ended.stop_reason == "max_tokens"
    assert not (tmp_path / "x").exists()
    result = next(e for e in events if isinstance(e, ToolCallResult))
    assert result.status == "failed"
    assert_history_valid(persist.messages)


async def test_refusal(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json", [{"turns": [{"text": "I can't help.", "stop_reason": "refusal"}]}]
    )
    loop, _ = make_loop(script, tmp_path, [])
    ended, _ = await run(loop)
    assert ended.stop_reason == "refusal"


async def test_model_error_becomes_a_notice(tmp_path: Path):
    script = write_script(tmp_path / "s.json", [{"turns": [{"error": "overloaded, try later"}]}])
    loop, _ = make_loop(script, tmp_path, [])
    ended, events = await run(loop)
    assert ended.stop_reason == "end_turn"
    notices = [e.message for e in events if isinstance(e, ErrorNotice)]
    assert notices and "overloaded" in notices[0]


async def test_unknown_tool_is_an_error_result_and_the_turn_goes_on(tmp_path: Path):
    script = write_script(tmp_path / "s.json", [{"turns": [tool_turn("nope"), {"text": "sorry"}]}])
    loop, persist = make_loop(script, tmp_path, [EchoTool()])
    ended, events = await run(loop)
    assert ended.stop_reason == "end_turn"
    result = next(e for e in events if isinstance(e, ToolCallResult))
    assert result.status == "failed" and "Unknown tool 'nope'" in result.output
    assert_history_valid(persist.messages)


async def test_rejection_gives_the_model_permission_denied(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json", [{"turns": [tool_turn("touch", {"path": "x"}), {"text": "ok"}]}]
    )
    loop, persist = make_loop(script, tmp_path, [TouchTool()])
    asked = []

    async def ask(request):
        asked.append(request)
        return "reject_once"

    ended, events = await run(loop, ask)
    assert ended.stop_reason == "end_turn"
    assert not (tmp_path / "x").exists()
    assert asked and asked[0].call_id == next(
        e.call_id for e in events if isinstance(e, ToolCallStarted)
    )
    result = persist.messages[2]["content"][0]
    assert result["content"] == "Permission denied." and result["is_error"]
    card = next(e for e in events if isinstance(e, ToolCallResult))
    assert card.denied


async def test_cancel_mid_stream_keeps_partial_text(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json", [{"turns": [{"text": "one two three four five six", "delay": 0.05}]}]
    )
    loop, persist = make_loop(script, tmp_path, [])
    events: list[Any] = []
    streaming = asyncio.Event()

    def emit(event: Any) -> None:
        events.append(event)
        if isinstance(event, TextDelta):
            streaming.set()

    task = asyncio.ensure_future(loop.run_turn(PROMPT, emit, None))
    await streaming.wait()
    task.cancel()
    ended = await task
    assert ended.stop_reason == "cancelled"
    assert isinstance(events[-1], TurnEnded)
    partial = persist.messages[-1]
    assert partial["role"] == "assistant" and partial["content"].startswith("one")
    assert partial["content"] != "one two three four five six"


async def test_cancel_mid_tool_closes_every_call(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json",
        [{"turns": [{"tool_use": [{"name": "slow"}, {"name": "echo", "input": {"text": "b"}}]}]}],
    )
    slow = SlowTool()
    loop, persist = make_loop(script, tmp_path, [slow, EchoTool()])
    events: list[Any] = []
    task = asyncio.ensure_future(loop.run_turn(PROMPT, events.append, None))
    await slow.started.wait()
    task.cancel()
    ended = await task
    assert ended.stop_reason == "cancelled"
    assert slow.cancelled
    results = [e for e in events if isinstance(e, ToolCallResult)]
    assert [(r.name, r.output) for r in results] == [("slow", "Cancelled."), ("echo", "Cancelled.")]
    assert_history_valid(persist.messages)
    assert persist.messages[-1]["content"][0]["content"] == "Cancelled."


async def test_cancel_while_waiting_for_permission(tmp_path: Path):
    script = write_script(tmp_path / "s.json", [{"turns": [tool_turn("touch", {"path": "x"})]}])
    loop, persist = make_loop(script, tmp_path, [TouchTool()])
    waiting = asyncio.Event()

    async def ask(request):
        waiting.set()
        await asyncio.sleep(30)
        return "allow_once"

    task = asyncio.ensure_future(loop.run_turn(PROMPT, lambda e: None, ask))
    await waiting.wait()
    task.cancel()
    ended = await task
    assert ended.stop_reason == "cancelled"
    assert not (tmp_path / "x").exists()
    assert_history_valid(persist.messages)


async def test_cancelled_permission_answer_ends_the_turn(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json", [{"turns": [tool_turn("touch", {"path": "x"}), {"text": "never"}]}]
    )
    loop, persist = make_loop(script, tmp_path, [TouchTool()])

    async def ask(request):
        return "cancelled"

    ended, events = await run(loop, ask)
    assert ended.stop_reason == "cancelled"
    assert not (tmp_path / "x").exists()
    assert not any(isinstance(e, TextDelta) and "never" in e.text for e in events)
    assert_history_valid(persist.messages)


async def test_compaction_summarises_older_turns(tmp_path: Path):
    filler = "terraform " * 300
    script = write_script(
        tmp_path / "s.json",
        [{"match": "prompt", "turns": [tool_turn("echo", {"text": filler}), {"text": "noted"}]}],
    )
    settings = Settings(context_window=4000)
    loop, persist = make_loop(script, tmp_path, [EchoTool()], settings)
    events: list[Any] = []
    for i in range(4):
        await loop.run_turn([{"type": "text", "text": f"prompt {i}"}], events.append, None)
    compactions = [e for e in events if isinstance(e, Compacted)]
    assert compactions, "expected a compaction"
    started = [e for e in events if isinstance(e, CompactionStatus)]
    assert [e.status for e in started] == ["in_progress"] * len(compactions)
    assert [e.compaction_id for e in started] == [e.compaction_id for e in compactions]
    assert events.index(started[0]) < events.index(compactions[0])
    assert persist.compactions
    assert "The user asked: prompt 0" in persist.compactions[0][0]
    summary, keep_from = persist.compactions[-1]
    # Later summaries carry the earlier ones forward.
    assert "prompt 0" in summary and "prompt 1" in summary
    kept = loop.conversation.messages[keep_from:]
    first = kept[0]["content"]
    assert not (isinstance(first, list) and first[0].get("type") == "tool_result")
    sent = loop.conversation.model_messages()
    assert sent[0]["content"][0]["text"].startswith("[Summary of the earlier conversation]")
    assert len(loop.conversation.messages) == len(persist.messages)


async def test_tool_output_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENGbPxRfiCY")
    script = write_script(
        tmp_path / "s.json",
        [
            {
                "turns": [
                    tool_turn("echo", {"text": "key=wJalrXUtnFEMIK7MDENGbPxRfiCY"}),
                    {"text": "."},
                ]
            }
        ],
    )
    loop, persist = make_loop(script, tmp_path, [EchoTool()])
    _, events = await run(loop)
    result = next(e for e in events if isinstance(e, ToolCallResult))
    assert result.output == "key=[REDACTED:AWS_SECRET_ACCESS_KEY]"
    stored_result = persist.messages[2]["content"][0]["content"]
    assert stored_result == "key=[REDACTED:AWS_SECRET_ACCESS_KEY]"


async def test_subagent_has_its_own_history_and_the_same_user(tmp_path: Path):
    script = write_script(
        tmp_path / "s.json",
        [{"match": "audit", "turns": [tool_turn("touch", {"path": "sub"}), {"text": "sub done"}]}],
    )
    loop, persist = make_loop(script, tmp_path, [TouchTool()])
    asked = []

    async def ask(request):
        asked.append(request.tool_name)
        return "allow_once"

    answer = await loop.run_subagent("audit the module", ask)
    assert answer == "sub done"
    assert asked == ["touch"] and (tmp_path / "sub").exists()
    assert persist.messages == []
