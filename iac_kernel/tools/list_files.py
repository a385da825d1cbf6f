"""list_files: a directory's entries, a few levels deep."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from iac_kernel.tools.base import (
    SKIP_DIRS,
    Category,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    prefix_for,
    resolve_path,
)

DEFAULT_DEPTH = 2
MAX_DEPTH = 10
MAX_ENTRIES = 1000


class ListFilesTool(Tool):
    name = "list_files"
    description = (
        "List a directory's files and subdirectories (directories end with '/'), sorted, "
        "as paths from the working directory, "
        f"down to `depth` levels (default {DEFAULT_DEPTH}). Skips "
        f"{', '.join(sorted(SKIP_DIRS))}. Use glob to find files by pattern."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Directory to list (default: the working directory).",
                "default": ".",
                "minLength": 1,
            },
            "depth": {
                "type": "integer",
                "description": f"Levels to descend, 1 = only direct entries (max {MAX_DEPTH}).",
                "minimum": 1,
                "maximum": MAX_DEPTH,
            },
        },
        "required": [],
        "additionalProperties": False,
    }
    kind = "read"
    category = Category.READ
    subject = path_arg = "path"
    path_default = "."

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        root = resolve_path(ctx, args["path"])
        depth = args.get("depth", DEFAULT_DEPTH)
        try:
            if not root.exists():
                raise ToolError(f"directory not found: {args['path']}")
            if not root.is_dir():
                raise ToolError(f"{args['path']} is a file, not a directory; use read_file")
            entries, errors, more = _walk(root, depth)
        except PermissionError:
            raise ToolError(f"permission denied: {args['path']}") from None
        except OSError as exc:
            raise ToolError(f"cannot list {args['path']}: {exc.strerror or exc}") from None
        prefix = prefix_for(root, Path(ctx.cwd))
        lines = [prefix + e for e in entries] or ["(empty directory)"]
        if more:
            lines.append(
                f"\n[stopped after {MAX_ENTRIES} entries; list a subdirectory or lower depth]"
            )
        for error in errors:
            lines.append(f"[{error}]")
        return ToolResult(
            "\n".join(lines),
            raw_output={"path": str(root), "entries": len(entries), "truncated": more},
        )


def _walk(root: Path, depth: int) -> tuple[list[str], list[str], bool]:
    """Entries below ``root`` (relative, dirs with '/'), unreadable dirs, and whether cut."""
    entries: list[str] = []
    errors: list[str] = []

    def visit(directory: Path, prefix: str, level: int) -> bool:
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if level == 1:
                raise
            errors.append(f"cannot read {prefix or '.'}: {exc.strerror or exc}")
            return True
        for item in items:
            if len(entries) >= MAX_ENTRIES:
                return False
            # Symlinks to directories are shown as directories but not followed (loops).
            try:
                is_dir = item.is_dir()
            except OSError as exc:  # a symlink loop (ELOOP) or a vanished entry
                errors.append(f"skipped {prefix + item.name}: {exc.strerror or exc}")
                continue
            if is_dir and item.name in SKIP_DIRS:
                continue
            rel = prefix + item.name
            entries.append(rel + "/" if is_dir else rel)
            if is_dir and level < depth and not item.is_symlink():
                if not visit(Path(item.path), rel + "/", level + 1):
                    return False
        return True

    complete = visit(root, "", 1)
    return entries, errors, not complete
