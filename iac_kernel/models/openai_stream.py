"""Chat Completions stream chunks to model events, and the finished message to stored blocks.

:class:`ChunkBuilder` is fed the SDK's ``ChatCompletionChunk`` objects in order:

* ``delta.content`` -> :class:`TextChunk`; ``delta.reasoning_content`` (DeepSeek, Qwen) or
  ``delta.reasoning`` (Ollama, OpenRouter, vLLM) -> :class:`ThinkingChunk`, stored as a
  ``thinking`` block with an empty signature (so the Anthropic provider knows it is not
  Claude's and does not send it there);
* ``delta.tool_calls`` are assembled by ``index``: the id and name come in the first
  fragment, the JSON arguments in pieces. A call whose arguments are not a JSON object, or
  that has no name, is kept with empty input and ``ToolUseEnd.error`` set: the loop answers
  it with an error result instead of running it, and the turn goes on;
* the final chunk's ``usage`` (``stream_options.include_usage``): prompt tokens less the
  cached ones -> ``input_tokens``, cached (``prompt_tokens_details.cached_tokens`` or
  DeepSeek's ``prompt_cache_hit_tokens``) -> ``cache_read_tokens``;
* ``finish_reason``: stop -> end_turn, length -> max_tokens, content_filter -> refusal,
  tool_calls -> tool_use.
"""

from __future__ import annotations

import json
from typing import Any

from iac_kernel.models.base import (
    MessageDone,
    ModelEvent,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
    Usage,
)

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
}


class ChunkBuilder:
    """Turns streamed chunks into ModelEvents and the final storable content blocks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        #: Stream index -> slot in ``calls`` (differs only for servers that reuse indexes).
        self._slots: dict[int, int] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        #: Chunks seen; none at all means the endpoint sent an empty stream.
        self.chunks = 0

    def feed(self, chunk: Any) -> list[ModelEvent]:
        self.chunks += 1
        events: list[ModelEvent] = []
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self._usage(usage)
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue  # only one choice is ever asked for
            delta = getattr(choice, "delta", None)
            if delta is not None:
                events += self._delta(delta)
            if getattr(choice, "finish_reason", None):
                self.finish_reason = choice.finish_reason
        return events

    def _delta(self, delta: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        reasoning = _extra(delta, "reasoning_content") or _extra(delta, "reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.reasoning.append(reasoning)
            events.append(ThinkingChunk(reasoning))
        content = getattr(delta, "content", None)
        if isinstance(content, str) and content:
            self.text.append(content)
            events.append(TextChunk(content))
        for fragment in getattr(delta, "tool_calls", None) or []:
            events += self._tool_fragment(fragment)
        return events

    def _tool_fragment(self, fragment: Any) -> list[ModelEvent]:
        index = getattr(fragment, "index", None)
        if not isinstance(index, int):
            index = len(self.calls)
        new_id = getattr(fragment, "id", None)
        slot = self._slots.get(index, index)
        known = self.calls.get(slot)
        if known is not None and new_id and known["id"] and new_id != known["id"]:
            # Some servers give every parallel call index 0: a new id is a new call, and
            # the fragments after it (no id) continue that one.
            slot = max(self.calls) + 1
            self._slots[index] = slot
        index = slot
        call = self.calls.setdefault(index, {"id": "", "name": "", "args": [], "begun": False})
        if getattr(fragment, "id", None):
            call["id"] = call["id"] or fragment.id
        function = getattr(fragment, "function", None)
        if function is not None:
            if getattr(function, "name", None):
                call["name"] = call["name"] or function.name
            if getattr(function, "arguments", None):
                call["args"].append(function.arguments)
        if not call["begun"] and call["name"]:
            call["id"] = call["id"] or f"call_{index}"
            call["begun"] = True
            return [ToolUseBegin(id=call["id"], name=call["name"])]
        return []

    def _usage(self, usage: Any) -> None:
        prompt = getattr(usage, "prompt_tokens", None) or 0
        completion = getattr(usage, "completion_tokens", None) or 0
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if not isinstance(cached, int):
            cached = _extra(usage, "prompt_cache_hit_tokens")
        cached = cached if isinstance(cached, int) else 0
        # Some servers repeat usage on several chunks: the last report wins.
        self.usage = Usage(
            input_tokens=max(0, prompt - cached),
            output_tokens=completion,
            cache_read_tokens=cached,
        )

    def finish_tools(self) -> list[ModelEvent]:
        """Parse every call's arguments: a ToolUseEnd each, malformed ones with an error."""
        events: list[ModelEvent] = []
        for index in sorted(self.calls):
            call = self.calls[index]
            raw = "".join(call["args"])
            error = None
            if not call["name"]:
                error = f"the model sent a tool call without a name (arguments {raw[:200]!r})"
                call["name"] = "unnamed_tool"
            try:
                parsed = json.loads(raw) if raw.strip() else {}
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                error = error or (
                    f"the arguments for {call['name']!r} are not a JSON object: {raw[:200]!r}"
                )
                parsed = {}
            call["id"] = call["id"] or f"call_{index}"
            call["input"] = parsed
            call["error"] = error
            if not call["begun"]:
                call["begun"] = True
                events.append(ToolUseBegin(id=call["id"], name=call["name"]))
            events.append(ToolUseEnd(call["id"], call["name"], parsed, error=error))
        return events

    def done(self) -> MessageDone:
        """The stored message: thinking, text, then the tool calls."""
        reason = STOP_REASONS.get(self.finish_reason or "", None)
        if reason is None:
            reason = "tool_use" if self.calls else "end_turn"
        if reason == "max_tokens" and self.calls:
            # A call cut off by the limit cannot be answered; the loop ends the turn.
            self.calls = {i: c for i, c in self.calls.items() if not c.get("error")}
        content: list[dict[str, Any]] = []
        if self.reasoning:
            content.append(
                {"type": "thinking", "thinking": "".join(self.reasoning), "signature": ""}
            )
        if self.text:
            content.append({"type": "text", "text": "".join(self.text)})
        for index in sorted(self.calls):
            call = self.calls[index]
            content.append(
                {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["input"]}
            )
        return MessageDone(content=content, stop_reason=reason, usage=self.usage)


def _extra(obj: Any, name: str) -> Any:
    """A field the SDK's types do not declare (servers add them; pydantic keeps extras)."""
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, dict):
            value = extra.get(name)
    return value
