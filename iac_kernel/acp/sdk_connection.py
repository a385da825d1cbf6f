"""The SDK's JSON-RPC :class:`~acp.connection.Connection` over our :class:`LineTransport`,
on either supported SDK line.

* 0.12 and later take a message transport: ``Connection(handler, transport)``.
* 0.11 (what ``jupyter-ai-acp-client`` 0.3 requires) reads bytes itself:
  ``Connection(handler, writer, reader, sender_factory=...)``. The transport's checked
  messages are fed, one line each, into a plain :class:`asyncio.StreamReader`, and the
  connection's sender is replaced (through the constructor's public ``sender_factory``)
  by one that sends through the transport from the caller's task, so work registered
  with :func:`~iac_kernel.acp.transport.after_answer` still follows its answer.
  That line also re-raises, after answering it, every error a request handler raised,
  and logs it with a traceback ("Background task failed"); a filter on the root logger
  drops that record when the error is a :class:`~acp.RequestError` (the client got it).

Which form applies is read from the constructor's signature, not from a version number.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from typing import Any

from acp import RequestError
from acp.connection import Connection, MethodHandler

from iac_kernel.acp.transport import READ_LIMIT, LineTransport

log = logging.getLogger(__name__)


def takes_message_transport() -> bool:
    """True on SDK lines whose ``Connection`` accepts a message transport (0.12+)."""
    reader = inspect.signature(Connection.__init__).parameters.get("reader")
    return reader is not None and reader.default is None


MESSAGE_TRANSPORT = takes_message_transport()


def connect(
    handler: MethodHandler, transport: LineTransport, *, listening: bool = True
) -> Connection:
    """A connection answering with ``handler`` over ``transport``; call it inside the
    event loop (on SDK 0.11 it starts the task that feeds the connection)."""
    if MESSAGE_TRANSPORT:
        return Connection(handler, transport, listening=listening)  # type: ignore[arg-type]
    _quiet_answered_errors()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    feeder = asyncio.ensure_future(_feed(transport, reader))
    sender = _TransportSender(transport, feeder)
    return Connection(
        handler,
        _NoWriter(),  # type: ignore[arg-type]
        reader,
        listening=listening,
        sender_factory=lambda _writer, _supervisor: sender,  # type: ignore[arg-type,return-value]
    )


class _AnsweredErrors(logging.Filter):
    """Drops SDK 0.11's traceback for an error already sent to the client as an answer."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (record.name == "root" and isinstance(error, RequestError))


_FILTER = _AnsweredErrors()


def _quiet_answered_errors() -> None:
    root = logging.getLogger()
    if _FILTER not in root.filters:
        root.addFilter(_FILTER)


async def _feed(transport: LineTransport, reader: asyncio.StreamReader) -> None:
    """Hand every checked message to the connection's reader, then end its stream."""
    try:
        while (message := await transport.receive()) is not None:
            # ASCII escapes: a lone surrogate (valid JSON) still encodes.
            reader.feed_data(json.dumps(message).encode() + b"\n")
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception("reading from the client failed")
    finally:
        reader.feed_eof()


class _TransportSender:
    """What SDK 0.11's connection sends through: the transport, in the sender's task."""

    def __init__(self, transport: LineTransport, feeder: asyncio.Future[None]) -> None:
        self.transport = transport
        self.feeder = feeder

    async def send(self, payload: dict[str, Any]) -> None:
        await self.transport.send(payload)

    async def close(self) -> None:
        self.feeder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.feeder
        await self.transport.close()


class _NoWriter:
    """The writer argument SDK 0.11 requires; unused, since the sender is ours."""

    def write(self, data: bytes) -> None:
        raise ConnectionError("the transport writes, not this placeholder")

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None
