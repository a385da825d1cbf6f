"""The one writer of a stored session: appends records to its log and keeps its
metadata and listing entry current (the layout is described in :mod:`.store`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from iac_kernel.masking import marks
from iac_kernel.masking.marks import MarkTable
from iac_kernel.sessions import files, locks
from iac_kernel.sessions.mask_key import install_key
from iac_kernel.sessions.meta import SessionMeta, now_iso
from iac_kernel.sessions.records import result_text
from iac_kernel.textsafe import json_line

if TYPE_CHECKING:
    from iac_kernel.sessions.store import SessionStore

log = logging.getLogger(__name__)


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
        #: The log's size in bytes (set by the store's load; kept by every write), and
        #: the records written since the load.
        self.log_size = 0
        self.appended = 0

    def _append(self, record: dict[str, Any]) -> None:
        if self._closed:
            raise RuntimeError(f"session {self.session_id} is closed")
        self.log_size = files.append(self._log, json_line(record))
        self.appended += 1

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
        mark, known = marks.mark(key, masked_with, result_text(block.get("content")))
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
