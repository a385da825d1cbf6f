"""Live tool output from the agent loop: ``ToolContext.on_output`` chunks become coalesced
``ToolCallOutput`` events before the call's result (also from another thread), secrets
redacted, and ACP shows them as in-progress ``tool_call_update`` content."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from core_support import make_loop, write_script
from iac_kernel.acp.protocol.updates import to_update
from iac_kernel.agent.tool_calls import OUTPUT_INTERVAL
from iac_kernel.events import AgentEvent, ToolCallOutput, ToolCallResult
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolResult

PROMPT = [{"type": "text", "text": "go"}]


class TickTool(Tool):
    """Prints ten lines 20 ms apart, half of them from a worker thread."""

    name = "tick"
    description = "Tick."
    input_schema = {"type": "object", "properties": {}}
    kind = "execute"
    category = Category.READ

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.on_output is not None
        for i in range(5):
            ctx.on_output(f"tick{i} token=SECRETVALUE123\n")
            await asyncio.sleep(0.02)
        worker = threading.Thread(
            target=lambda: [ctx.on_output(f"tock{i}\n") for i in range(5)]  # type: ignore[misc]
        )
        worker.start()
        await asyncio.to_thread(worker.join)
        await asyncio.sleep(0.01)
        return ToolResult("ticked")


async def test_live_output_events_come_coalesced_and_before_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "SECRETVALUE123")
    script = write_script(
        tmp_path / "s.json",
        [{"match": "go", "turns": [{"tool_use": [{"name": "tick", "input": {}}]}, {"text": "ok"}]}],
    )
    loop, _persist = make_loop(script, tmp_path, [TickTool()])
    events: list[tuple[float, AgentEvent]] = []
    await loop.run_turn(PROMPT, lambda e: events.append((time.monotonic(), e)), None)
    outputs = [(t, e) for t, e in events if isinstance(e, ToolCallOutput)]
    result_index = next(i for i, (_t, e) in enumerate(events) if isinstance(e, ToolCallResult))
    output_indexes = [i for i, (_t, e) in enumerate(events) if isinstance(e, ToolCallOutput)]
    assert outputs and max(output_indexes) < result_index
    text = "".join(e.text for _t, e in outputs)
    assert text.count("tick") == 5 and text.count("tock") == 5
    assert text.index("tick4") < text.index("tock0")  # in order, threads included
    assert "SECRETVALUE123" not in text
    # Coalesced: fewer events than chunks, spaced by the interval (but the last, on close).
    assert len(outputs) < 10
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(outputs[:-1])]
    assert all(gap >= OUTPUT_INTERVAL * 0.8 for gap in gaps)
    assert outputs[-1][1].tail.endswith("tock4\n")


def test_acp_shows_live_output_as_an_in_progress_update() -> None:
    update = to_update(ToolCallOutput("call1", "new line\n", "old line\nnew line\n"))
    assert update is not None
    dumped = update.model_dump(by_alias=True, exclude_none=True)
    assert dumped["sessionUpdate"] == "tool_call_update"
    assert dumped["status"] == "in_progress" and dumped["toolCallId"] == "call1"
    assert dumped["content"][0]["content"]["text"] == "old line\nnew line\n"
