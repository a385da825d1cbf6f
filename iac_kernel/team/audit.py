"""The audit trail in the team store: append-only records in a hash chain.

Each record carries the SHA-256 of the one before it (the first, of 64 zeros) and its own
hash over its sequence number, time, kind, actor, text and that previous hash. Appenders
serialise on the head row (``FOR UPDATE`` on PostgreSQL; SQLite's transactions are
``BEGIN IMMEDIATE``), so concurrent writers never fork the chain, and sequence numbers
have no gaps: a missing number is a removed record. The head row repeats the last
record's number and hash, so removing the newest records shows too. :func:`verify`
names the first record altered or removed. On PostgreSQL the users' role cannot update
or delete audit rows at all (see :data:`iac_kernel.team.store.GRANTS`).

Records are masked by their writers before they get here, as for ``audit.jsonl``.

A process writes and reads through a :class:`Trail` (:func:`trail`): the store opened once,
the older per-user ``audit.jsonl`` imported into it once, and that file as the fallback
while the store cannot be reached, so that no record is lost (imported when it is back).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from iac_kernel import telemetry
from iac_kernel.team.reach import STORE_ENV
from iac_kernel.team.store import (
    Identity,
    TeamStore,
    TeamStoreError,
    audit,
    audit_head,
    iso,
    now,
    open_store,
    os_identity,
    process_identity,
    store_url,
)

GENESIS = "0" * 64
#: Rows read at a time by :func:`verify`.
_BATCH = 2000


@dataclass(frozen=True)
class AuditEntry:
    """One stored record and its place in the chain."""

    seq: int
    recorded_at: float
    kind: str
    actor: str
    record: dict[str, Any]
    sha256: str

    def public(self) -> dict[str, Any]:
        """The record as listings show it: its own fields, with its place in the trail
        (``seq``), who appended it (``actor``) and when (``recorded_at`` when it has none)."""
        shown = {**self.record, "seq": self.seq, "actor": self.actor}
        shown.setdefault("recorded_at", iso(self.recorded_at))
        return shown


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found: ``problem`` is ``None`` when the chain is whole."""

    count: int
    problem: str | None = None
    #: The first record altered or removed.
    seq: int | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def canonical(value: Any) -> str:
    """One text for one value (sorted keys, ASCII: lone surrogates stay escapes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def chain_hash(prev: str, seq: int, recorded_at: float, kind: str, actor: str, record: str) -> str:
    return hashlib.sha256(
        canonical([prev, seq, recorded_at, kind, actor, record]).encode()
    ).hexdigest()


def append(store: TeamStore, record: dict[str, Any], actor: Identity) -> AuditEntry:
    """Add one record at the end of the chain, as ``actor``."""
    with store.transaction() as conn:
        return append_in(conn, record, actor.name)


def append_in(
    conn: Connection, record: dict[str, Any], actor: str, import_key: str | None = None
) -> AuditEntry:
    """Append inside the caller's transaction (an approval and its record commit together)."""
    _lock(conn)
    last = conn.execute(
        sa.select(audit.c.seq, audit.c.sha256).order_by(audit.c.seq.desc()).limit(1)
    ).first()
    seq, prev = (last.seq + 1, last.sha256) if last else (1, GENESIS)
    text = canonical(record)
    kind = str(record.get("kind") or "record")[:64]
    recorded_at = now()
    digest = chain_hash(prev, seq, recorded_at, kind, actor, text)
    conn.execute(
        audit.insert().values(
            seq=seq,
            recorded_at=recorded_at,
            kind=kind,
            actor=actor,
            record=text,
            prev_sha256=prev,
            sha256=digest,
            import_key=import_key,
        )
    )
    conn.execute(audit_head.update().where(audit_head.c.id == 1).values(seq=seq, sha256=digest))
    entry = AuditEntry(seq, recorded_at, kind, actor, record, digest)
    return telemetry.audited(conn, entry, imported=import_key is not None)


def _lock(conn: Connection) -> None:
    conn.execute(sa.select(audit_head.c.id).where(audit_head.c.id == 1).with_for_update()).one()


def entries(store: TeamStore, after: int = 0, limit: int | None = None) -> list[AuditEntry]:
    """Records after sequence number ``after``, oldest first."""
    query = sa.select(audit).where(audit.c.seq > after).order_by(audit.c.seq)
    if limit is not None:
        query = query.limit(limit)
    with store.transaction() as conn:
        rows = conn.execute(query).all()
    return [
        AuditEntry(r.seq, r.recorded_at, r.kind, r.actor, json.loads(r.record), r.sha256)
        for r in rows
    ]


def verify(store: TeamStore) -> Verification:
    """Walk the chain from the first record; name the first one altered or removed."""
    prev, expected = GENESIS, 1
    with store.transaction() as conn:
        head = conn.execute(sa.select(audit_head).where(audit_head.c.id == 1)).one()
        while True:
            rows = conn.execute(
                sa.select(audit).where(audit.c.seq >= expected).order_by(audit.c.seq).limit(_BATCH)
            ).all()
            for row in rows:
                if row.seq != expected:
                    return _broken(expected, f"record {expected} was removed")
                own = chain_hash(
                    row.prev_sha256, row.seq, row.recorded_at, row.kind, row.actor, row.record
                )
                if own != row.sha256:
                    return _broken(row.seq, f"record {row.seq} was altered (its hash differs)")
                if row.prev_sha256 != prev:
                    return _broken(
                        row.seq - 1,
                        f"record {row.seq - 1} was altered or replaced (record {row.seq} "
                        "was chained to another hash)",
                    )
                prev, expected = row.sha256, expected + 1
            if len(rows) < _BATCH:
                break
    last = expected - 1
    if head.seq > last:
        return _broken(
            last + 1, f"record {last + 1} was removed (the trail held {head.seq} records)"
        )
    if head.seq < last or head.sha256 != prev:
        return _broken(last, f"record {last} was altered (the trail's head differs)")
    return Verification(count=last)


def _broken(seq: int, problem: str) -> Verification:
    return Verification(count=max(seq - 1, 0), problem=problem, seq=seq)


def import_records(store: TeamStore, records: Iterable[dict[str, Any]], actor: Identity) -> int:
    """Append the records of an old ``audit.jsonl`` that are not in the trail yet, in
    their order, in one transaction; returns how many were added. Safe to call again and
    from several processes at once: a record is known by its content's hash and its
    occurrence number (two identical records are two records), so none is lost or
    added twice. The lead calls this with ``AuditLog(root).records()``."""
    keyed: list[tuple[str, dict[str, Any]]] = []
    seen: Counter[str] = Counter()
    for record in records:
        digest = hashlib.sha256(canonical(record).encode()).hexdigest()
        keyed.append((f"jsonl:{digest}:{seen[digest]}", record))
        seen[digest] += 1
    if not keyed:
        return 0
    with store.transaction() as conn:
        _lock(conn)
        known = set(
            conn.execute(
                sa.select(audit.c.import_key).where(audit.c.import_key.like("jsonl:%"))
            ).scalars()
        )
        added = 0
        for key, record in keyed:
            if key not in known:
                append_in(conn, record, actor.name, import_key=key)
                added += 1
    return added


class LegacyLog(Protocol):
    """The older per-user ``<session store>/audit.jsonl``
    (:class:`iac_kernel.sessions.audit.AuditLog`): read to import, written only while the
    team store cannot be reached."""

    root: Path
    path: Path

    def records(self) -> list[dict[str, Any]]: ...

    def append(self, record: dict[str, Any]) -> None: ...


#: Seconds a process keeps records in the legacy file after the store failed, before it
#: tries the store again (an unreachable server must not slow every tool call).
RETRY_AFTER = 30.0


class Trail:
    """One process's way to the audit trail: the store of ``IAC_KERNEL_TEAM_STORE`` (else
    SQLite in ``legacy``'s session store), opened once, with ``legacy``'s records imported
    before the first record is added or read, and ``legacy`` as the fallback."""

    def __init__(self, legacy: LegacyLog, actor: Identity | None = None) -> None:
        self.legacy = legacy
        self.actor = actor or _actor()
        #: The one-line reason the store cannot be used now (None: it can).
        self.problem: str | None = None
        self._store: TeamStore | None = None
        #: The legacy file's size and time when it was last imported.
        self._imported: tuple[int, int] | None = None
        self._failed_at: float | None = None
        self._lock = threading.Lock()

    def store(self) -> TeamStore:
        """The store, with the legacy file's records in it (imported whenever the file
        changed since: a process that could not reach the store kept some there);
        :class:`TeamStoreError` if unusable."""
        with self._lock:
            if self._store is None:
                self._store = open_store(store_url(sessions_dir=self.legacy.root))
            mark = _mark(self.legacy.path)
            if mark != self._imported:
                if mark is not None:
                    import_records(self._store, self.legacy.records(), self.actor)
                self._imported = mark
            return self._store

    def append(self, record: dict[str, Any]) -> str | None:
        """Add ``record`` to the trail; while the store cannot be used, keep it in the
        legacy file. Returns the one line to tell the user when the store has just
        become unusable (None otherwise: stored, or already said)."""
        failed_at = self._failed_at
        if failed_at is not None and time.monotonic() - failed_at < RETRY_AFTER:
            self.legacy.append(record)
            return None
        try:
            append(self.store(), record, self.actor)
        except TeamStoreError as exc:
            self.legacy.append(record)  # imported when the store is back (the file changed)
            self._failed_at = time.monotonic()
            said = self.problem is not None
            self.problem = (
                f"audit trail: {exc}; records are kept in {self.legacy.path} meanwhile "
                "and added to the store when it is back"
            )
            return None if said else self.problem
        self._failed_at = self.problem = None
        return None

    def entries(self) -> list[AuditEntry]:
        """Every record, oldest first (:class:`TeamStoreError` if the store is unusable)."""
        return entries(self.store())

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def _mark(path: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns


_TRAILS: dict[tuple[str, str], Trail] = {}
_TRAILS_LOCK = threading.Lock()


def trail(legacy: LegacyLog) -> Trail:
    """This process's :class:`Trail` for the store the environment names now and the
    session store of ``legacy`` (one per pair: the store stays open)."""
    key = (os.environ.get(STORE_ENV, "").strip(), str(legacy.root))
    with _TRAILS_LOCK:
        found = _TRAILS.get(key)
        if found is None:
            found = _TRAILS[key] = Trail(legacy)
        return found


def close_trails() -> None:
    """Close every store :func:`trail` opened and forget them (tests; a process's end)."""
    with _TRAILS_LOCK:
        found = list(_TRAILS.values())
        _TRAILS.clear()
    for each in found:
        each.close()


def _actor() -> Identity:
    """Who this process's records are by: :func:`process_identity`, else (a hub that
    cannot be asked now) the OS user, which a record may still name truthfully."""
    try:
        return process_identity()
    except TeamStoreError:
        return os_identity()
