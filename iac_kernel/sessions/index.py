"""The listing index: one append-only file per working directory, kept current on write.

``<root>/index/<hash of cwd>.jsonl`` holds one line per metadata change of a session of
that folder: the whole metadata (the last line of an id wins), ``{"session_id", "delta":
true, "updated_at", "message_count"}`` after a message (merged into the last whole
line), or ``{"session_id", "gone": true}`` when the session moved to another folder.
Appending a line costs one small write (no fsync: the index is a cache; the logs and
``<id>.json`` are the truth, and :meth:`FolderIndex.rebuild` recreates it). Readers keep
what they parsed and read only the bytes appended since; a file with many superseded
lines is rewritten compactly. Appenders share an ``flock`` and the compactor takes it
exclusively, so no line is lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.sessions import files
from iac_kernel.textsafe import json_line

VERSION = "1"
#: Rewrite a folder's index when it holds this many times more lines than sessions.
COMPACT_RATIO = 4
COMPACT_MIN_LINES = 256


def folder_key(cwd: str) -> str:
    return hashlib.sha256(cwd.encode("utf-8", "surrogateescape")).hexdigest()[:32]


@dataclass
class _Cached:
    inode: int = -1
    offset: int = 0
    lines: int = 0
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The entries of one cwd, as of an offset.
    filtered: tuple[tuple[str, int], dict[str, dict[str, Any]]] | None = None


class FolderIndex:
    """Every folder's index under ``<root>/index``."""

    def __init__(self, root: Path):
        self.dir = root / "index"
        self._cache: dict[str, _Cached] = {}
        self._dir_made = False

    def path(self, cwd: str) -> Path:
        return self.dir / f"{folder_key(cwd)}.jsonl"

    @property
    def ready(self) -> bool:
        return (self.dir / "version").exists()

    def put(self, meta: dict[str, Any], old_cwd: str | None = None) -> None:
        """Record ``meta`` (a session's whole metadata) in its folder's index."""
        if old_cwd is not None and old_cwd != meta["cwd"]:
            self._append(old_cwd, {"session_id": meta["session_id"], "gone": True})
        self._append(meta["cwd"], meta)

    def bump(self, cwd: str, session_id: str, updated_at: str, message_count: int) -> None:
        """Record a session's new time and message count (a small line, no rewrite)."""
        entry = {"session_id": session_id, "delta": True, "updated_at": updated_at}
        entry["message_count"] = message_count
        self._append(cwd, entry)

    def drop(self, cwd: str, session_id: str) -> None:
        """Take a deleted session out of its folder's index."""
        self._append(cwd, {"session_id": session_id, "gone": True})

    def _append(self, cwd: str, entry: dict[str, Any]) -> None:
        if not self._dir_made:
            files.private_dir(self.dir)
            self._dir_made = True
        path = self.path(cwd)
        data = json_line(entry)
        for _attempt in range(5):
            fd = files.open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                try:
                    same = os.fstat(fd).st_ino == os.stat(path).st_ino
                except FileNotFoundError:
                    same = False
                if same:  # not replaced by a compaction since we opened it
                    os.write(fd, data)
                    return
            finally:
                os.close(fd)

    def entry(self, cwd: str, session_id: str) -> dict[str, Any] | None:
        """The current metadata of one session of ``cwd``, if indexed."""
        found = self._read(self.path(cwd), None).get(session_id)
        return found if found is not None and found.get("cwd") == cwd else None

    def state(self, cwd: str) -> tuple[int, int]:
        """What has been read of ``cwd``'s index (file id and offset): equal states, equal
        entries. Valid right after :meth:`entries`."""
        cached = self._cache.get(str(self.path(cwd)))
        return (cached.inode, cached.offset) if cached is not None else (-1, -1)

    def entries(self, cwd: str) -> list[dict[str, Any]]:
        """The current metadata of every session of ``cwd``."""
        return list(self._read(self.path(cwd), cwd).values())

    def all_entries(self) -> list[dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        if not self.dir.is_dir():
            return []
        for path in self.dir.glob("*.jsonl"):
            for sid, entry in self._read(path, None).items():
                seen = found.get(sid)
                if seen is None or str(entry.get("updated_at")) > str(seen.get("updated_at")):
                    found[sid] = entry
        return list(found.values())

    def _read(self, path: Path, cwd: str | None) -> dict[str, dict[str, Any]]:
        key = str(path)
        cached = self._cache.get(key) or _Cached()
        try:
            fd = files.open_fd(path, os.O_RDONLY)
        except FileNotFoundError:
            self._cache.pop(key, None)
            return {}
        try:
            info = os.fstat(fd)
            if info.st_ino != cached.inode or info.st_size < cached.offset:
                cached = _Cached(inode=info.st_ino)
            if info.st_size > cached.offset:
                os.lseek(fd, cached.offset, os.SEEK_SET)
                data = _read_all(fd)
                end = data.rfind(b"\n") + 1  # a line being appended right now waits
                self._parse(data[:end], cached)
                cached.offset += end
        finally:
            os.close(fd)
        self._cache[key] = cached
        live = cached.entries
        if cwd is not None:  # (the filter only matters for a hash collision: reuse it)
            if cached.filtered is None or cached.filtered[0] != (cwd, cached.offset):
                only = {sid: e for sid, e in live.items() if e.get("cwd") == cwd}
                cached.filtered = ((cwd, cached.offset), only)
            live = cached.filtered[1]
        if cached.lines > max(COMPACT_MIN_LINES, COMPACT_RATIO * len(cached.entries)):
            with contextlib.suppress(OSError):
                self._compact(path)
        return live

    @staticmethod
    def _parse(data: bytes, cached: _Cached) -> None:
        for raw in data.splitlines():
            cached.lines += 1
            try:
                entry = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            sid = entry.get("session_id") if isinstance(entry, dict) else None
            if not isinstance(sid, str):
                continue
            if entry.get("gone"):
                cached.entries.pop(sid, None)
            elif entry.get("delta"):
                whole = cached.entries.pop(sid, None)
                if whole is not None:  # a delta without its whole entry is skipped
                    whole = {**whole, **entry}
                    del whole["delta"]
                    cached.entries[sid] = whole
            else:
                cached.entries.pop(sid, None)  # keep insertion order = last update
                cached.entries[sid] = entry

    def _compact(self, path: Path) -> None:
        fd = files.open_fd(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            fresh = _Cached(inode=os.fstat(fd).st_ino)
            data = _read_all(fd)
            self._parse(data, fresh)
            files.replace(path, b"".join(json_line(e) for e in fresh.entries.values()))
        finally:
            os.close(fd)
        self._cache.pop(str(path), None)

    def rebuild(self, metas: list[dict[str, Any]]) -> None:
        """Recreate every folder's index from ``metas`` (all sessions' metadata)."""
        files.private_dir(self.dir)
        by_folder: dict[str, list[dict[str, Any]]] = {}
        for meta in metas:
            by_folder.setdefault(str(meta.get("cwd", "")), []).append(meta)
        for old in self.dir.glob("*.jsonl"):
            with contextlib.suppress(OSError):
                old.unlink()
        for cwd, group in by_folder.items():
            group.sort(key=lambda m: (m.get("updated_at", ""), m.get("session_id", "")))
            files.replace(self.path(cwd), b"".join(json_line(m) for m in group))
        files.replace(self.dir / "version", VERSION.encode())
        self._cache.clear()


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
