"""Context compaction: summarise older turns when the context nears the model's window."""

from __future__ import annotations

import json
from typing import Any

from iac_kernel.models.base import MessageDone, Model, ModelRequest, TextChunk
from iac_kernel.models.scripted import estimate_tokens

SUMMARY_PREFIX = "[Summary of the earlier conversation]\n"
SUMMARY_SYSTEM = (
    "You summarise a conversation between an infrastructure engineer and an IaC agent so "
    "the agent can continue it. Keep: the user's goals and decisions, files read or changed "
    "(paths), commands run and their outcomes, open questions. Drop: file contents that can "
    "be re-read. Never include secrets. Answer with the summary only."
)
#: Keep roughly this share of the window verbatim after compacting.
KEEP_SHARE = 0.3


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
    async for event in model.stream(request):
        if isinstance(event, TextChunk):
            parts.append(event.text)
        elif isinstance(event, MessageDone):
            break
    return "".join(parts).strip() or "(empty summary)"
