"""The conversation a loop works on: how it grows (persisted first, then in memory) and
how it is compacted when the context nears the model's window.

:class:`Transcript` is the only way the loop adds to a :class:`Conversation`: every message
is written through :class:`Persist` (the session store) when it completes, and each tool
result as its own record the moment its call finishes; the in-memory history changes only
after the write succeeded. It also answers which calls of the last response still lack a
result, so a cancelled or broken turn can be closed into a valid history.

Compaction (:func:`split_point`, :func:`summarise`) summarises older turns; the summary
stands before the kept messages in what the model sees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from iac_kernel import telemetry
from iac_kernel.models.base import MessageDone, Model, ModelRequest, TextChunk
from iac_kernel.models.scripted import estimate_tokens
from iac_kernel.textsafe import readable_value
from iac_kernel.tools.base import ToolResult

SUMMARY_PREFIX = "[Summary of the earlier conversation]\n"
SUMMARY_SYSTEM = (
    "You summarise a conversation between an infrastructure engineer and an IaC agent so "
    "the agent can continue it. Keep: the user's goals and decisions, files read or changed "
    "(paths), commands run and their outcomes, open questions. Drop: file contents that can "
    "be re-read. Never include secrets. Answer with the summary only."
)
#: Keep roughly this share of the window verbatim after compacting.
KEEP_SHARE = 0.3


@dataclass
class Conversation:
    """The session's messages, and what the model sees of them after compaction."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    keep_from: int = 0

    def model_messages(self) -> list[dict[str, Any]]:
        """What is sent to the model: the summary, then the kept messages, roles merged."""
        messages = self.messages[self.keep_from :]
        if self.summary:
            messages = [{"role": "user", "content": SUMMARY_PREFIX + self.summary}]
            messages += self.messages[self.keep_from :]
        # Lone surrogates (undecodable bytes) are stored exactly; the model gets them readable.
        return readable_value(merge_roles(messages))


class Persist:
    """Where the loop writes completed messages and compactions: the session store's
    writer (:class:`~iac_kernel.sessions.store.SessionWriter`), or nowhere (this class:
    a sub-agent's history is not kept)."""

    def append_message(self, message: dict[str, Any]) -> None: ...

    def append_tool_result(
        self,
        block: dict[str, Any],
        *,
        name: str = "",
        raw_output: Any = None,
        masked_with: frozenset[str] | None = None,
    ) -> None:
        """One finished call's result, written the moment it finishes (its own record;
        ``masked_with``: the known values its text was masked with, when known)."""

    def append_compaction(self, summary: str, keep_from: int) -> None: ...


def merge_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive messages of one role (e.g. a prompt after a cancelled turn)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        blocks = _blocks(message["content"])
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": merged[-1]["content"] + blocks}
        else:
            merged.append({"role": message["role"], "content": blocks})
    return merged


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


class Transcript:
    """Adds messages and tool results to a conversation, each persisted before it is kept."""

    def __init__(self, conversation: Conversation, persist: Persist) -> None:
        self.conversation = conversation
        self.persist = persist

    def append(self, message: dict[str, Any]) -> None:
        """Persist ``message``, then add it to the history (never the other way round)."""
        self.persist.append_message(message)
        self.conversation.messages.append(message)

    def append_result(self, call_id: str, name: str, result: ToolResult) -> None:
        """Persist one call's result as its own record, then merge it into the user
        message that holds this response's results."""
        block = _tool_result(call_id, result)
        self.persist.append_tool_result(
            block, name=name, raw_output=result.raw_output, masked_with=result.masked_with
        )
        results = _results_message(self.conversation.messages)
        if results is not None:
            results["content"].append(block)
        else:
            self.conversation.messages.append({"role": "user", "content": [block]})

    def answered(self) -> set[str]:
        """Ids of the last response's calls that already have a result."""
        results = _results_message(self.conversation.messages)
        return {b["tool_use_id"] for b in results["content"]} if results else set()

    def open_tool_uses(self) -> list[dict[str, Any]]:
        """The last response's tool_use blocks that have no result yet."""
        messages = self.conversation.messages
        if _results_message(messages) is not None:
            response = messages[-2]
        elif messages:
            response = messages[-1]
        else:
            return []
        if response.get("role") != "assistant":
            return []
        content = response.get("content")
        answered = self.answered()
        return [
            b
            for b in (content if isinstance(content, list) else [])
            if b.get("type") == "tool_use" and b.get("id") not in answered
        ]


def _tool_result(call_id: str, result: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": result.content,
    }
    if result.is_error:
        block["is_error"] = True
    return block


def _results_message(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last message if it holds (only) the results of the response before it."""
    if len(messages) < 2 or messages[-2].get("role") != "assistant":
        return None
    last = messages[-1]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, list) or not content:
        return None
    return last if all(b.get("type") == "tool_result" for b in content) else None


# -- compaction ------------------------------------------------------------------------


def context_tokens(system: str, messages: list[dict[str, Any]], tools: list[dict]) -> int:
    return estimate_tokens(system) + estimate_tokens(messages) + estimate_tokens(tools)


def split_point(messages: list[dict[str, Any]], keep_tokens: int) -> int:
    """Index of the first message to keep verbatim; 0 when nothing can be summarised.

    Never splits between an assistant tool_use and the user message with its tool_result:
    a kept suffix never starts with a tool_result message.
    """
    kept = 0
    best = 0
    for i in range(len(messages) - 1, 0, -1):
        kept += estimate_tokens(messages[i])
        if _has_tool_result(messages[i]):
            continue
        if kept > keep_tokens and best:
            break
        best = i
    return best


def _has_tool_result(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def transcript(messages: list[dict[str, Any]]) -> str:
    """A plain-text transcript of messages for the summarising call."""
    lines = []
    for message in messages:
        role = message.get("role", "?").upper()
        content = message.get("content")
        if isinstance(content, str):
            lines.append(f"{role}: {content}")
            continue
        for block in content:
            kind = block.get("type")
            if kind == "text":
                lines.append(f"{role}: {block['text']}")
            elif kind == "tool_use":
                lines.append(f"TOOL CALL: {block['name']} {json.dumps(block.get('input'))}")
            elif kind == "tool_result":
                result = block.get("content")
                text = result if isinstance(result, str) else json.dumps(result)
                lines.append(f"TOOL RESULT: {text[:2000]}")
    return "\n".join(lines)


async def summarise(model: Model, messages: list[dict[str, Any]], previous: str | None) -> str:
    """Ask the model for a summary of ``messages`` (and the previous summary, if any)."""
    text = transcript(messages)
    if previous:
        text = f"Earlier summary:\n{previous}\n\nConversation since:\n{text}"
    request = ModelRequest(
        system=SUMMARY_SYSTEM,
        messages=[{"role": "user", "content": text}],
        max_tokens=2048,
        purpose="compaction",
    )
    parts: list[str] = []
    async for event in telemetry.model_call(model, request, model.stream(request)):
        if isinstance(event, TextChunk):
            parts.append(event.text)
        elif isinstance(event, MessageDone):
            break
    return "".join(parts).strip() or "(empty summary)"
