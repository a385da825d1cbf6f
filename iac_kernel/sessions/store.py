"""Append-only JSONL session store: private files, locks without held descriptors, crash
repair, and a listing index.

Layout under the store root (``~/.iac-code/sessions`` by default; folders 0700, files
0600 whatever the umask)::

    <id>.jsonl   the log, one record per line (see :mod:`iac_kernel.sessions.records`)
    <id>.json    metadata, rewritten atomically when a field other than the counters changes
    <id>.lock    who writes the session (see :mod:`iac_kernel.sessions.locks`)
    index/       per-folder listing index, kept current on every write (see ``index.py``)
    mask.key     the key of the masking marks' fingerprints (see ``mask_key.py``)

Every record is appended whole or not at all (a failed write is truncated back) and
fsynced: each message when it completes, each tool result the moment its call finishes.
Loading repairs what a crash or a bad disk leaves, anywhere in the log: unreadable lines
are dropped, tool calls without a result get an "Interrupted" result, results without a
call are dropped; the repaired log replaces the old one atomically, with a note of what
was repaired. No file descriptor stays open between calls.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from iac_kernel.masking.marks import MarkTable
from iac_kernel.sessions import files, locks, records
from iac_kernel.sessions.files import StoreOpenError, StoreWriteError
from iac_kernel.sessions.index import FolderIndex
from iac_kernel.sessions.mask_key import read_key
from iac_kernel.sessions.meta import (
    SessionLockedError,
    SessionMeta,
    SessionNotFoundError,
    StoredSession,
    ToolOutput,
    git_root,
    is_valid_session_id,
    now_iso,
)
from iac_kernel.sessions.records import INTERRUPTED_RESULT, dangling_tool_uses
from iac_kernel.sessions.replay_cache import ReplayCache
from iac_kernel.sessions.writer import SessionWriter
from iac_kernel.textsafe import json_line

__all__ = [
    "INTERRUPTED_RESULT",
    "SessionLockedError",
    "SessionMeta",
    "SessionNotFoundError",
    "SessionStore",
    "SessionWriter",
    "StoreOpenError",
    "StoreWriteError",
    "StoredSession",
    "ToolOutput",
    "dangling_tool_uses",
    "git_root",
    "is_valid_session_id",
    "now_iso",
]

log = logging.getLogger(__name__)


class SessionStore:
    """All sessions under one root directory."""

    def __init__(self, root: Path):
        root = Path(root).expanduser()
        # A root the user made a link is followed once, here; every folder and file below
        # it is refused if it is a link (files.py).
        self.root = root.resolve() if root.is_symlink() else root
        self.index = FolderIndex(self.root)
        #: session id -> (index entry, its SessionMeta): listing builds each once.
        self._metas: dict[str, tuple[dict[str, Any], SessionMeta]] = {}
        #: cwd -> (index state, sorted listing): pages of an unchanged folder reuse it.
        self._listed: dict[str, tuple[tuple[int, int], list[SessionMeta]]] = {}

    def path(self, session_id: str, suffix: str) -> Path:
        """A session's file (``.json``, ``.jsonl``, ``.lock``); SessionNotFoundError for a
        malformed id."""
        if not is_valid_session_id(session_id):
            raise SessionNotFoundError(session_id)
        return self.root / f"{session_id}{suffix}"

    def _ensure_root(self) -> None:
        files.private_dir(self.root)
        if self.index.ready:
            return
        # One process builds the index (a store from before it, or a lost one).
        files.private_dir(self.index.dir)
        fd = files.open_fd(self.index.dir / "rebuild.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not self.index.ready:
                self.index.rebuild([asdict(m) for m in self._scan_metas()])
        finally:
            os.close(fd)

    def _scan_metas(self) -> list[SessionMeta]:
        found = []
        for path in self.root.glob("*.json"):
            try:
                found.append(SessionMeta.from_dict(json.loads(files.read(path))))
            except (OSError, ValueError, TypeError):
                continue
        return found

    def exists(self, session_id: str) -> bool:
        try:
            return self.path(session_id, ".json").exists()
        except SessionNotFoundError:
            return False

    def create(self, cwd: str, **fields: Any) -> SessionMeta:
        """A new empty session with a fresh UUID; nothing is left behind if it fails."""
        self._ensure_root()
        stamp = now_iso()
        meta = SessionMeta(
            session_id=str(uuid.uuid4()),
            cwd=cwd,
            created_at=stamp,
            updated_at=stamp,
            git_root=git_root(cwd),
            **fields,
        )
        try:
            files.create_file(self.path(meta.session_id, ".jsonl"))
            self.write_meta(meta)
        except OSError:
            self.remove(meta.session_id)
            raise
        return meta

    def remove(self, session_id: str) -> None:
        """Delete a session's files (used to undo a create that could not finish)."""
        with contextlib.suppress(OSError, ValueError, SessionNotFoundError):
            cwd = json.loads(files.read(self.path(session_id, ".json")))["cwd"]
            self.index.drop(cwd, session_id)
        self.replay_cache(session_id).drop()
        for suffix in (".json", ".jsonl", ".lock"):
            with contextlib.suppress(OSError):
                self.path(session_id, suffix).unlink()

    def replay_cache(self, session_id: str) -> ReplayCache:
        """The session's cached ``session/load`` replay (:mod:`.replay_cache`)."""
        self.path(session_id, "")  # a malformed id: SessionNotFoundError
        return ReplayCache(self.root, session_id)

    def read_meta(self, session_id: str) -> SessionMeta:
        path = self.path(session_id, ".json")
        try:
            with _reading(session_id):
                data = json.loads(files.read(path))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            raise SessionNotFoundError(session_id) from None
        meta = SessionMeta.from_dict(data)
        entry = self.index.entry(meta.cwd, session_id)
        if entry is not None and str(entry.get("updated_at", "")) >= meta.updated_at:
            return SessionMeta.from_dict(entry)  # fresher counters than the file
        return meta

    def write_meta(self, meta: SessionMeta, old_cwd: str | None = None) -> None:
        data = asdict(meta)
        files.replace(self.path(meta.session_id, ".json"), json_line(data))
        self.index.put(data, old_cwd)

    def list(self, cwd: str | None = None) -> list[SessionMeta]:
        """Sessions, newest first; with ``cwd``, only those of exactly that directory."""
        if not self.index.ready:
            if not self.root.is_dir():
                return []
            self._ensure_root()
        entries = self.index.entries(cwd) if cwd is not None else self.index.all_entries()
        if cwd is not None:
            state = self.index.state(cwd)
            listed = self._listed.get(cwd)
            if listed is not None and listed[0] == state:
                return list(listed[1])
        found = []
        for entry in entries:
            sid = entry.get("session_id")
            seen = self._metas.get(sid)
            if seen is not None and seen[0] is entry:
                found.append(seen[1])
                continue
            try:
                meta = SessionMeta.from_dict(entry)
            except TypeError:
                continue
            self._metas[sid] = (entry, meta)
            found.append(meta)
        found.sort(key=lambda m: (m.updated_at, m.session_id), reverse=True)
        if cwd is not None:
            if len(self._listed) > 256:
                self._listed.clear()
            self._listed[cwd] = (state, found)
            return list(found)
        return found

    def lock_holder(self, session_id: str) -> dict[str, Any] | None:
        """Who holds the session's lock right now, or ``None``."""
        return locks.holder(self.path(session_id, ".lock"))

    def open_writer(self, session_id: str, holder: str) -> SessionWriter:
        """Take the session's lock; raises SessionLockedError if someone else has it."""
        meta = self.read_meta(session_id)
        token, other = locks.acquire(self.path(session_id, ".lock"), holder, now_iso())
        if other is not None:
            raise SessionLockedError(session_id, other)
        return SessionWriter(self, meta, token)

    def _scan(self, session_id: str) -> records.LogScan:
        try:  # line by line: a big log is never held whole
            with _reading(session_id):
                return records.scan(files.read_lines(self.path(session_id, ".jsonl")))
        except FileNotFoundError:
            return records.scan(b"")

    def read(self, session_id: str) -> StoredSession:
        """Read a session without writing (for a non-owner's replay); the history is
        repaired in memory only."""
        meta = self.read_meta(session_id)
        scan = self._scan(session_id)
        fixed, notes = records.normalize(scan.records, now_iso())
        return _stored(meta, fixed, records.repair_notes(scan, notes))

    def messages_after(self, session_id: str, start: int, end: int) -> list[Any] | None:
        """The messages of the log's bytes from ``start`` to ``end``, written after a
        point where nothing was pending; ``None`` when they cannot be read alone (a
        result that continues the message before, a line that is not whole, anything a
        load would repair)."""
        fd = files.open_fd(self.path(session_id, ".jsonl"), os.O_RDONLY)
        try:
            data = os.pread(fd, end - start, start)
        finally:
            os.close(fd)
        scan = records.scan(data)
        kinds = [r.get("type") for r in scan.records if r.get("type") != "mask_set"]
        if scan.bad_lines or len(data) != end - start or not kinds or kinds[0] == "tool_result":
            return None
        fixed, notes = records.normalize(scan.records, now_iso())
        return None if notes else records.assemble(fixed).messages

    def load(self, writer: SessionWriter) -> StoredSession:
        """Read the writer's session and persist repairs of what a crash left behind."""
        scan = self._scan(writer.session_id)
        stamp = now_iso()
        fixed, notes = records.normalize(scan.records, stamp)
        repairs = records.repair_notes(scan, notes)
        writer.log_size = scan.size
        if repairs:
            note = {"type": "repaired", "ts": stamp, "notes": repairs}
            data = b"".join(json_line(r) for r in [*fixed, note])
            log_path = self.path(writer.session_id, ".jsonl")
            cache = self.replay_cache(writer.session_id)
            kept = cache.still_kept(log_path, data)  # what was repaired came after them
            if kept is None:
                cache.drop()
            files.replace(log_path, data)
            if kept is not None:
                cache.follow(kept, log_path)
            writer.log_size = len(data)
            log.warning("session %s repaired: %s", writer.session_id, "; ".join(repairs))
        session = _stored(writer.meta, fixed, repairs)
        writer.sync_counts(fixed, len(session.messages))
        writer.marks = mark_table(self.root, fixed)
        return session

    def fork(self, session_id: str, **fields: Any) -> SessionMeta:
        """A new session holding a copy of this one's history."""
        source = self.read_meta(session_id)
        fixed, _notes = records.normalize(self._scan(session_id).records, now_iso())
        meta = self.create(
            source.cwd,
            title=(source.title or "session") + " (fork)",
            model=source.model,
            mode=source.mode,
            forked_from=session_id,
            **fields,
        )
        try:
            data = b"".join(json_line(r) for r in fixed)
            files.replace(self.path(meta.session_id, ".jsonl"), data)
            meta.message_count = len(records.assemble(fixed).messages)
            self.write_meta(meta)
        except OSError:
            self.remove(meta.session_id)
            raise
        return meta

    def tool_output(self, session_id: str, call_id: str) -> ToolOutput | None:
        """The stored output of one tool call (the latest record of it), or ``None``."""
        found = None
        for record in self._scan(session_id).records:
            if record.get("type") == "tool_result" and isinstance(record.get("block"), dict):
                block, name = record["block"], str(record.get("name", ""))
                if block.get("tool_use_id") == call_id:
                    found = (block, name, record.get("full"), record.get("raw_output"))
            elif record.get("type") in ("message", "repair"):
                content = (record.get("message") or {}).get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("tool_use_id") == call_id:
                        found = (block, "", None, None)
        if found is None:
            return None
        block, name, full, raw = found
        text = records.result_text(block.get("content"))
        return ToolOutput(
            call_id, name, text, bool(block.get("is_error")), full or text, raw_output=raw
        )


@contextlib.contextmanager
def _reading(session_id: str) -> Iterator[None]:
    """An OSError reading a session's file becomes a StoreOpenError naming the session
    (a missing file stays FileNotFoundError: the caller decides what it means)."""
    try:
        yield
    except (FileNotFoundError, StoreOpenError):
        raise
    except OSError as exc:
        raise StoreOpenError(
            exc.errno, f"cannot read session {session_id}: {files.describe(exc)}"
        ) from None


def mark_table(root: Path, recs: list[dict[str, Any]]) -> MarkTable:
    """The marks of a log's results, with the store's key as it is now."""
    table = MarkTable(key=read_key(root))
    for record in recs:
        table.see(record)
    return table


def _stored(meta: SessionMeta, recs: list[dict[str, Any]], repairs: list[str]) -> StoredSession:
    assembled = records.assemble(recs)
    return StoredSession(
        meta=meta,
        messages=assembled.messages,
        summary=assembled.summary,
        keep_from=assembled.keep_from,
        repairs=repairs,
    )
