"""What a session keeps when it switches to another provider mid-way, in one line.

The history is stored in one shape (the Messages API's) and each provider converts it on
every call (:mod:`~iac_kernel.models.openai_request`,
:func:`~iac_kernel.models.anthropic_request.for_messages_api`): text, tool calls and
results always go across. Thinking does not always: Claude's signed thinking is only
valid for Claude, another provider's reasoning carries no signature Claude could check.
Those blocks are not sent, and the note says how many.
"""

from __future__ import annotations

from typing import Any

from iac_kernel.models.providers import PROVIDERS


def switch_note(messages: list[dict[str, Any]], provider: str, model_id: str) -> str | None:
    """The note for switching ``messages`` to ``provider`` (None with no history)."""
    if not messages:
        return None
    calls = signed = unsigned = 0
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                calls += 1
            elif kind == "redacted_thinking" or (kind == "thinking" and block.get("signature")):
                signed += 1
            elif kind == "thinking":
                unsigned += 1
    spec = PROVIDERS.get(provider)
    title = spec.title if spec else provider
    line = (
        f"Switched to {model_id}: the conversation so far ({len(messages)} messages, "
        f"{calls} tool calls with their results) goes with it."
    )
    if spec is None:  # the scripted model replays its script and reads no history
        return line
    if spec.kind == "anthropic":
        dropped = unsigned
        why = "reasoning from another provider carries no signature Claude can verify"
    else:
        dropped = signed + unsigned
        why = f"{title} cannot take Claude's signed thinking"
        if unsigned:
            why = f"{title} gets no earlier turns' thinking"
    if dropped:
        line += f" {dropped} thinking block(s) are not sent ({why}); they stay in the history."
    return line
