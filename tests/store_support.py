"""Checks on stored histories shared by the store tests."""

from __future__ import annotations

from typing import Any


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def dangling_tool_uses(messages: list[dict[str, Any]]) -> list[str]:
    """Ids of tool_use blocks anywhere in ``messages`` with no tool_result in the user
    message right after their response (what the Messages API would reject)."""
    missing: list[str] = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        ids = [b["id"] for b in _blocks(message) if b.get("type") == "tool_use" and "id" in b]
        if not ids:
            continue
        answered: set[str] = set()
        for later in messages[index + 1 :]:
            if later.get("role") != "user":
                break
            answered |= {
                b.get("tool_use_id") for b in _blocks(later) if b.get("type") == "tool_result"
            }
        missing += [i for i in ids if i not in answered]
    return missing
