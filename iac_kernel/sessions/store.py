"""Append-only JSONL session store with per-session locks.

Layout under the store root (``~/.iac-code/sessions`` by default)::

    <id>.jsonl   one record per line: {"type": "message" | "compaction" | "repair", ...}
    <id>.json    metadata (rewritten atomically): id, cwd, git root, title, times, counts
    <id>.lock    flock'd by the one process that writes the session; holds who that is

Each message is written and fsynced when it completes, so a crash loses at most the
message being streamed. Loading repairs what a crash leaves: a half-written last line is
cut off, and tool calls with no result get an "interrupted" result, both persisted.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

INTERRUPTED_RESULT = "Interrupted: the session stopped before this tool call finished."


class SessionNotFoundError(KeyError):
    """No session with that id in the store."""


class SessionLockedError(RuntimeError):
    """Another process (or runtime) writes this session."""

    def __init__(self, session_id: str, holder: dict[str, Any]):
        self.session_id = session_id
        self.holder = holder
        who = holder.get("holder") or "another process"
        super().__init__(
            f"session {session_id} is held by {who} (pid {holder.get('pid', '?')} on "
            f"{holder.get('host', '?')} since {holder.get('since', '?')})"
        )


def now_iso() -> str:
    """UTC time with milliseconds, so sessions updated in one second still sort in order."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def git_root(cwd: str) -> str | None:
    """The git top level of ``cwd`` (editors open the project root, notebooks sit below it)."""
    try:
        out = subprocess.run(
            ["git", "-C", cwd, "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def is_valid_session_id(session_id: str) -> bool:
    try:
        return str(uuid.UUID(session_id)) == session_id
    except (ValueError, TypeError, AttributeError):
        return False


@dataclass
class SessionMeta:
    session_id: str
    cwd: str
    created_at: str
    updated_at: str
    title: str | None = None
    git_root: str | None = None
    model: str | None = None
    mode: str | None = None
    origin: str = "acp"
    notebook: str | None = None
    message_count: int = 0
    forked_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionMeta:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass
class StoredSession:
    """A session as read from disk."""

    meta: SessionMeta
    messages: list[dict[str, Any]]
    #: The latest compaction: the summary, and the index of the first message kept verbatim.
    summary: str | None = None
    keep_from: int = 0
    #: What load repaired, in words (empty when nothing was wrong).
    repairs: list[str] = field(default_factory=list)


class SessionStore:
    """All sessions under one root directory."""

    def __init__(self, root: Path):
        self.root = Path(root).expanduser()

    def _path(self, session_id: str, suffix: str) -> Path:
        if not is_valid_session_id(session_id):
            raise SessionNotFoundError(session_id)
        return self.root / f"{session_id}{suffix}"

    def exists(self, session_id: str) -> bool:
        try:
            return self._path(session_id, ".json").exists()
        except SessionNotFoundError:
            return False

    def create(self, cwd: str, **fields: Any) -> SessionMeta:
        """A new empty session with a fresh UUID."""
        self.root.mkdir(parents=True, exist_ok=True)
        stamp = now_iso()
        meta = SessionMeta(
            session_id=str(uuid.uuid4()),
            cwd=cwd,
            created_at=stamp,
            updated_at=stamp,
            git_root=git_root(cwd),
            **fields,
        )
        self._path(meta.session_id, ".jsonl").touch()
        self.write_meta(meta)
        return meta

    def read_meta(self, session_id: str) -> SessionMeta:
        try:
            data = json.loads(self._path(session_id, ".json").read_text())
        except FileNotFoundError:
            raise SessionNotFoundError(session_id) from None
        except (json.JSONDecodeError, OSError):
            raise SessionNotFoundError(session_id) from None
        return SessionMeta.from_dict(data)

    def write_meta(self, meta: SessionMeta) -> None:
        path = self._path(meta.session_id, ".json")
        tmp = path.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(meta), indent=1))
        os.replace(tmp, path)

    def list(self, cwd: str | None = None) -> list[SessionMeta]:
        """Sessions, newest first; with ``cwd``, only those of exactly that directory."""
        if not self.root.is_dir():
            return []
        found = []
        for path in self.root.glob("*.json"):
            try:
                meta = SessionMeta.from_dict(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError, TypeError):
                continue
            if cwd is None or meta.cwd == cwd:
                found.append(meta)
        found.sort(key=lambda m: (m.updated_at, m.session_id), reverse=True)
        return found

    def lock_holder(self, session_id: str) -> dict[str, Any] | None:
        """Who holds the session's lock right now, or ``None``."""
        path = self._path(session_id, ".lock")
        if not path.exists():
            return None
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                try:
                    return json.loads(handle.read() or "{}")
                except json.JSONDecodeError:
                    return {}
            fcntl.flock(handle, fcntl.LOCK_UN)
            return None

    def open_writer(self, session_id: str, holder: str) -> SessionWriter:
        """Take the session's lock; raises SessionLockedError if someone else has it."""
        self.read_meta(session_id)
        lock_path = self._path(session_id, ".lock")
        handle = open(lock_path, "a+")  # held open for the writer's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            try:
                info = json.loads(handle.read() or "{}")
            except json.JSONDecodeError:
                info = {}
            handle.close()
            raise SessionLockedError(session_id, info) from None
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "holder": holder,
                    "since": now_iso(),
                }
            )
        )
        handle.flush()
        return SessionWriter(self, session_id, handle)

    def read(self, session_id: str) -> StoredSession:
        """Read a session without repairing it (for listing or replay by a non-owner)."""
        meta = self.read_meta(session_id)
        records, _good_bytes, _bad = _read_records(self._path(session_id, ".jsonl"))
        return _assemble(meta, records)

    def load(self, writer: SessionWriter) -> StoredSession:
        """Read the writer's session and persist repairs of what a crash left behind."""
        path = self._path(writer.session_id, ".jsonl")
        records, good_bytes, bad = _read_records(path)
        repairs = []
        if bad:
            with open(path, "r+b") as handle:
                handle.truncate(good_bytes)
                os.fsync(handle.fileno())
            repairs.append(f"dropped {bad} half-written line(s) at the end of the log")
        session = _assemble(writer.meta, records)
        dangling = dangling_tool_uses(session.messages)
        if dangling:
            repair = tool_results_message(dangling, INTERRUPTED_RESULT)
            writer.append_message(repair, kind="repair")
            session.messages.append(repair)
            repairs.append(f"closed {len(dangling)} interrupted tool call(s)")
        session.repairs = repairs
        session.meta = writer.meta
        return session

    def fork(self, session_id: str, **fields: Any) -> SessionMeta:
        """A new session holding a copy of this one's history."""
        source = self.read(session_id)
        meta = self.create(
            source.meta.cwd,
            title=(source.meta.title or "session") + " (fork)",
            model=source.meta.model,
            mode=source.meta.mode,
            forked_from=session_id,
            **fields,
        )
        src = self._path(session_id, ".jsonl")
        records, good_bytes, _bad = _read_records(src)
        with open(src, "rb") as handle:
            data = handle.read(good_bytes)
        dst = self._path(meta.session_id, ".jsonl")
        with open(dst, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        meta.message_count = sum(1 for r in records if r.get("type") in ("message", "repair"))
        self.write_meta(meta)
        return meta


class SessionWriter:
    """The one writer of a session: appends records, keeps metadata, holds the lock."""

    def __init__(self, store: SessionStore, session_id: str, lock_handle: Any):
        self.store = store
        self.session_id = session_id
        self._lock = lock_handle
        self.meta = store.read_meta(session_id)
        self._log = open(store._path(session_id, ".jsonl"), "ab")

    def _append(self, record: dict[str, Any]) -> None:
        if self._log.closed:
            raise RuntimeError(f"session {self.session_id} is closed")
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        self._log.write(line.encode())
        self._log.flush()
        os.fsync(self._log.fileno())

    def append_message(self, message: dict[str, Any], *, kind: str = "message", **extra: Any):
        self._append({"type": kind, "ts": now_iso(), "message": message, **extra})
        self.meta.message_count += 1
        self.touch()

    def append_compaction(self, summary: str, keep_from: int) -> None:
        self._append(
            {"type": "compaction", "ts": now_iso(), "summary": summary, "keep_from": keep_from}
        )
        self.touch()

    def update(self, **fields: Any) -> None:
        for key, value in fields.items():
            setattr(self.meta, key, value)
        self.touch()

    def touch(self) -> None:
        self.meta.updated_at = now_iso()
        self.store.write_meta(self.meta)

    @property
    def closed(self) -> bool:
        return self._log.closed

    def close(self) -> None:
        if not self._log.closed:
            self._log.close()
        if not self._lock.closed:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()


def _read_records(path: Path) -> tuple[list[dict[str, Any]], int, int]:
    """Parse the log; returns the records, the byte length of the good prefix, bad tail lines."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0, 0
    records: list[dict[str, Any]] = []
    offset = 0
    good = 0
    bad = 0
    for raw in data.splitlines(keepends=True):
        offset += len(raw)
        complete = raw.endswith(b"\n")
        try:
            record = json.loads(raw) if complete else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = None
        if isinstance(record, dict):
            if bad:
                # A bad line followed by good ones is not a torn tail: keep everything.
                bad = 0
            records.append(record)
            good = offset
        elif raw.strip():
            bad += 1
    return records, good, bad


def _assemble(meta: SessionMeta, records: list[dict[str, Any]]) -> StoredSession:
    messages: list[dict[str, Any]] = []
    summary = None
    keep_from = 0
    for record in records:
        if record.get("type") in ("message", "repair") and isinstance(record.get("message"), dict):
            messages.append(record["message"])
        elif record.get("type") == "compaction":
            summary = record.get("summary")
            keep_from = int(record.get("keep_from", 0))
    return StoredSession(meta=meta, messages=messages, summary=summary, keep_from=keep_from)


def dangling_tool_uses(messages: list[dict[str, Any]]) -> list[str]:
    """Ids of tool_use blocks in the last assistant message that have no tool_result."""
    if not messages or messages[-1].get("role") != "assistant":
        return []
    content = messages[-1].get("content")
    if not isinstance(content, list):
        return []
    return [b["id"] for b in content if b.get("type") == "tool_use"]


def tool_results_message(call_ids: list[str], text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": cid, "content": text, "is_error": True}
            for cid in call_ids
        ],
    }
