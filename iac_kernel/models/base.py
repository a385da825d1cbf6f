"""What the agent loop needs from a model provider.

A provider turns a :class:`ModelRequest` (Anthropic Messages API shapes: system text,
messages with content blocks, tool definitions) into a stream of :data:`ModelEvent`.
The stream always ends with exactly one :class:`MessageDone` unless it raises
:class:`ModelError`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from iac_kernel.events import Usage

#: Default of the ``model_first_byte_timeout`` setting (the SDKs' own is 600 s).
FIRST_BYTE_TIMEOUT = 90.0
#: A rough count where no tokenizer is at hand (the scripted model, compaction).
CHARS_PER_TOKEN = 4


@dataclass
class ModelRequest:
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 8192
    #: Budget for extended thinking; 0 turns it off.
    thinking_budget: int = 0
    #: Marks the compaction call, so the scripted model can answer it without a script entry.
    purpose: str = "turn"
    #: Seconds to wait for the response's first byte (0: no limit); a stream that has
    #: started is never cut by it (the ``model_first_byte_timeout`` setting).
    first_byte_timeout: float = FIRST_BYTE_TIMEOUT


@dataclass
class TextChunk:
    text: str


@dataclass
class ThinkingChunk:
    text: str


@dataclass
class ToolUseBegin:
    id: str
    name: str


@dataclass
class ToolUseEnd:
    id: str
    name: str
    input: dict[str, Any]
    #: Set when the call cannot run (e.g. its arguments were not JSON): the loop answers
    #: it with this error instead of running it, and the turn goes on.
    error: str | None = None


@dataclass
class MessageDone:
    """The assistant message is complete.

    ``content`` is the full list of content blocks as the API would return them
    (text, thinking with signature, tool_use), ready to be stored in history.
    """

    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage


ModelEvent = TextChunk | ThinkingChunk | ToolUseBegin | ToolUseEnd | MessageDone


class ModelError(Exception):
    """A model call failed in a way the user should be told about."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class Model(Protocol):
    """A model provider bound to one model id."""

    #: The id shown to users and stored with sessions, e.g. ``claude-sonnet-4-5`` or ``scripted``.
    model_id: str
    #: Context window in tokens, used to decide when to compact.
    context_window: int

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


def content_text(content: Any) -> str:
    """A message's or tool result's content as plain text (its text blocks, one a line)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def json_object(raw: str) -> dict[str, Any] | None:
    """A tool input a model streamed: the JSON object (``{}`` for nothing), else None."""
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def estimate_tokens(value: Any) -> int:
    """About how many tokens ``value`` (text, or anything JSON) takes."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return max(1, len(text) // CHARS_PER_TOKEN)
