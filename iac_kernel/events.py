"""Events the agent loop streams to a front end (kernel or ACP) during a turn.

The vocabulary sits below the tools and models that use it (Diff, Usage), so no lower layer
imports agent/."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

StopReason = Literal["end_turn", "max_turn_requests", "max_tokens", "cancelled", "refusal"]


@dataclass
class Usage:
    """Token counts; added up over every model call of a turn."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass
class Diff:
    """A file change shown to the user: whole old and new text of one file."""

    path: str
    old_text: str | None
    new_text: str

    def first_changed_line(self) -> int:
        """1-based number of the first line that differs between the old and new text."""
        old = (self.old_text or "").splitlines()
        new = self.new_text.splitlines()
        for number, (before, after) in enumerate(zip(old, new, strict=False), 1):
            if before != after:
                return number
        return min(len(old), len(new)) + 1 if old != new else 1


@dataclass(frozen=True)
class Location:
    """A file a tool call touches, at the line it is about when the tool knows it (the
    first line read, an edit's first changed line, a grep match): editors follow it."""

    path: str
    line: int | None = None


@dataclass
class UserMessage:
    """A user prompt (only produced when replaying history)."""

    text: str


@dataclass
class TextDelta:
    text: str


@dataclass
class ThinkingDelta:
    text: str


@dataclass
class ToolCallStarted:
    """The model began a tool call; its input is not known yet."""

    call_id: str
    name: str
    title: str
    kind: str


@dataclass
class ToolCallInput:
    """The tool call's whole input is known (and about to be checked and run)."""

    call_id: str
    name: str
    title: str
    kind: str
    input: dict[str, Any]
    locations: list[Location] = field(default_factory=list)
    diff: Diff | None = None


@dataclass
class ToolCallOutput:
    """Output a running tool call printed (coalesced chunks, secrets redacted).

    ``text`` is what is new since the last event; ``tail`` is the end of everything printed
    so far (at most :data:`OUTPUT_TAIL_CHARS`), for front ends that replace rather than
    append (ACP ``tool_call_update`` content)."""

    call_id: str
    text: str
    tail: str = ""


#: How much of a running call's output ``ToolCallOutput.tail`` keeps.
OUTPUT_TAIL_CHARS = 8000


@dataclass
class ToolCallResult:
    """A tool call ended. ``denied`` marks a refusal by the user or the mode."""

    call_id: str
    name: str
    status: Literal["completed", "failed"]
    output: str
    raw_output: Any = None
    diff: Diff | None = None
    denied: bool = False
    #: Places the finished call found (``Tool.result_locations``: grep's matches).
    locations: list[Location] = field(default_factory=list)
    #: The checklist a completed call set for the user (``Tool.checklist``: update_plan's
    #: steps), shown as an ACP ``plan`` and the notebook's task list.
    checklist: list[dict[str, str]] | None = None
    #: The plan's every row for its plan card (``ToolResult.plan_rows``; front ends only).
    plan_rows: dict[str, Any] | None = None


@dataclass
class Compacted:
    """Older turns were summarised to fit the model's context window."""

    notice: str
    summarized_messages: int
    #: The compaction's id: the one its :class:`CompactionStatus` ``in_progress`` carried.
    compaction_id: str = ""


@dataclass
class CompactionStatus:
    """A compaction started (``in_progress``), failed or was cancelled; a finished one
    is :class:`Compacted` with the same id."""

    compaction_id: str
    status: Literal["in_progress", "failed", "cancelled"]
    error: str = ""


@dataclass
class ErrorNotice:
    """Something went wrong that the user should read (model error, retry, ...)."""

    message: str


@dataclass
class ModelCallDone:
    """A model call of the turn finished; ``usage`` is the turn's usage so far (status bars
    follow the tokens call by call, not only at the end of the turn)."""

    usage: Usage


@dataclass
class TurnEnded:
    stop_reason: StopReason
    usage: Usage


AgentEvent = (
    UserMessage
    | TextDelta
    | ThinkingDelta
    | ToolCallStarted
    | ToolCallInput
    | ToolCallOutput
    | ToolCallResult
    | Compacted
    | CompactionStatus
    | ErrorNotice
    | ModelCallDone
    | TurnEnded
)

#: Where a turn's events go: a front end's callback, plain or async.
Emit = Callable[[AgentEvent], Awaitable[None] | None]


async def send(emit: Emit, event: AgentEvent) -> None:
    """Give ``event`` to ``emit``; await what it returns if that is awaitable."""
    result = emit(event)
    if asyncio.iscoroutine(result) or isinstance(result, Awaitable):
        await result
