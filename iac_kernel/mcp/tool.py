"""Each tool of an MCP server as an ordinary :class:`~iac_kernel.tools.base.Tool`.

Named ``mcp__<server>__<tool>`` (characters the Messages API refuses become ``_``),
with the server's description and JSON schema. Category ``EXECUTE`` whatever the server
declares: the permission gate asks before every call unless the user chose "allow
always" for that tool (the gate remembers answers by tool name) or the mode bypasses it.
The server's hints (``readOnlyHint``, ``destructiveHint``) are shown in the title, never
trusted. Results come back as text: text blocks as they are, images, audio and binary
resources as markers, structured content as JSON. The loop redacts secrets from the
result like any other tool's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp import types

from iac_kernel.mcp.client import McpCallError, McpServer
from iac_kernel.mcp.sdk import wire
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult

PREFIX = "mcp__"
MAX_NAME = 64
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>`` within the Messages API's name rules."""
    name = f"{PREFIX}{_BAD_CHARS.sub('_', server)}__{_BAD_CHARS.sub('_', tool)}"
    return name[:MAX_NAME]


class McpTool(Tool):
    """One MCP server tool; calls go to the server's open session."""

    kind = "other"
    category = Category.EXECUTE

    def __init__(self, server: McpServer, tool: types.Tool, name: str | None = None) -> None:
        spec = wire(tool)
        self.server = server
        self.remote_name = tool.name
        self.name = name or tool_name(server.name, tool.name)
        description = (spec.get("description") or spec.get("title") or tool.name).strip()
        self.description = f"[MCP server {server.name}] {description}"
        schema = dict(spec.get("inputSchema") or {})
        schema.setdefault("type", "object")
        if schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        self.input_schema = schema
        self.hints = _hints(spec.get("annotations") or {})

    def title(self, args: dict[str, Any]) -> str:
        hint = f" (server says: {', '.join(self.hints)})" if self.hints else ""
        return f"{self.server.name}: {self.remote_name}{hint}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            result = await self.server.call(self.remote_name, args, ctx.elicit)
        except McpCallError as exc:
            raise ToolError(str(exc)) from None
        limit = max(int(getattr(ctx.settings, "output_limit", 30_000)), 1_000)
        answer = wire(result)
        text = result_text(answer)
        if len(text) > limit:
            text = text[:limit] + f"\n\n[output truncated at {limit} characters]"
        raw: dict[str, Any] = {"server": self.server.name, "tool": self.remote_name}
        if answer.get("structuredContent") is not None:
            raw["structuredContent"] = answer["structuredContent"]
        return ToolResult(
            text or "(no output)", is_error=bool(answer.get("isError")), raw_output=raw
        )


def result_text(result: types.CallToolResult | dict[str, Any]) -> str:
    """The text the model sees for a tool result."""
    answer = wire(result)
    parts = [_block_text(block) for block in answer.get("content") or []]
    parts = [p for p in parts if p]
    if not parts and answer.get("structuredContent") is not None:
        parts.append(json.dumps(answer["structuredContent"], indent=1, default=str))
    return "\n".join(parts)


def _block_text(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(block.get("data") or "") * 3 // 4
        return f"[{kind}: {block.get('mimeType')}, about {size} bytes, not shown]"
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return f'<resource uri="{resource.get("uri")}">\n{resource["text"]}\n</resource>'
        mime = resource.get("mimeType") or "unknown type"
        return f"[binary resource: {resource.get('uri')}, {mime}]"
    if kind == "resource_link":
        return f"[resource: {block.get('uri')}] {block.get('name')}"
    return ""


def _hints(annotations: dict[str, Any]) -> list[str]:
    hints = []
    if annotations.get("readOnlyHint"):
        hints.append("read-only")
    if annotations.get("destructiveHint"):
        hints.append("destructive")
    if annotations.get("openWorldHint"):
        hints.append("reaches outside")
    return hints
