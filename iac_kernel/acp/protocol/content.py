"""ACP prompt content blocks -> Anthropic content blocks for the agent core.

Text passes through. An embedded resource becomes its text, fenced with its URI; a
resource link becomes a reference the model can open with ``read_file``. Images and
audio are not sent to the model (``promptCapabilities`` says so); a marker such as
``[image: image/png]`` keeps the user's message readable.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlparse

from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from iac_kernel.acp.protocol import errors


def to_anthropic(blocks: list[Any]) -> list[dict[str, Any]]:
    """Convert a validated ``session/prompt`` prompt; -32602 when nothing is left."""
    converted = []
    for block in blocks:
        text = block_text(block)
        if text:
            converted.append({"type": "text", "text": text})
    if not converted:
        raise errors.invalid_field("prompt", "the prompt has no content")
    return converted


def block_text(block: Any) -> str:
    """The text the model sees for one ACP content block."""
    if isinstance(block, TextContentBlock):
        return block.text
    if isinstance(block, EmbeddedResourceContentBlock):
        return _resource_text(block.resource)
    if isinstance(block, ResourceContentBlock):
        return _link_text(block)
    if isinstance(block, ImageContentBlock):
        return f"[image: {block.mime_type}]"
    if isinstance(block, AudioContentBlock):
        return f"[audio: {block.mime_type}]"
    return ""


def _resource_text(resource: TextResourceContents | BlobResourceContents) -> str:
    mime = f' mimeType="{resource.mime_type}"' if resource.mime_type else ""
    if isinstance(resource, TextResourceContents):
        where = _local_path(resource.uri) or resource.uri
        return f'<resource uri="{where}"{mime}>\n{resource.text}\n</resource>'
    size = len(resource.blob) * 3 // 4
    return f"[binary resource: {resource.uri}{mime}, about {size} bytes, not shown]"


def _link_text(link: ResourceContentBlock) -> str:
    path = _local_path(link.uri)
    label = link.title or link.name
    parts = [f"[file: {path}]" if path else f"[resource: {link.uri}]"]
    if label and label not in (path, link.uri):
        parts.append(label)
    if link.description:
        parts.append(f"- {link.description}")
    return " ".join(parts)


def _local_path(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if not parsed.scheme and uri.startswith("/"):
        return uri
    return None
