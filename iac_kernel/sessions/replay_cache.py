"""A session's ``session/load`` replay kept on disk beside its log, as the lines sent.

Two private files, both refused when they are links (like every store file):

* ``<id>.replay``: the replay's JSON-RPC lines, appended to as the log grows;
* ``<id>.replay-head``: what those lines show (a JSON object written whole, atomically):
  how many of its bytes are good (``length``), the lines file it describes (``file``:
  device and inode), the log prefix they replay (``log``: its device, inode, size and a
  digest of its last bytes) and whatever the caller needs to tell whether they still
  hold (``fields``: the replay's inputs and where it stopped).

The head is written after the lines it counts are on disk, so a crash at any point
leaves either the last good cache or none. What the lines mean is the caller's (see
:mod:`iac_kernel.acp.history_cache`); this module only keeps them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import select
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.sessions import files

LINES = ".replay"
HEAD = ".replay-head"
#: Bytes of the log's end (before the replayed size) whose digest the head keeps.
TAIL_BYTES = 1 << 16
#: Bytes read at a time when the lines are sent.
CHUNK_BYTES = 1 << 20

log = logging.getLogger(__name__)


#: The lines files a writer of this process has (one at a time per session).
_writing: set[Path] = set()
_writing_lock = threading.Lock()


def _release(lines: Path) -> None:
    with _writing_lock:
        _writing.discard(lines)


class CacheReadError(Exception):
    """The kept lines could not be read as their head describes them."""


@dataclass
class LogPrefix:
    """The first ``size`` bytes of a log file, named by its device and inode and the
    digest of its last :data:`TAIL_BYTES` of them."""

    dev: int
    ino: int
    size: int
    tail: str

    @classmethod
    def of(cls, log: Path, size: int) -> LogPrefix:
        fd = files.open_fd(log, os.O_RDONLY)
        try:
            info = os.fstat(fd)
            start = max(0, size - TAIL_BYTES)
            data = os.pread(fd, size - start, start)
        finally:
            os.close(fd)
        return cls(info.st_dev, info.st_ino, size, hashlib.sha256(data).hexdigest())


@dataclass
class Cached:
    """A cache that is there: its head's ``fields``, and the good lines' length."""

    fields: dict[str, Any]
    length: int
    log: LogPrefix
    #: The lines file's device and inode.
    file: list[int]


class ReplayCache:
    """One session's cached replay lines (see the module's text)."""

    def __init__(self, root: Path, session_id: str) -> None:
        self._lines = root / f"{session_id}{LINES}"
        self._head = root / f"{session_id}{HEAD}"

    def read(self) -> Cached | None:
        """The cache's head, or ``None`` when there is none or it is not whole."""
        try:
            head = json.loads(files.read(self._head))
            fd = files.open_fd(self._lines, os.O_RDONLY)
            try:
                info = os.fstat(fd)
                length, log = head["length"], LogPrefix(**head["log"])
                if not _ints(length, log.dev, log.ino, log.size) or not isinstance(log.tail, str):
                    return None
                if head["file"] != [info.st_dev, info.st_ino] or not 0 < length <= info.st_size:
                    return None
                if not isinstance(head["fields"], dict):
                    return None
                if os.pread(fd, 1, length - 1) != b"\n":
                    return None  # not whole lines
            finally:
                os.close(fd)
            return Cached(head["fields"], length, log, head["file"])
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def lines(self, length: int) -> Iterator[bytes]:
        """The first ``length`` bytes of the lines, in pieces that end at a line's end.
        A file that cannot be read to there raises :class:`CacheReadError` (not an
        ``OSError``: a sender takes those for a client that has gone)."""
        fd = self._open_lines()
        try:
            left, carry = length, b""
            while left > 0:
                try:
                    chunk = os.read(fd, min(CHUNK_BYTES, left))
                except OSError as exc:
                    raise CacheReadError(f"cannot read {self._lines.name}: {exc}") from None
                if not chunk:
                    raise CacheReadError(f"{self._lines.name} is shorter than its head says")
                left -= len(chunk)
                data = carry + chunk
                end = data.rfind(b"\n") + 1
                carry = data[end:]
                if end:
                    yield data[:end]
            if carry:
                raise CacheReadError(f"{self._lines.name} ends inside a line")
        finally:
            os.close(fd)

    def _open_lines(self) -> int:
        try:
            return files.open_fd(self._lines, os.O_RDONLY)
        except OSError as exc:
            raise CacheReadError(f"cannot read {self._lines.name}: {exc}") from None

    def copy_to(self, out: int, length: int) -> None:
        """Write the first ``length`` bytes of the lines to ``out`` (a pipe or socket,
        which may be non-blocking: it is waited for with ``poll``), with ``sendfile``:
        meant for a thread, which holds no lock while the kernel copies."""
        fd = self._open_lines()
        try:
            if length and os.pread(fd, 1, length - 1) != b"\n":
                raise CacheReadError(f"{self._lines.name} ends inside a line")
            ready = select.poll()
            ready.register(out, select.POLLOUT)
            offset = 0
            while offset < length:
                try:
                    sent = os.sendfile(out, fd, offset, length - offset)
                except BlockingIOError:
                    if any(event & select.POLLERR for _, event in ready.poll()):
                        raise BrokenPipeError("the client's end is closed") from None
                    continue
                if not sent:
                    raise CacheReadError(f"{self._lines.name} is shorter than its head says")
                offset += sent
        finally:
            os.close(fd)

    def still_kept(self, log: Path, data: bytes) -> Cached | None:
        """The kept lines when ``data`` (a repaired log about to replace ``log``) starts
        with the very bytes they replay (a crash's torn line or unanswered calls come
        after them): :meth:`follow` then points them at the new file."""
        found = self.read()
        if found is None or found.log.size > len(data):
            return None  # (read() checked the head's types)
        try:
            fd = files.open_fd(log, os.O_RDONLY)
            try:
                info = os.fstat(fd)
                if [info.st_dev, info.st_ino] != [found.log.dev, found.log.ino]:
                    return None
                same = _read_exactly(fd, found.log.size) == data[: found.log.size]
            finally:
                os.close(fd)
        except OSError:
            return None
        return found if same else None

    def follow(self, kept: Cached, log: Path) -> None:
        """Point ``kept``'s head at ``log``, a new file that starts with the same bytes
        (anything failing: the cache is dropped)."""
        try:
            moved = LogPrefix.of(log, kept.log.size)
            if moved.tail == kept.log.tail:
                _write_head(self._head, kept.length, kept.file, moved, kept.fields)
                return
        except OSError:
            pass
        self.drop()

    def writer(self, kept: Cached | None) -> CacheWriter:
        """A writer that appends to the ``kept`` lines (``None``: starts again). OSError
        when they are not there as read (the store dropped them meanwhile), or when
        another writer of this process has them (two loads of one session at once)."""
        with _writing_lock:
            if self._lines in _writing:
                raise OSError(f"{self._lines.name} is being written")
            _writing.add(self._lines)
        try:
            if kept is None:
                self.drop()
            return CacheWriter(self._lines, self._head, kept)
        except BaseException:
            _release(self._lines)
            raise

    def drop(self) -> None:
        """Remove the cache (the head first: lines without a head are never used)."""
        for path in (self._head, self._lines):
            with contextlib.suppress(OSError):
                path.unlink()


def _write_head(
    path: Path, length: int, file: list[int], log: LogPrefix, fields: dict[str, Any]
) -> None:
    head = {"length": length, "file": file, "log": vars(log), "fields": fields}
    files.replace(path, json.dumps(head).encode())


def _ints(*values: Any) -> bool:
    return all(type(value) is int and value >= 0 for value in values)


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, CHUNK_BYTES * 8))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class CacheWriter:
    """Appends lines after the kept ones; :meth:`commit` makes them the cache."""

    def __init__(self, lines: Path, head: Path, kept: Cached | None) -> None:
        self._head = head
        self._lines = lines
        self._fd = files.open_fd(lines, os.O_WRONLY | (os.O_CREAT if kept is None else 0))
        keep = kept.length if kept is not None else 0
        info = os.fstat(self._fd)
        if kept is not None and ([info.st_dev, info.st_ino] != kept.file or info.st_size < keep):
            os.close(self._fd)
            raise OSError(f"{lines.name} is not the file its head described")
        os.ftruncate(self._fd, keep)  # bytes past the head's length are a crash's
        os.lseek(self._fd, keep, os.SEEK_SET)
        self._length = keep
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    def write(self, data: bytes) -> None:
        """Add ``data`` (whole lines). A failed write (a full disk) is never raised: it
        leaves nothing to commit, and the replay that feeds the cache goes on."""
        if self._fd < 0:
            return
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= CHUNK_BYTES:
            try:
                self._flush()
            except OSError as exc:
                log.info("not keeping the replay of %s: %s", self._lines.name, exc)
                self.close()

    def _flush(self) -> None:
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._length += len(data)

    def commit(self, log: LogPrefix, fields: dict[str, Any]) -> None:
        """Make the lines written the cache of ``log`` (its head says ``fields``)."""
        if self._fd < 0:
            return
        try:
            self._flush()
            os.fsync(self._fd)
            info = os.fstat(self._fd)
            _write_head(self._head, self._length, [info.st_dev, info.st_ino], log, fields)
        finally:
            self.close()

    def close(self) -> None:
        """Stop without committing (what was written stays unused)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            _release(self._lines)
