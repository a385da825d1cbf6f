"""Writes no symlink swap can redirect: walk to the target with directory descriptors.

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

from iac_kernel.tools.base import ToolError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: (cwd, named path) -> the real path it resolved to when last previewed.
_PREVIEWED: dict[tuple[str, str], str] = {}
_MAX_PREVIEWED = 512


def remember_target(path: Path, cwd: Path | str) -> None:
    """Note where ``path`` resolves now (called when the question is prepared)."""
    if len(_PREVIEWED) >= _MAX_PREVIEWED:
        _PREVIEWED.clear()
    _PREVIEWED[(str(cwd), str(path))] = os.path.realpath(path)


def previewed_target(path: Path, cwd: Path | str) -> str | None:
    return _PREVIEWED.get((str(cwd), str(path)))


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
