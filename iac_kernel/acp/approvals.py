"""ACP extension methods for an approver: the team's approval records (docs/approvals.md)
listed, approved and rejected from an editor (docs/protocol.md, *Approvals*).

``_iac/approvals/list`` answers the pending records as public JSON;
``_iac/approvals/approve`` ``{id, note?, plan_sha256?}`` and ``_iac/approvals/reject``
``{id, note?}`` vote and answer the record. Who votes is never read from the params: it
is the connection's authenticated person, given when the connection is served (the
Jupyter server's user on its ACP route, :func:`iac_kernel.server.approvals.approver`; the
process's identity for ``iac-kernel acp`` on stdio, :func:`local`). Connections served
without one (the kernel's endpoint) do not have these methods (-32601).

A refusal is one JSON-RPC error whose message is one line, with nothing changed: an
unknown id or bad params -32602, a refused vote (self-approval, a closed record, a
changed plan) :data:`REFUSED`, an unreachable store -32603. The team store is imported
and opened on the first call, in a worker thread (the database may wait on a lock).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iac_kernel.acp.protocol import errors
from iac_kernel.redact import redact

if TYPE_CHECKING:
    from acp import RequestError

    from iac_kernel.team.approvals import Approval, Approvals
    from iac_kernel.team.store import Identity, TeamStore

PREFIX = "_iac/approvals/"
LIST = PREFIX + "list"
APPROVE = PREFIX + "approve"
REJECT = PREFIX + "reject"
METHODS = (LIST, APPROVE, REJECT)
#: Longest note kept with a decision (characters); the server's REST API shares it.
NOTE_CHARS = 2000
#: JSON-RPC code of a vote the record refuses (implementation-defined server error).
REFUSED = -32001
_ID = re.compile(r"[0-9A-Za-z_-]{1,32}")


class Decisions:
    """One connection's approver: ``who()`` is the authenticated person, ``book()`` the
    team's records (both called in a worker thread)."""

    def __init__(
        self,
        who: Callable[[], Identity],
        book: Callable[[], Approvals],
        close: Callable[[], None] = lambda: None,
    ) -> None:
        self._who = who
        self._book = book
        self.close = close

    async def __call__(self, method: str, params: Any) -> dict[str, Any]:
        """The answer to ``method`` (one of :data:`METHODS`); a refusal is raised."""
        from iac_kernel.team.approvals import ApprovalError, UnknownApproval
        from iac_kernel.team.store import TeamStoreError

        if method == LIST:
            args: tuple[str | None, str | None, str | None] = (None, None, None)
        else:
            args = _params(params, plan=method == APPROVE)
        try:
            return await asyncio.to_thread(self._run, method, *args)
        except UnknownApproval as exc:
            raise _error(-32602, exc) from None
        except ApprovalError as exc:
            raise _error(REFUSED, exc) from None
        except TeamStoreError as exc:
            raise _error(-32603, exc) from None

    def _run(
        self, method: str, record_id: str | None, note: str | None, plan: str | None
    ) -> dict[str, Any]:
        book, me = self._book(), self._who()
        if method == LIST:
            return {"you": me.name, "approvals": [r.public() for r in book.list(("pending",))]}
        assert record_id is not None
        record: Approval
        if method == APPROVE:
            record = book.approve(record_id, me, note=note, plan_sha256=plan)
        else:
            record = book.reject(record_id, me, note=note)
        return {"you": me.name, "approval": record.public()}


def _params(params: Any, plan: bool) -> tuple[str, str | None, str | None]:
    """``(id, note, plan_sha256)`` of a decision's params; only these are read."""
    if not isinstance(params, dict):
        raise errors.rpc_error(-32602, 'params: an object {"id": ..., "note": ...}')
    record_id, note = params.get("id"), params.get("note")
    sha = params.get("plan_sha256") if plan else None
    if not isinstance(record_id, str) or not _ID.fullmatch(record_id):
        raise errors.rpc_error(-32602, "id: the record's id (letters, digits, - and _)")
    if note is not None and not isinstance(note, str):
        raise errors.rpc_error(-32602, "note: a string")
    if note is not None and len(note) > NOTE_CHARS:
        raise errors.rpc_error(-32602, f"note: at most {NOTE_CHARS} characters")
    if sha is not None and not isinstance(sha, str):
        raise errors.rpc_error(-32602, "plan_sha256: a string")
    return record_id, (note.strip() or None) if note else None, sha or None


def _error(code: int, exc: Exception) -> RequestError:
    """The error of a refusal: its first line, redacted and cut to the errors' length."""
    lines = str(exc).strip().splitlines()
    line = redact(lines[0]) if lines else type(exc).__name__
    return errors.rpc_error(code, line[: errors.MAX_MESSAGE])


def local() -> Decisions:
    """A local editor's approver (``iac-kernel acp`` on stdio): the process's identity
    (the OS user, or the hub user its server token belongs to), on the team store opened
    at first use and closed with :meth:`Decisions.close`."""
    lock = threading.Lock()
    opened: list[TeamStore] = []

    def book() -> Approvals:
        from iac_kernel.team.approvals import Approvals
        from iac_kernel.team.store import open_store

        with lock:
            if not opened:
                opened.append(open_store())
            return Approvals(opened[0])

    def who() -> Identity:
        from iac_kernel.team.store import process_identity

        return process_identity()

    def close() -> None:
        with lock:
            while opened:
                opened.pop().close()

    return Decisions(who, book, close)
