"""edit_file: replace an exact string in a file, atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iac_kernel.events import Diff
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult, resolve_path
from iac_kernel.tools.write_file import (
    WriteFileTool,
    previewed,
    read_text_if_exists,
    remember_target,
    write_or_raise,
)


def apply_edit(text: str, old: str, new: str, replace_all: bool, shown: str) -> tuple[str, int]:
    """``text`` with ``old`` replaced by ``new``; returns the new text and the count replaced.

    A file with CRLF line endings also matches an ``old`` written with plain ``\\n``
    (models rarely send ``\\r``); the replacement then gets CRLF too.
    """
    if old == new:
        raise ToolError("old_string and new_string are identical; nothing to change")
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string not found in {shown}; it must match the file exactly, including "
            "whitespace and indentation (read the file first)"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {shown}; add surrounding lines to make it "
            "unique, or set replace_all to true to replace every occurrence"
        )
    if replace_all:
        return text.replace(old, new), count
    return text.replace(old, new, 1), 1


class EditFileTool(Tool):
    name = "edit_file"
    description = (
        "Replace old_string with new_string in a file. old_string must match the file "
        "exactly (whitespace included) and be unique, unless replace_all is true. "
        "Read the file first; include enough surrounding lines to make the match unique."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to edit.", "minLength": 1},
            "old_string": {
                "type": "string",
                "description": "Exact text to replace.",
                "minLength": 1,
            },
            "new_string": {"type": "string", "description": "Replacement text."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence (default false).",
                "default": False,
            },
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }
    kind = "edit"
    category = Category.WRITE
    subject = path_arg = "path"

    def stored_diff(self, args: dict[str, Any]) -> Diff | None:
        path, old, new = args.get("path"), args.get("old_string"), args.get("new_string")
        if not isinstance(path, str) or not isinstance(new, str):
            return None
        return Diff(path, old if isinstance(old, str) else None, new)

    def preview(self, args: dict[str, Any], ctx: ToolContext) -> Diff:
        return self._plan(args, ctx)[0]

    def _plan(self, args: dict[str, Any], ctx: ToolContext) -> tuple[Diff, int]:
        args = self.check(args)
        shown = args["path"]
        path = resolve_path(ctx, shown)
        old_text = read_text_if_exists(path, shown, strict=True, cwd=Path(ctx.cwd))
        remember_target(path, ctx.cwd)
        if old_text is None:
            raise ToolError(f"file not found: {shown} (use {WriteFileTool.name} to create a file)")
        if "\x00" in old_text:
            raise ToolError(f"{shown} is a binary file; {self.name} only edits text")
        new_text, count = apply_edit(
            old_text, args["old_string"], args["new_string"], args["replace_all"], shown
        )
        return Diff(path=str(path), old_text=old_text, new_text=new_text), count

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        expected = previewed(self, args, ctx)
        diff, count = self._plan(args, ctx)
        write_or_raise(Path(diff.path), args["path"], diff.new_text, ctx.cwd, expected)
        noun = "occurrence" if count == 1 else "occurrences"
        return ToolResult(
            f"Edited {args['path']}: replaced {count} {noun}.",
            raw_output={"path": diff.path, "replacements": count},
            diff=diff,
        )
