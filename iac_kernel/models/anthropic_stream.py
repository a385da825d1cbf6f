"""Anthropic stream events to model events, and the finished message to storable blocks.

:class:`MessageBuilder` is fed the SDK's raw stream events in order. Text and thinking
deltas become chunks at once, a tool call is announced when it starts and ends with its
parsed JSON input; usage counts follow ``message_start``/``message_delta``. ``done()``
gives the :class:`~iac_kernel.models.base.MessageDone` the loop stores.
"""

from __future__ import annotations

import json
from typing import Any

from iac_kernel.models.base import (
    MessageDone,
    ModelError,
    ModelEvent,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
    Usage,
)


class MessageBuilder:
    """Turns raw stream events into ModelEvents and the final storable content blocks."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.bad_json: dict[int, str] = {}
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.finished = False

    def feed(self, event: Any) -> list[ModelEvent]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self._usage(getattr(event.message, "usage", None), start=True)
        elif kind == "content_block_start":
            return self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            return self._stop(event.index)
        elif kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            self._usage(getattr(event, "usage", None), start=False)
        elif kind == "message_stop":
            self.finished = True
        return []

    def _usage(self, usage: Any, *, start: bool) -> None:
        if usage is None:
            return
        # message_delta counts are cumulative totals: they replace, never add; fields it
        # leaves out (None) keep the message_start value.
        fields = {
            "input_tokens": "input_tokens",
            "output_tokens": "output_tokens",
            "cache_read_input_tokens": "cache_read_tokens",
            "cache_creation_input_tokens": "cache_write_tokens",
        }
        for api_name, ours in fields.items():
            value = getattr(usage, api_name, None)
            if isinstance(value, int):
                setattr(self.usage, ours, value)
            elif start:
                setattr(self.usage, ours, 0)

    def _start(self, index: int, block: Any) -> list[ModelEvent]:
        kind = block.type
        if kind == "text":
            self.blocks[index] = {"type": "text", "text": block.text or ""}
        elif kind == "thinking":
            self.blocks[index] = {
                "type": "thinking",
                "thinking": block.thinking or "",
                "signature": getattr(block, "signature", None) or "",
            }
        elif kind == "redacted_thinking":
            self.blocks[index] = {"type": "redacted_thinking", "data": block.data}
        elif kind == "tool_use":
            self.blocks[index] = {
                "type": "tool_use",
                "id": block.id,
                "name": block.name,
                "input": {},
            }
            self.json_parts[index] = []
            return [ToolUseBegin(id=block.id, name=block.name)]
        else:
            # Server tools and future block types: keep them as the API sent them.
            data = block.to_dict() if hasattr(block, "to_dict") else dict(block)
            self.blocks[index] = data
            if "input" in data:
                self.json_parts[index] = []
        return []

    def _delta(self, index: int, delta: Any) -> list[ModelEvent]:
        block = self.blocks.get(index)
        if block is None:
            return []
        kind = delta.type
        if kind == "text_delta" and block["type"] == "text":
            block["text"] += delta.text
            return [TextChunk(delta.text)] if delta.text else []
        if kind == "thinking_delta" and block["type"] == "thinking":
            block["thinking"] += delta.thinking
            return [ThinkingChunk(delta.thinking)] if delta.thinking else []
        if kind == "signature_delta" and block["type"] == "thinking":
            block["signature"] = delta.signature
        elif kind == "input_json_delta" and index in self.json_parts:
            self.json_parts[index].append(delta.partial_json)
        elif kind == "citations_delta" and block["type"] == "text":
            citation = delta.citation
            block.setdefault("citations", []).append(
                citation.to_dict() if hasattr(citation, "to_dict") else citation
            )
        return []

    def _stop(self, index: int) -> list[ModelEvent]:
        block = self.blocks.get(index)
        if block is None or index not in self.json_parts:
            return []
        raw = "".join(self.json_parts.pop(index))
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            # Decided at the end: a cut-off input is expected when max_tokens hit.
            self.bad_json[index] = raw
            return []
        block["input"] = parsed
        if block["type"] == "tool_use":
            return [ToolUseEnd(id=block["id"], name=block["name"], input=parsed)]
        return []

    def done(self) -> MessageDone:
        stop_reason = self.stop_reason or "end_turn"
        if self.bad_json and stop_reason != "max_tokens":
            index, raw = next(iter(self.bad_json.items()))
            name = self.blocks[index].get("name", "?")
            raise ModelError(
                f"the model sent tool input for {name!r} that is not a JSON object: {raw[:200]!r}"
            )
        content = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if index in self.bad_json or index in self.json_parts:
                continue  # an unfinished tool call cannot be stored or answered
            if block["type"] == "text" and not block["text"]:
                continue  # the API rejects empty text blocks in later requests
            content.append(block)
        return MessageDone(content=content, stop_reason=stop_reason, usage=self.usage)
