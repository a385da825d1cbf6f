"""write_file: create or overwrite a text file, atomically and confined (no symlink swaps)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from iac_kernel.events import Diff
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult
from iac_kernel.tools.paths import resolve_path, short, tool_paths
from iac_kernel.tools.safe_write import previewed_target, remember_target, write_confined
from iac_kernel.tools.tf_files import refuse_rewrite
from iac_kernel.tools.validate import check


def read_text_if_exists(
    path: Path, shown: str, strict: bool = False, cwd: Path | None = None
) -> str | None:
    """The current text of ``path`` (``None`` when absent); ToolError for dirs and I/O errors.

    ``strict`` refuses text that is not UTF-8 instead of replacing bad bytes (an edit
    must not silently rewrite bytes it did not touch).
    """
    try:
        if path.is_dir():
            raise ToolError(f"{shown} is a directory")
        if not path.exists():
            return None
        if not stat.S_ISREG(path.stat().st_mode):
            raise ToolError(f"{shown} is not a regular file")
        refuse_rewrite(path, cwd or path.parent, shown)
        errors = "strict" if strict else "replace"
        with path.open("r", encoding="utf-8", errors=errors, newline="") as fh:
            return fh.read()
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text") from None
    except PermissionError:
        raise ToolError(f"permission denied: {shown}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None


def write_or_raise(
    path: Path, shown: str, text: str, cwd: Path | str, expected: str | None = None
) -> None:
    """:func:`write_confined` (no symlink swap redirects it), OS errors as ToolError."""
    try:
        write_confined(path, text, cwd, shown, expected)
    except PermissionError:
        raise ToolError(f"permission denied: {shown}") from None
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None


def change_summary(shown: str, old: str | None, new: str) -> str:
    lines = new.count("\n") + (1 if new and not new.endswith("\n") else 0)
    verb = "Created" if old is None else "Wrote"
    return f"{verb} {shown} ({lines} lines, {len(new.encode())} bytes)."


class WriteFileTool(Tool):
    name = "write_file"
    description = (
        "Create a file or replace its whole content. Parent directories are created. "
        "Prefer edit_file for changing part of an existing file."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to write.", "minLength": 1},
            "content": {"type": "string", "description": "The complete new file content."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    kind = "edit"
    category = Category.WRITE

    def title(self, args: dict[str, Any]) -> str:
        return f"write_file: {short(args.get('path', ''))}"

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return tool_paths(ctx, args)

    def preview(self, args: dict[str, Any], ctx: ToolContext) -> Diff:
        args = check(self, args)
        path = resolve_path(ctx, args["path"])
        old = read_text_if_exists(path, args["path"], cwd=Path(ctx.cwd))
        remember_target(path, ctx.cwd)
        return Diff(path=str(path), old_text=old, new_text=args["content"])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        expected = _expected(self, args, ctx)
        diff = self.preview(args, ctx)
        path = Path(diff.path)
        write_or_raise(path, args["path"], diff.new_text, ctx.cwd, expected)
        return ToolResult(
            change_summary(args["path"], diff.old_text, diff.new_text),
            raw_output={"path": diff.path, "created": diff.old_text is None},
            diff=diff,
        )


def _expected(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> str | None:
    """Where the path resolved when the question was prepared (before this run)."""
    paths = tool.paths(args, ctx)
    return previewed_target(paths[0], ctx.cwd) if paths else None
