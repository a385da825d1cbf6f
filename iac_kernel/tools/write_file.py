"""write_file: create or overwrite a text file, atomically."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from iac_kernel.agent.events import Diff
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult
from iac_kernel.tools.paths import resolve_path, short, tool_paths
from iac_kernel.tools.validate import check


def read_text_if_exists(path: Path, shown: str, strict: bool = False) -> str | None:
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
        errors = "strict" if strict else "replace"
        with path.open("r", encoding="utf-8", errors=errors, newline="") as fh:
            return fh.read()
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text") from None
    except PermissionError:
        raise ToolError(f"permission denied: {shown}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file and ``os.replace``.

    Readers never see a half-written file. An existing file keeps its permission bits;
    a symlink is followed so the link stays a link. New files get the umask default.
    """
    target = Path(os.path.realpath(path))
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    # 0o666 here lets the umask decide a new file's mode, as open() would.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_or_raise(path: Path, shown: str, text: str) -> None:
    """:func:`atomic_write`, with OS errors turned into ToolError."""
    try:
        atomic_write(path, text)
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
        old = read_text_if_exists(path, args["path"])
        return Diff(path=str(path), old_text=old, new_text=args["content"])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        diff = self.preview(args, ctx)
        path = Path(diff.path)
        write_or_raise(path, args["path"], diff.new_text)
        return ToolResult(
            change_summary(args["path"], diff.old_text, diff.new_text),
            raw_output={"path": diff.path, "created": diff.old_text is None},
            diff=diff,
        )
