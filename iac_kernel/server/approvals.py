"""The approvals API of the server extension: what the JupyterLab panel of pending
approvals reads and where its Approve / Reject go (docs/approvals.md).

Under ``{base_url}iac-kernel/approvals`` (:data:`PATH`)::

    GET  approvals[?status=pending,approved]   the team store's records (default: pending)
    GET  approvals/ID[?card=0]                 one record, with the plan card it was asked on
    POST approvals/ID/approve  {"note", "plan_sha256"}   approve as yourself
    POST approvals/ID/reject   {"note"}                  reject as yourself

Every handler is a :class:`~jupyter_server.base.handlers.APIHandler` behind
jupyter_server's own ``authenticated`` and ``authorized`` decorators (token, cookie and
XSRF checks; under JupyterHub the hub's OAuth and scopes). Who approves is never read from
the request: it is the hub user the server's identity provider authenticated, or, on a
plain server, the OS user the server runs as (:func:`approver`). A decision from a process
of a bash call's sandbox is refused, as for the ACP endpoint. Refusals (an unknown id,
self-approval, a changed plan, a closed record, an unreachable store) are one line in the
JSON error's ``message``, with nothing changed.

The team store (SQLAlchemy, Alembic) is imported on the first request, not when the
server starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from iac_kernel.acp.approvals import NOTE_CHARS
from iac_kernel.guard.sandbox import processes
from iac_kernel.server.handler import AUTH_RESOURCE

if TYPE_CHECKING:
    from iac_kernel.team.approvals import Approval, Approvals
    from iac_kernel.team.store import Identity, TeamStore

#: Under the server's base_url.
PATH = "iac-kernel/approvals"
STATUSES = ("pending", "approved", "rejected", "expired", "cancelled", "spent")
DECISIONS = ("approve", "reject")
_ID = r"[0-9A-Za-z_-]{1,32}"

T = TypeVar("T")


class Book:
    """The server's approval records: the team store, opened on first use (an unreachable
    store is tried again on the next request) and closed with the server."""

    def __init__(self) -> None:
        self._store: TeamStore | None = None
        self._lock = threading.Lock()

    def approvals(self) -> Approvals:
        from iac_kernel.team.approvals import Approvals
        from iac_kernel.team.store import open_store

        with self._lock:
            if self._store is None:
                self._store = open_store()
            return Approvals(self._store)

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def approver(user: Any) -> Identity:
    """Who the authenticated ``user`` is: a JupyterHub user (the hub's identity provider
    hands the hub's user model, with the user's groups when its scopes include them), else
    the OS user this server runs as: a plain server's token or password is its owner's."""
    from iac_kernel.team.store import hub_identity, os_identity

    return hub_identity(getattr(user, "hub_user", None)) or os_identity()


def shown(record: Approval, me: Identity, card: bool = False) -> dict[str, Any]:
    """A record as the panel reads it: the public record, what it waits for, and how it
    stands with ``me`` (whose request it is, whether ``me`` answered it)."""
    out = record.public()
    out.update(
        waiting=record.waiting_text(),
        yours=record.requester == me.name,
        answered=any(v.approver == me.name for v in record.votes),
    )
    if card:
        out["card"] = record.card
    return out


class _ApprovalsHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    def initialize(self, book: Book) -> None:
        self._book = book

    def me(self) -> Identity:
        return approver(self.current_user)

    async def run(self, action: Callable[[Approvals], T]) -> T:
        """``action`` on the store, in a thread (the database may wait on a lock); its
        refusal becomes a 4xx with one line, an unusable store a 503."""
        from iac_kernel.team.approvals import ApprovalError, UnknownApproval
        from iac_kernel.team.store import TeamStoreError

        def call() -> T:
            return action(self._book.approvals())

        try:
            return await asyncio.to_thread(call)
        except UnknownApproval as exc:
            raise web.HTTPError(404, str(exc)) from None
        except ApprovalError as exc:
            raise web.HTTPError(409, str(exc)) from None
        except TeamStoreError as exc:
            raise web.HTTPError(503, str(exc)) from None


class ListHandler(_ApprovalsHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        wanted = tuple(
            s.strip() for s in self.get_query_argument("status", "pending").split(",") if s.strip()
        )
        unknown = [s for s in wanted if s not in STATUSES]
        if unknown or not wanted:
            raise web.HTTPError(
                400, f"status {','.join(unknown) or '(none)'}: use {', '.join(STATUSES)}"
            )
        records = await self.run(lambda book: book.list(wanted))
        me = self.me()
        self.finish({"you": me.name, "approvals": [shown(r, me) for r in records]})


class RecordHandler(_ApprovalsHandler):
    @web.authenticated
    @authorized
    async def get(self, record_id: str) -> None:
        record = await self.run(lambda book: book.get(record_id))
        me = self.me()
        card = self.get_query_argument("card", "1") != "0"  # the panel's refresh: no card
        self.finish({"you": me.name, "approval": shown(record, me, card=card)})


class DecisionHandler(_ApprovalsHandler):
    @web.authenticated
    @authorized
    async def post(self, record_id: str, decision: str) -> None:
        if await asyncio.to_thread(self._from_a_sandbox):
            self.log.warning("refused an approval decision from a sandboxed tool call")
            raise web.HTTPError(403, "a sandboxed tool call cannot approve or reject")
        note, plan_sha256 = self._body()
        me = self.me()
        if decision == "approve":
            record = await self.run(
                lambda book: book.approve(record_id, me, note=note, plan_sha256=plan_sha256)
            )
        else:
            record = await self.run(lambda book: book.reject(record_id, me, note=note))
        self.log.info("approval %s: %s by %s (%s)", record_id, decision, me.name, me.via)
        self.finish({"you": me.name, "approval": shown(record, me)})

    def _body(self) -> tuple[str | None, str | None]:
        """The note and the plan the approver saw; nothing else is read (not who they are)."""
        if not self.request.body.strip():
            return None, None
        body = self.get_json_body()
        if not isinstance(body, dict):
            raise web.HTTPError(400, 'the body is a JSON object: {"note": ..., "plan_sha256": ...}')
        note, plan = body.get("note"), body.get("plan_sha256")
        if note is not None and not isinstance(note, str):
            raise web.HTTPError(400, "note: a string")
        if note is not None and len(note) > NOTE_CHARS:
            raise web.HTTPError(400, f"note: at most {NOTE_CHARS} characters")
        if plan is not None and not isinstance(plan, str):
            raise web.HTTPError(400, "plan_sha256: a string")
        return (note.strip() or None) if note else None, plan or None

    def _from_a_sandbox(self) -> bool:
        stream = getattr(self.request.connection, "stream", None)
        sock = getattr(stream, "socket", None)
        return sock is not None and processes.from_a_sandbox(sock)


def handlers(book: Book) -> list[tuple[str, type[APIHandler], dict[str, Any]]]:
    """The API's routes (under the server's base_url), all on ``book``."""
    options = {"book": book}
    return [
        (rf"/{PATH}", ListHandler, options),
        (rf"/{PATH}/({_ID})", RecordHandler, options),
        (rf"/{PATH}/({_ID})/({'|'.join(DECISIONS)})", DecisionHandler, options),
    ]
