"""Requests to the Anthropic Messages API: model ids, context windows and call arguments.

Resolves a user's model id (provider-specific spellings, the ``[1m]`` long-context suffix)
to the id sent, its context window and the betas it needs, and turns a
:class:`~iac_kernel.models.base.ModelRequest` into ``messages.create`` arguments: thinking
(a budget, or adaptive where only that is documented) and prompt-cache breakpoints.
"""

from __future__ import annotations

import re
from typing import Any

from iac_kernel.models.base import ModelError, ModelRequest

DEFAULT_CONTEXT_WINDOW = 200_000
LONG_CONTEXT_WINDOW = 1_000_000
#: Beta that opens the 1M window on models where it is opt-in.
CONTEXT_1M_BETA = "context-1m-2025-08-07"
#: Claude Code's convention for "this model with the 1M context window".
LONG_CONTEXT_SUFFIX = "[1m]"

# Context windows as documented on platform.claude.com model pages (checked when written):
# these models have a 1M window natively; everything else defaults to 200k.
_NATIVE_1M = frozenset(
    {
        "claude-opus-4-6",
        "claude-sonnet-4-6",
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-opus-5",
        "claude-sonnet-5",
    }
)
# Documented to reach 1M only with the CONTEXT_1M_BETA header (ask with the "[1m]" suffix).
_BETA_1M = frozenset({"claude-sonnet-4", "claude-sonnet-4-5"})
# Documented as adaptive-thinking models without manual extended thinking: a budget cannot
# be sent to them, so thinking_budget > 0 turns on {"type": "adaptive"} instead.
_ADAPTIVE_THINKING = frozenset({"claude-opus-4-7", "claude-opus-5", "claude-sonnet-5"})


def canonical_model(model_id: str) -> str:
    """``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` / ``claude-sonnet-4-5@20250929``
    -> ``claude-sonnet-4-5``."""
    name = model_id.strip().lower()
    name = re.sub(r"^(?:[a-z]{2,6}\.)?anthropic\.", "", name)
    name = re.sub(r"-v\d+(?::\d+)?$", "", name)
    name = re.sub(r"[@-]\d{8}$", "", name)
    return name


def resolve_model(model_id: str) -> tuple[str, int, list[str]]:
    """Split a user model id into (id sent to the API, context window, betas to send).

    A ``[1m]`` suffix asks for the 1M window; it is accepted only where that is documented.
    """
    requested = model_id.strip()
    if not requested:
        raise ValueError("model id is empty")
    long_context = requested.lower().endswith(LONG_CONTEXT_SUFFIX)
    api_id = requested[: -len(LONG_CONTEXT_SUFFIX)] if long_context else requested
    family = canonical_model(api_id)
    if family in _NATIVE_1M:
        return api_id, LONG_CONTEXT_WINDOW, []
    if long_context:
        if family in _BETA_1M:
            return api_id, LONG_CONTEXT_WINDOW, [CONTEXT_1M_BETA]
        supported = ", ".join(sorted(_BETA_1M | _NATIVE_1M))
        raise ValueError(
            f"model {api_id!r} is not documented to support a 1M context window "
            f"(supported: {supported})"
        )
    return api_id, DEFAULT_CONTEXT_WINDOW, []


def context_window_for(model_id: str) -> int:
    """Context window in tokens for a model id (200k unless 1M is documented)."""
    return resolve_model(model_id)[1]


def build_params(
    request: ModelRequest,
    *,
    api_model: str,
    betas: list[str],
    prompt_caching: bool,
    thinking: bool = True,
) -> dict[str, Any]:
    """The ``messages.create`` arguments for ``request``; bad requests raise ModelError.

    ``thinking=False`` (a backend without it) never asks for extended thinking. The
    history is sent through :func:`for_messages_api` (other providers' turns made valid).
    """
    if request.max_tokens <= 0:
        raise ModelError(f"max_tokens must be positive, got {request.max_tokens}")
    if request.thinking_budget < 0:
        raise ModelError(f"thinking_budget must not be negative, got {request.thinking_budget}")
    adaptive = canonical_model(api_model) in _ADAPTIVE_THINKING
    if request.thinking_budget and not adaptive and request.thinking_budget >= request.max_tokens:
        raise ModelError(
            f"thinking_budget ({request.thinking_budget}) must be less than "
            f"max_tokens ({request.max_tokens})"
        )
    if not request.messages:
        raise ModelError("a model request needs at least one message")
    params: dict[str, Any] = {
        "model": api_model,
        "max_tokens": request.max_tokens,
        "messages": for_messages_api(request.messages),
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = request.tools
    if request.thinking_budget > 0 and thinking:
        params["thinking"] = (
            {"type": "adaptive"}
            if adaptive
            else {"type": "enabled", "budget_tokens": request.thinking_budget}
        )
    if prompt_caching:
        _add_cache_breakpoints(params)
    if betas:
        params["extra_headers"] = {"anthropic-beta": ",".join(betas)}
    return params


def _add_cache_breakpoints(params: dict[str, Any]) -> None:
    """Mark the system prompt, the tool list and the conversation so far as cacheable.

    Copies what it changes; the caller's request is left as it was. Skipped for the
    messages when the caller already placed cache_control there (the API allows four).
    """
    ephemeral = {"type": "ephemeral"}
    if isinstance(params.get("system"), str):
        params["system"] = [{"type": "text", "text": params["system"], "cache_control": ephemeral}]
    tools = params.get("tools")
    if tools and isinstance(tools[-1], dict) and "cache_control" not in tools[-1]:
        params["tools"] = [*tools[:-1], {**tools[-1], "cache_control": ephemeral}]
    messages = params["messages"]
    if any(
        isinstance(block, dict) and "cache_control" in block
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    ):
        return
    last = messages[-1]
    if not isinstance(last, dict):
        return
    content = last.get("content")
    if isinstance(content, str) and content:
        blocks: list[Any] = [{"type": "text", "text": content, "cache_control": ephemeral}]
    elif (
        isinstance(content, list)
        and content
        and isinstance(content[-1], dict)
        and content[-1].get("type") not in ("thinking", "redacted_thinking")
        and not (content[-1].get("type") == "text" and not content[-1].get("text"))
    ):
        blocks = [*content[:-1], {**content[-1], "cache_control": ephemeral}]
    else:
        return
    params["messages"] = [*messages[:-1], {**last, "content": blocks}]


_TOOL_ID = re.compile(r"[^a-zA-Z0-9_-]")


def for_messages_api(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as the Messages API takes it, whichever provider wrote it.

    Thinking with no signature (another provider's reasoning) cannot be verified by
    Claude and is dropped; tool-call ids other providers made are rewritten to the
    ``[a-zA-Z0-9_-]`` the API accepts (the same way in the call and its result). Copies
    only what changes.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            out.append(message)
            continue
        blocks = [_block(b) for b in content if not _unsigned_thinking(b)]
        if not blocks:
            blocks = [{"type": "text", "text": "(no text)"}]
        out.append({**message, "content": blocks} if blocks != content else message)
    return out


def _unsigned_thinking(block: Any) -> bool:
    return (
        isinstance(block, dict) and block.get("type") == "thinking" and not block.get("signature")
    )


def _block(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    if block.get("type") == "tool_use" and _TOOL_ID.search(str(block.get("id", ""))):
        return {**block, "id": _TOOL_ID.sub("_", str(block["id"])) or "call"}
    if block.get("type") == "tool_result" and _TOOL_ID.search(str(block.get("tool_use_id", ""))):
        return {**block, "tool_use_id": _TOOL_ID.sub("_", str(block["tool_use_id"])) or "call"}
    return block
