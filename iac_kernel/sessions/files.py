"""Private files for the session store: folders 0700, files 0600 whatever the umask;
all-or-nothing appends; atomic replacement. No file descriptor outlives a call.

Nothing here follows a symbolic link: a log, index or metadata file replaced by a link
(to a file outside the store) is refused with :class:`StoreLinkError`, read or written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


class StoreWriteError(OSError):
    """A store write failed; the file was rolled back to its last good state."""


class StoreOpenError(OSError):
    """The OS refused to open a store file (too many open files, permissions, ...)."""


class StoreLinkError(StoreOpenError):
    """A store file or folder is a symbolic link, or a file has another hard link (its
    bytes are also elsewhere): refused, nothing read or written."""

    def __init__(self, path: Path, kind: str = "symbolic link"):
        verb = "follow" if kind == "symbolic link" else "use"
        super().__init__(errno.ELOOP, f"refusing to {verb} a {kind} in the session store: {path}")


def refuse_hard_link(fd: int, path: Path) -> None:
    """Close ``fd`` and refuse when the regular file it opened has more than one name."""
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        os.close(fd)
        raise StoreLinkError(path, "hard-linked file")


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise StoreLinkError(path)


def describe(exc: OSError) -> str:
    """``[Errno 24] Too many open files (EMFILE)`` style text for an OS error."""
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    return f"{text} ({name})" if name else text


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it 0700; a link there is refused."""
    _refuse_link(path)
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    if path.stat().st_mode & 0o777 != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def open_fd(path: Path, flags: int) -> int:
    """``os.open`` with mode 0600 (forced, the umask may have taken bits away), never
    through a symbolic link (:class:`StoreLinkError`)."""
    try:
        # The file is opened by name under its folder's descriptor, the folder opened
        # without following a link: a folder swapped for a link after any check is
        # refused, not followed.
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise StoreLinkError(path.parent) from None
        _too_many(exc, path)
        raise
    try:
        fd = os.open(path.name, flags | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreLinkError(path) from None
        _too_many(exc, path)
        raise
    finally:
        os.close(dir_fd)
    refuse_hard_link(fd, path)
    if flags & os.O_CREAT:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_mode & 0o777 != FILE_MODE:
                os.fchmod(fd, FILE_MODE)
    return fd


def _too_many(exc: OSError, path: Path) -> None:
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        raise StoreOpenError(
            exc.errno, f"cannot open {path.name}: {describe(exc)}; close some sessions"
        ) from None


def read(path: Path) -> bytes:
    """The whole file, never through a symbolic link."""
    fd = open_fd(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_lines(path: Path) -> Iterator[bytes]:
    """The file's lines, read as they are used, never through a symbolic link. The file
    is opened at once (errors raise here, not at the first line)."""
    handle = os.fdopen(open_fd(path, os.O_RDONLY), "rb", buffering=1 << 20)

    def lines() -> Iterator[bytes]:
        with handle:
            yield from handle

    return lines()


def create_file(path: Path, data: bytes = b"") -> None:
    """Create ``path`` (0600) holding ``data``; FileExistsError if it exists."""
    fd = open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        if data:
            _write_all(fd, data)
            os.fsync(fd)
    finally:
        os.close(fd)


def append(path: Path, data: bytes, *, sync: bool = True) -> int:
    """Append ``data`` whole or not at all; returns the file's new size.

    On a failed or short write the file is truncated back to its size before the call,
    and StoreWriteError says what happened.
    """
    fd = open_fd(path, os.O_WRONLY | os.O_APPEND)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            _write_all(fd, data)
            if sync:
                os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
                os.fsync(fd)
            raise StoreWriteError(
                exc.errno, f"could not write {path.name}: {describe(exc)}"
            ) from None
        return start + len(data)
    finally:
        os.close(fd)


def replace(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync dir)."""
    _refuse_link(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        create_file(tmp, data)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, StoreWriteError | StoreOpenError):
            raise
        raise StoreWriteError(exc.errno, f"could not write {path.name}: {describe(exc)}") from None
    sync_dir(path.parent)


def sync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[written:]
