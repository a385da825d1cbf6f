"""Path rules shared by the file tools and the permission gate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from iac_kernel.tools.base import ToolContext, ToolError

#: Directories the listing and search tools never descend into.
SKIP_DIRS = frozenset({".git", ".terraform", ".terragrunt-cache"})


def resolve_path(ctx: ToolContext, raw: str) -> Path:
    """An absolute path for ``raw``: ``~`` expanded, relative paths taken from ``ctx.cwd``.

    Symlinks are not resolved (tools act on the path the user named); ``..`` is folded.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError("path must be a non-empty string")
    if "\x00" in raw:
        raise ToolError("path must not contain NUL characters")
    path = os.path.expanduser(raw)
    if not os.path.isabs(path):  # os.path, not pathlib: a replay resolves thousands
        path = os.path.join(os.path.expanduser(ctx.cwd), path)
    return Path(os.path.normpath(path))


def is_inside(path: Path | str, cwd: Path | str) -> bool:
    """True when ``path`` is ``cwd`` or below it once symlinks are resolved.

    ``../`` and symlinks pointing out of ``cwd`` count as outside. Paths that do not
    exist yet are judged by their nearest existing parent.
    """
    try:
        real = Path(os.path.realpath(path))
        root = Path(os.path.realpath(cwd))
    except (OSError, ValueError):
        return False
    return real == root or root in real.parents


def tool_paths(
    ctx: ToolContext, args: Any, key: str = "path", default: str | None = None
) -> list[Path]:
    """The ``paths()`` of a tool taking one path argument; never raises on bad input."""
    raw = args.get(key, default) if isinstance(args, dict) else None
    if raw is None:
        raw = default
    try:
        return [resolve_path(ctx, raw)] if raw is not None else []
    except ToolError:
        return []


def display_path(path: Path, cwd: Path | str) -> str:
    """``path`` relative to ``cwd`` when it lies below it (lexically), else absolute."""
    try:
        rel = path.relative_to(Path(os.path.normpath(Path(cwd).expanduser())))
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."


def prefix_for(base_dir: Path, cwd: Path | str) -> str:
    """What to put before paths relative to ``base_dir`` so they read from ``cwd``."""
    shown = display_path(base_dir, cwd)
    if shown == ".":
        return ""
    return shown + os.sep


def short(text: Any, width: int = 80) -> str:
    """The first line of ``text``, shortened for a title."""
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"
