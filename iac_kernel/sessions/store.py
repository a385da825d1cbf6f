"""Append-only JSONL session store: private files, locks without held descriptors, crash
repair, a listing index, and each session's one writer.

Layout under the store root (``~/.iac-code/sessions`` by default; folders 0700, files
0600 whatever the umask)::

    <id>.jsonl   the log, one record per line (see :mod:`iac_kernel.sessions.records`)
    <id>.json    metadata, rewritten atomically when a field other than the counters changes
    <id>.lock    who writes the session (see :mod:`iac_kernel.sessions.locks`)
    index/       per-folder listing index, kept current on every write (see ``index.py``)
    mask.key     the key of the masking marks' fingerprints (see :func:`install_key`)

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
import gc
import json
import logging
import os
import secrets
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from iac_kernel.masking import marks
from iac_kernel.masking.marks import MarkTable
from iac_kernel.sessions import files, locks, records
from iac_kernel.sessions.files import StoreOpenError, StoreWriteError
from iac_kernel.sessions.index import FolderIndex
from iac_kernel.sessions.meta import (
    SessionLockedError,
    SessionMeta,
    SessionNotFoundError,
    StoredSession,
    git_root,
    is_valid_session_id,
    now_iso,
)
from iac_kernel.sessions.records import INTERRUPTED_RESULT
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
    "git_root",
    "is_valid_session_id",
    "now_iso",
]

log = logging.getLogger(__name__)

#: The store's masking key (``mask.key``): the per-install random key of the keyed
#: fingerprints that say which values a stored result was masked with
#: (:mod:`iac_kernel.masking.marks`). 0600, never through a link, hidden from every
#: sandbox with the store. Without it every stored result is masked again at load; a new
#: one is made at the next write.
KEY_NAME = "mask.key"


def read_key(root: Path) -> bytes | None:
    """The store's masking key, or ``None`` when there is none (or it is not one)."""
    try:
        key = bytes.fromhex(files.read(root / KEY_NAME).decode("ascii").strip())
    except (OSError, ValueError):
        return None
    return key if len(key) == 32 else None


def install_key(root: Path) -> bytes:
    """The key, made first if there is none (two processes making one: the first wins)."""
    key = read_key(root)
    if key is not None:
        return key
    files.private_dir(root)
    made = secrets.token_bytes(32)
    try:
        files.create_file(root / KEY_NAME, made.hex().encode() + b"\n")
    except FileExistsError:
        with contextlib.suppress(OSError):  # another process's (or a bad one: replaced)
            key = read_key(root)
        if key is not None:
            return key
        files.replace(root / KEY_NAME, made.hex().encode() + b"\n")
    return made


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a bulk read (as it was, after it).

    Reading a long session builds hundreds of thousands of containers at once; each of
    the collector's full passes walks every one of them again: about half again the time
    of a 50 MB ``session/load`` (``bench/acp_load.py``). Reference counting still frees
    everything without a cycle meanwhile."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
        for suffix in (".json", ".jsonl", ".lock"):
            with contextlib.suppress(OSError):
                self.path(session_id, suffix).unlink()

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

    def load(self, writer: SessionWriter) -> StoredSession:
        """Read the writer's session and persist repairs of what a crash left behind."""
        scan = self._scan(writer.session_id)
        stamp = now_iso()
        fixed, notes = records.normalize(scan.records, stamp)
        repairs = records.repair_notes(scan, notes)
        if repairs:
            note = {"type": "repaired", "ts": stamp, "notes": repairs}
            data = b"".join(json_line(r) for r in [*fixed, note])
            files.replace(self.path(writer.session_id, ".jsonl"), data)
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


class SessionWriter:
    """The one writer of a session: appends records and keeps its metadata current.

    It holds no file descriptor between calls. The in-memory counters change only after
    a record is on disk.
    """

    def __init__(self, store: SessionStore, meta: SessionMeta, token: str):
        self.store = store
        self.session_id = meta.session_id
        self.meta = meta
        self._token = token
        self._closed = False
        self._log = store.path(meta.session_id, ".jsonl")
        self._in_results = False
        #: The counters changed since ``<id>.json`` was written (it is rewritten on close).
        self._dirty = False
        #: The marks of the log's results and the sets they name (set by the store's
        #: load; kept current by every write): what a replay checks.
        self.marks = MarkTable()

    def _append(self, record: dict[str, Any]) -> None:
        if self._closed:
            raise RuntimeError(f"session {self.session_id} is closed")
        files.append(self._log, json_line(record))

    def append_message(self, message: dict[str, Any], *, kind: str = "message", **extra: Any):
        stamp = now_iso()
        self._append({"type": kind, "ts": stamp, "message": message, **extra})
        self._in_results = False
        self.meta.message_count += 1
        self.touch(stamp)

    def append_tool_result(
        self,
        block: dict[str, Any],
        *,
        name: str = "",
        raw_output: Any = None,
        full: str | None = None,
        masked_with: Iterable[str] | None = None,
    ) -> None:
        """One finished call's result; consecutive results form one user message.

        ``masked_with``: the known values its text was masked with; the record then
        carries its mark (:mod:`iac_kernel.masking.marks`), after the ``mask_set``
        record of those values' fingerprints if this log has none yet."""
        stamp = now_iso()
        record: dict[str, Any] = {"type": "tool_result", "ts": stamp, "name": name}
        record["block"] = block
        if raw_output is not None:
            record["raw_output"] = raw_output
        if full is not None and full != block.get("content"):
            record["full"] = full
        mark = self._mark(block, masked_with, stamp)
        if mark is not None:
            record["mask"] = mark
        self._append(record)
        if mark is not None:
            self.marks.marks[block["tool_use_id"]] = mark
        if not self._in_results:
            self.meta.message_count += 1
        self._in_results = True
        self.touch(stamp)

    def _mark(
        self, block: dict[str, Any], masked_with: Iterable[str] | None, stamp: str
    ) -> dict[str, str] | None:
        if masked_with is None or not isinstance(block.get("tool_use_id"), str):
            return None
        try:
            key = self.marks.key = install_key(self.store.root)
        except OSError as exc:  # no mark: a load masks this result again
            log.warning("session %s: no masking key: %s", self.session_id, exc)
            return None
        mark, known = marks.mark(key, masked_with, records.result_text(block.get("content")))
        if mark["set"] not in self.marks.sets:
            record = {"type": "mask_set", "ts": stamp, "id": mark["set"], "known": known}
            self._append(record)
            self.marks.sets[mark["set"]] = known
        return mark

    def append_compaction(self, summary: str, keep_from: int) -> None:
        self._append(
            {"type": "compaction", "ts": now_iso(), "summary": summary, "keep_from": keep_from}
        )
        self.touch()

    def sync_counts(self, recs: list[dict[str, Any]], message_count: int) -> None:
        """Set the counters from the loaded log (called by :meth:`SessionStore.load`)."""
        last = next((r for r in reversed(recs) if r.get("type") != "repaired"), None)
        self._in_results = bool(last and last.get("type") == "tool_result")
        self.meta.message_count = message_count

    def update(self, **fields: Any) -> None:
        old_cwd = self.meta.cwd
        for key, value in fields.items():
            setattr(self.meta, key, value)
        self.meta.updated_at = now_iso()
        self.store.write_meta(self.meta, old_cwd)
        self._dirty = False

    def touch(self, stamp: str | None = None) -> None:
        """New ``updated_at`` and counters, in the listing index only (no rewrite)."""
        self.meta.updated_at = stamp or now_iso()
        self._dirty = True
        meta = self.meta
        try:
            self.store.index.bump(meta.cwd, meta.session_id, meta.updated_at, meta.message_count)
        except OSError as exc:  # the index is a cache; the log already has the record
            log.warning("session %s: listing index not updated: %s", self.session_id, exc)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._dirty:
            try:
                path = self.store.path(self.session_id, ".json")
                files.replace(path, json_line(asdict(self.meta)))
            except OSError as exc:
                log.warning("session %s: metadata not saved on close: %s", self.session_id, exc)
        with contextlib.suppress(OSError):
            locks.release(self.store.path(self.session_id, ".lock"), self._token)
