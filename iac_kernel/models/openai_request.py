"""The stored conversation (Anthropic Messages shapes) as a Chat Completions request.

History is kept in one shape, the Messages API's, whatever model wrote it; this module
converts it for OpenAI-compatible endpoints on every call, so a session can switch
providers mid-way and keep its tool calls and results:

* user text blocks -> one ``user`` message; ``tool_result`` blocks -> one ``tool``
  message each, with the matching ``tool_call_id`` (placed before the user's text, right
  after the assistant message that made the calls);
* assistant text -> ``content``; ``tool_use`` -> ``tool_calls`` (arguments as JSON text);
  ``thinking`` -> ``reasoning_content`` only on the current turn's tool loop of a provider
  that wants it back (DeepSeek), otherwise dropped; ``redacted_thinking`` is dropped;
* tool definitions -> ``{"type": "function", "function": {...}}``. The one schema change:
  a ``parameters`` object without ``"type": "object"`` / ``properties`` gets them, because
  OpenAI's function calling rejects a non-object parameters schema.
"""

from __future__ import annotations

import json
from typing import Any

from iac_kernel.models.base import ModelError, ModelRequest
from iac_kernel.models.providers import Provider


def build_params(request: ModelRequest, *, model: str, provider: Provider) -> dict[str, Any]:
    """The ``chat.completions.create`` arguments for ``request``."""
    if request.max_tokens <= 0:
        raise ModelError(f"max_tokens must be positive, got {request.max_tokens}")
    if not request.messages:
        raise ModelError("a model request needs at least one message")
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages += convert_messages(request.messages, echo_reasoning=provider.echo_reasoning)
    params: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    limit = "max_completion_tokens" if provider.completion_tokens_param else "max_tokens"
    params[limit] = request.max_tokens
    if request.tools:
        params["tools"] = [convert_tool(tool) for tool in request.tools]
    return params


def convert_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic tool definition as an OpenAI function tool."""
    schema = dict(tool.get("input_schema") or {})
    if schema.get("type") != "object":
        schema = (
            {"type": "object", "properties": {}} if not schema else {**schema, "type": "object"}
        )
    schema.setdefault("properties", {})
    function: dict[str, Any] = {"name": tool["name"], "parameters": schema}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def convert_messages(
    messages: list[dict[str, Any]], *, echo_reasoning: bool = False
) -> list[dict[str, Any]]:
    """Messages API messages as Chat Completions messages (see the module docstring)."""
    last_prompt = _last_user_text(messages)
    out: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if message.get("role") == "user":
            out += _user(blocks)
        else:
            out.append(_assistant(blocks, echo_reasoning and position > last_prompt))
    return out


def _last_user_text(messages: list[dict[str, Any]]) -> int:
    """Index of the last user message that carries text (the current turn's prompt)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        content = message.get("content")
        if message.get("role") == "user" and (
            isinstance(content, str)
            or any(b.get("type") == "text" for b in content or [] if isinstance(b, dict))
        ):
            return position
    return -1


def _user(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            text = result_text(block.get("content"))
            if block.get("is_error"):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        elif kind == "text" and block.get("text"):
            texts.append(block["text"])
    if texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _assistant(blocks: list[dict[str, Any]], echo_reasoning: bool) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            texts.append(block["text"])
        elif kind == "thinking" and block.get("thinking"):
            reasoning.append(block["thinking"])
        elif kind == "tool_use":
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {
                        "name": block.get("name", ""),
                        "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                    },
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    if echo_reasoning and reasoning:
        message["reasoning_content"] = "".join(reasoning)
    return message


def result_text(content: Any) -> str:
    """A tool_result's content as plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""
