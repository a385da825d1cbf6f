"""write_file: create or overwrite a text file, atomically; and the confined write it and
edit_file share, which no symlink swap can redirect.

The permission gate judged the path when it asked; between its question and the write,
a symlink may be swapped in. So at write time:

* a path named inside the working directory must still resolve inside it; the write
  walks there from the cwd one directory at a time with ``O_NOFOLLOW`` and replaces the
  final name inside the directory it holds open (a rename replaces a symlink itself,
  never its target);
* a path named outside the cwd (approved per call) must resolve to the same real file
  it resolved to when the question was prepared.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from iac_kernel.events import Diff
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult, resolve_path
from iac_kernel.tools.tf_masking import refuse_rewrite


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
    subject = path_arg = "path"

    def stored_diff(self, args: dict[str, Any]) -> Diff | None:
        path, content = args.get("path"), args.get("content")
        return (
            Diff(path, None, content)
            if isinstance(path, str) and isinstance(content, str)
            else None
        )

    def preview(self, args: dict[str, Any], ctx: ToolContext) -> Diff:
        args = self.check(args)
        path = resolve_path(ctx, args["path"])
        old = read_text_if_exists(path, args["path"], cwd=Path(ctx.cwd))
        remember_target(path, ctx.cwd)
        return Diff(path=str(path), old_text=old, new_text=args["content"])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        expected = previewed(self, args, ctx)
        diff = self.preview(args, ctx)
        path = Path(diff.path)
        write_or_raise(path, args["path"], diff.new_text, ctx.cwd, expected)
        return ToolResult(
            change_summary(args["path"], diff.old_text, diff.new_text),
            raw_output={"path": diff.path, "created": diff.old_text is None},
            diff=diff,
        )


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: (cwd, named path) -> the real path it resolved to when last previewed.
_PREVIEWED: dict[tuple[str, str], str] = {}
_MAX_PREVIEWED = 512


def remember_target(path: Path, cwd: Path | str) -> None:
    """Note where ``path`` resolves now (called when the question is prepared)."""
    if len(_PREVIEWED) >= _MAX_PREVIEWED:
        _PREVIEWED.clear()
    _PREVIEWED[(str(cwd), str(path))] = os.path.realpath(path)


def previewed(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> str | None:
    """Where the call's path resolved when its question was prepared (read before the
    run previews it again)."""
    paths = tool.paths(args, ctx)
    return _PREVIEWED.get((str(ctx.cwd), str(paths[0]))) if paths else None


def _lexically_inside(path: Path, root: Path) -> bool:
    norm = os.path.normpath(path)
    base = os.path.normpath(Path(root).expanduser())
    return norm == base or norm.startswith(base.rstrip("/") + "/")


def write_confined(
    path: Path, text: str, cwd: Path | str, shown: str, expected: str | None = None
) -> None:
    """Atomically write ``text`` to ``path`` (see the module docstring for the rules)."""
    root = os.path.realpath(cwd)
    real = os.path.realpath(path)
    if _lexically_inside(path, Path(cwd)) or _lexically_inside(path, Path(root)):
        if not (real == root or real.startswith(root.rstrip("/") + "/")):
            raise ToolError(
                f"{shown} resolves outside the working directory through a symlink "
                f"({real}); not written. Name the real path if you mean it."
            )
        base = root
    else:
        if expected is not None and real != expected:
            raise ToolError(
                f"{shown} now resolves to {real}, not {expected} as when it was approved "
                "(a symlink changed); not written."
            )
        base = "/"
    parts = [p for p in os.path.relpath(real, base).split("/") if p not in ("", ".")]
    if not parts:
        raise ToolError(f"{shown} is a directory")
    fd = os.open(base, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            fd = _enter(fd, part, shown)
        _replace_in(fd, parts[-1], text, shown)
    finally:
        os.close(fd)


def _enter(fd: int, name: str, shown: str) -> int:
    """Open (creating it if missing) directory ``name`` below ``fd``; closes ``fd``."""
    try:
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=fd)
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (40, 20):  # ELOOP, ENOTDIR: a symlink or file was swapped in
            raise ToolError(f"{shown}: a directory on the way was replaced; not written") from None
        raise
    finally:
        os.close(fd)
    return child


def _replace_in(fd: int, name: str, text: str, shown: str) -> None:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        mode = None
    else:
        if stat.S_ISLNK(st.st_mode):
            raise ToolError(f"{shown} was replaced by a symlink; not written")
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{shown} is a directory")
        mode = stat.S_IMODE(st.st_mode)
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=fd)
    try:
        with os.fdopen(out, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise
