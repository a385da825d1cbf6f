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
        self.server = server
        self.remote_name = tool.name
        self.name = name or tool_name(server.name, tool.name)
        description = (tool.description or tool.title or tool.name).strip()
        self.description = f"[MCP server {server.name}] {description}"
        schema = dict(tool.inputSchema or {})
        schema.setdefault("type", "object")
        if schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        self.input_schema = schema
        self.hints = _hints(tool.annotations)

    def title(self, args: dict[str, Any]) -> str:
        hint = f" (server says: {', '.join(self.hints)})" if self.hints else ""
        return f"{self.server.name}: {self.remote_name}{hint}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            result = await self.server.call(self.remote_name, args)
        except McpCallError as exc:
            raise ToolError(str(exc)) from None
        limit = max(int(getattr(ctx.settings, "output_limit", 30_000)), 1_000)
        text = result_text(result)
        if len(text) > limit:
            text = text[:limit] + f"\n\n[output truncated at {limit} characters]"
        raw: dict[str, Any] = {"server": self.server.name, "tool": self.remote_name}
        if result.structuredContent is not None:
            raw["structuredContent"] = result.structuredContent
        return ToolResult(text or "(no output)", is_error=bool(result.isError), raw_output=raw)


def result_text(result: types.CallToolResult) -> str:
    """The text the model sees for a tool result."""
    parts = [_block_text(block) for block in result.content]
    parts = [p for p in parts if p]
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, indent=1, default=str))
    return "\n".join(parts)


def _block_text(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return f"[image: {block.mimeType}, about {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, types.AudioContent):
        return f"[audio: {block.mimeType}, about {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f'<resource uri="{resource.uri}">\n{resource.text}\n</resource>'
        return f"[binary resource: {resource.uri}, {resource.mimeType or 'unknown type'}]"
    if isinstance(block, types.ResourceLink):
        return f"[resource: {block.uri}] {block.name}"
    return ""


def _hints(annotations: types.ToolAnnotations | None) -> list[str]:
    if annotations is None:
        return []
    hints = []
    if annotations.readOnlyHint:
        hints.append("read-only")
    if annotations.destructiveHint:
        hints.append("destructive")
    if annotations.openWorldHint:
        hints.append("reaches outside")
    return hints
