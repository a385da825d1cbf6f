"""A JSON-RPC 2.0 connection over a :class:`~iac_kernel.acp.wire.transport.LineTransport`.

Each request and notification that comes in runs in a task of its own and is answered
by the handler (``handler(method, params, is_notification)``; what it raises becomes
the error answer, :func:`~iac_kernel.acp.protocol.errors.from_exception`); requests
sent to the other side wait for their answers. Work a handler registers with
:func:`after_answer` runs once that request's answer is written: notifications such as
a new session's commands must reach the client after the answer that tells it the id.

Ours, not the SDK's ``acp.connection.Connection``: importing any module of the SDK
imports its ~280 schema models (most of a second), and ``initialize`` and
``session/new`` are answered before that (``bench/startup.py``); the SDK's models come
in with the router (:mod:`iac_kernel.acp.wire.router`). It also keeps one connection
for both supported SDK lines (0.11, 0.12), which build theirs differently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any

from iac_kernel.acp.protocol import errors
from iac_kernel.acp.wire.transport import LineTransport

log = logging.getLogger(__name__)

MethodHandler = Callable[[str, Any, bool], Awaitable[Any]]
Deferred = Callable[[], Awaitable[None]]
_deferred: ContextVar[list[Deferred] | None] = ContextVar("iac_acp_deferred", default=None)


def after_answer(work: Deferred) -> None:
    """Run ``work()`` once the answer to the request being handled has been written;
    only inside a request handler."""
    pending = _deferred.get()
    if pending is None:
        raise RuntimeError("after_answer() called outside a request handler")
    pending.append(work)


def wire_result(result: Any) -> Any:
    """A handler's result as JSON: an SDK model as the SDK's connection dumps it."""
    dump = getattr(result, "model_dump", None)
    if dump is None:
        return result
    return dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)


class Connection:
    """Requests both ways over one transport; :meth:`main_loop` reads until the input ends."""

    def __init__(self, handler: MethodHandler, transport: LineTransport) -> None:
        self.handler = handler
        self.transport = transport
        self._next_id = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._shut = False

    async def main_loop(self) -> None:
        """Dispatch every message read; at the end of input, fail the requests still
        waiting for an answer (later sends raise ConnectionError)."""
        try:
            while (message := await self.transport.receive()) is not None:
                if "method" not in message:
                    self._resolve(message)
                elif "id" in message:
                    self._spawn(self._answer(message))
                else:
                    self._spawn(self._notified(message))
        finally:
            self._closed = True
            self._fail_waiting()

    def listen(self) -> asyncio.Task[None]:
        """Run :meth:`main_loop` in a task (the client side of a connection)."""
        return self._spawn(self.main_loop())

    async def send_request(self, method: str, params: Any = None) -> Any:
        """The other side's result; raises its error as ``RequestError``, and
        ConnectionError when the connection ends first."""
        self._check_open()
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            await self.transport.send(message)
            return await future
        finally:
            self._waiting.pop(request_id, None)

    async def send_notification(self, method: str, params: Any = None) -> None:
        self._check_open()
        await self.transport.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def close(self) -> None:
        """Fail what waits, cancel the handlers still running, close the transport."""
        if self._shut:
            return
        self._shut = self._closed = True
        self._fail_waiting()
        current = asyncio.current_task()
        running = [task for task in self._tasks if task is not current]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await self.transport.close()

    async def _answer(self, message: dict[str, Any]) -> None:
        pending: list[Deferred] = []
        _deferred.set(pending)
        method = message["method"]
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        try:
            result = await self.handler(method, message.get("params"), False)
            answer["result"] = wire_result(result)
        except Exception as exc:
            answer["error"] = errors.from_exception(exc, method).to_error_obj()
        await self.transport.send(answer)
        for work in pending:
            self._spawn(work())

    async def _notified(self, message: dict[str, Any]) -> None:
        method = message["method"]
        try:
            await self.handler(method, message.get("params"), True)
        except Exception as exc:
            log.info("notification %s failed: %s", method, errors.from_exception(exc, method))

    def _resolve(self, message: dict[str, Any]) -> None:
        future = self._waiting.pop(message["id"], None) if type(message["id"]) is int else None
        if future is None or future.done():
            return  # an answer nobody waits for (a stray one, or cancelled meanwhile)
        error = message.get("error")
        if error is None:
            future.set_result(message.get("result"))
            return
        error = error if isinstance(error, dict) else {}
        code, text = error.get("code", -32603), error.get("message", "Error")
        future.set_exception(errors.rpc_error(code, str(text), error.get("data")))

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionError("connection closed")

    def _fail_waiting(self) -> None:
        waiting, self._waiting = list(self._waiting.values()), {}
        for future in waiting:
            if not future.done():
                future.set_exception(ConnectionError("connection closed"))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        if isinstance(exc, ConnectionError | OSError):
            log.info("dropped: the connection is closed (%s)", exc)
        else:
            log.error("connection task failed", exc_info=exc)
