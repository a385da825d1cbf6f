"""A session that a running kernel holds, driven from ``iac-kernel acp`` through the
kernel's endpoint (:mod:`iac_kernel.acp.serve.endpoint`).

:class:`RemoteSession` opens the kernel's unix socket, sends the token line, and speaks
ACP to the kernel over a :class:`~iac_kernel.acp.wire.connection.Connection` as a
client: the editor's ``session/load``, ``resume``, ``prompt``, ``cancel``, mode and
config changes for that session are forwarded as they came (raw params), and the
kernel's answers come back unchanged. The kernel's ``session/update`` notifications are
passed on to the editor from the receive loop itself, before any later message is
read, so every update of a turn reaches the editor before that turn's answer (and a
load's replay before the load's answer). ``session/request_permission`` requests are
asked of the editor and its answer is returned to the kernel.

If the kernel goes away, the pending request fails with a readable error, tool calls
the editor saw start are closed as failed, and the handle is dropped: the session's
lock is free again, so the next ``session/load`` loads it from disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.meta import CLIENT_METHODS
from acp.utils import serialize_params

from iac_kernel import __version__
from iac_kernel.acp.attach.runtime import EndpointInfo
from iac_kernel.acp.protocol.updates import failed_update
from iac_kernel.acp.wire.channel import UPDATE, ClientChannel
from iac_kernel.acp.wire.connection import Connection
from iac_kernel.acp.wire.transport import READ_LIMIT, LineTransport

log = logging.getLogger(__name__)

PERMISSION = CLIENT_METHODS["session_request_permission"]
ELICIT = CLIENT_METHODS["elicitation_create"]  # a form (session.permissions)
#: Hang guard for connecting and initializing (not a timing assertion).
ATTACH_TIMEOUT = 30.0
KERNEL_STOPPED = "The kernel stopped before this tool call finished."


class AttachError(RuntimeError):
    """The kernel's endpoint could not be reached or refused us."""


class RemoteSession:
    """One session held by a kernel, reached through that kernel's endpoint."""

    def __init__(self, session_id: str, info: EndpointInfo, editor: ClientChannel) -> None:
        self.session_id = session_id
        self.info = info
        #: The editor's connection (its ``features`` are passed on to the kernel).
        self.editor = editor
        self.conn: Connection | None = None
        self.gone = False
        #: The kernel answered "Session not found": it let the session go.
        self.released = False
        #: Called once when the kernel's connection ends.
        self.on_gone: Callable[[RemoteSession], None] | None = None
        #: Tool calls the editor saw start and not finish.
        self._open_calls: dict[str, None] = {}

    @property
    def holder(self) -> str:
        return f"the Jupyter kernel (pid {self.info.pid})"

    # -- connecting ----------------------------------------------------------------------

    @classmethod
    async def attach(
        cls, session_id: str, info: EndpointInfo, editor: ClientChannel
    ) -> RemoteSession:
        """Connect, authenticate and initialize; raises AttachError."""
        remote = cls(session_id, info, editor)
        try:
            await asyncio.wait_for(remote._connect(), ATTACH_TIMEOUT)
        except (OSError, ConnectionError, TimeoutError, RequestError) as exc:
            await remote.close()
            raise AttachError(
                f"could not attach to {remote.holder}, which holds session {session_id}: "
                f"{_reason(exc)}"
            ) from None
        return remote

    async def _connect(self) -> None:
        reader, writer = await asyncio.open_unix_connection(self.info.socket, limit=READ_LIMIT)
        writer.write(json.dumps({"token": self.info.token}).encode() + b"\n")
        transport = _KernelTransport(reader, writer, self._update_from_kernel)
        self.conn = Connection(self._from_kernel, transport)
        self.conn.listen().add_done_callback(lambda done: done.cancelled() or self._lost())
        await self.conn.send_request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                # The editor's: the kernel's agent sends what the editor can take.
                "clientCapabilities": getattr(getattr(self.editor, "features", None), "raw", {}),
                "clientInfo": {"name": "iac-kernel acp", "version": __version__},
            },
        )

    # -- editor -> kernel ----------------------------------------------------------------

    async def forward(self, method: str, params: Any, is_notification: bool = False) -> Any:
        """Send one editor message on to the kernel and return the kernel's answer."""
        if self.gone or self.conn is None:
            raise self._gone_error()
        try:
            if is_notification:
                await self.conn.send_notification(method, params)
                return None
            return await self.conn.send_request(method, params)
        except ConnectionError:
            self._lost()
            await self._close_open_calls()
            raise self._gone_error() from None
        except RequestError as exc:
            if not _not_found(exc):
                raise
            # The notebook switched to another session and the kernel closed this one;
            # its lock is free now, so a new session/load opens it from the store.
            self.released = True
            self._lost()
            await self.close()
            raise RequestError.invalid_params(
                {
                    "session_id": f"{self.holder} no longer holds session "
                    f"{self.session_id}; send session/load again to open it"
                }
            ) from None

    async def close(self) -> None:
        """Detach (the kernel keeps the session); turns this connection started are
        cancelled by the kernel when the connection ends."""
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    # -- kernel -> editor ----------------------------------------------------------------

    async def _update_from_kernel(self, params: dict[str, Any]) -> None:
        update = params.get("update") if isinstance(params, dict) else None
        if isinstance(update, dict):
            call_id = update.get("toolCallId")
            kind = update.get("sessionUpdate")
            if isinstance(call_id, str):
                if kind == "tool_call" or update.get("status") in ("pending", "in_progress"):
                    self._open_calls.setdefault(call_id)
                elif update.get("status") in ("completed", "failed"):
                    self._open_calls.pop(call_id, None)
        await self.editor.forward_update(params)

    async def _from_kernel(self, method: str, params: Any, is_notification: bool) -> Any:
        """Requests the kernel's agent makes of its client: only permission questions
        (``session/request_permission``, and ``elicitation/create`` for a typed
        confirmation, which the kernel asks only if the editor declared it)."""
        if method in (PERMISSION, ELICIT):
            return await self.editor.request(method, params)
        if is_notification:
            log.info("ignoring %s from the kernel", method)
            return None
        raise RequestError.method_not_found(method)

    # -- the kernel went away ------------------------------------------------------------

    def _lost(self) -> None:
        if self.gone:
            return
        self.gone = True
        log.info("lost the kernel (pid %s) holding session %s", self.info.pid, self.session_id)
        if self.on_gone is not None:
            self.on_gone(self)

    async def _close_open_calls(self) -> None:
        for call_id in list(self._open_calls):
            update = serialize_params(failed_update(call_id, KERNEL_STOPPED))
            with contextlib.suppress(ConnectionError, OSError):
                await self.editor.forward_update({"sessionId": self.session_id, "update": update})
        self._open_calls.clear()

    def _gone_error(self) -> RequestError:
        return RequestError.internal_error(
            {
                "details": f"{self.holder}, which held session {self.session_id}, has "
                "stopped; send session/load again to continue from the stored history"
            }
        )


class _KernelTransport(LineTransport):
    """The line transport to the kernel, with ``session/update`` handled in the receive
    loop (forwarded before the next message is even read).

    After handing over an answer it yields once before reading on, so the editor's
    request handler, woken by that answer, writes its own answer first: notifications
    the kernel sends after an answer (a title, usage) then reach the editor after it too.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_update: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        super().__init__(reader, writer)
        self._on_update = on_update
        self._answered = False

    async def receive(self) -> dict[str, Any] | None:
        while True:
            if self._answered:
                self._answered = False
                await asyncio.sleep(0)
            message = await super().receive()
            if message is None:
                return None
            if message.get("method") == UPDATE and "id" not in message:
                try:
                    await self._on_update(message.get("params") or {})
                except Exception:
                    log.exception("could not pass a session/update on to the editor")
                continue
            self._answered = "method" not in message
            return message


def _not_found(exc: RequestError) -> bool:
    data = exc.data if isinstance(exc.data, dict) else {}
    return exc.code == -32602 and data.get("session_id") == "Session not found"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "its socket is gone"
    if isinstance(exc, TimeoutError):
        return "it did not answer"
    if isinstance(exc, RequestError):
        return str(exc) or "it refused the connection"
    if isinstance(exc, ConnectionError):
        return "the endpoint closed the connection (token refused, or the kernel stopped)"
    return str(exc) or type(exc).__name__
