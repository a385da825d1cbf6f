"""The HTTP profile of the endpoint: POST for the client's messages, a GET event stream
(Server-Sent Events) for the server's, on the same ``{base_url}iac-kernel/acp``.

- ``POST`` with an ``initialize`` request and no ``Acp-Connection-Id`` opens a
  connection: the answer is the body (``200``, JSON) and its ``Acp-Connection-Id``
  header names the connection.
- ``POST`` with ``Acp-Connection-Id``: one JSON-RPC message (request, notification or
  answer to the server's request); ``202`` at once, the answers come on the stream.
- ``GET`` with ``Accept: text/event-stream`` and ``Acp-Connection-Id``: the stream. Each
  server message is one event, ``id: N`` (its number on the connection), ``event:
  message``, ``data: <the JSON-RPC message>``. With ``Last-Event-ID: N`` it starts
  after event N (resending what followed); without, after what was acknowledged.
  A new GET takes over from the previous one. A stream that drops leaves the
  connection waiting for the window, as a dropped WebSocket does.
- ``POST`` of ``{"jsonrpc":"2.0","method":"_iac/received","params":{"count":N}}``
  acknowledges events up to N (the server forgets them; 64 MiB are kept at most).
- ``DELETE`` with ``Acp-Connection-Id`` ends the connection (``204``).

The same authentication and ``iac_kernel`` authorization as the WebSocket.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from iac_kernel.acp.remote.resume import ack_count

EVENT_STREAM = "text/event-stream"
#: Milliseconds an EventSource waits before reconnecting.
RETRY_MS = 1000


def wants_events(accept: str | None) -> bool:
    return EVENT_STREAM in (accept or "")


def initialize_id(body: str) -> tuple[bool, Any]:
    """Whether ``body`` is an ``initialize`` request, and its id."""
    try:
        message = json.loads(body)
    except ValueError:
        return False, None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return False, None
    request_id = message.get("id")
    ok = "id" in message and (isinstance(request_id, str) or type(request_id) is int)
    return ok, request_id


class EventStream:
    """A link's socket for a GET event stream (see :class:`~iac_kernel.server.link.Socket`)."""

    def __init__(self, handler: Any, after: int) -> None:
        self.handler = handler
        #: Number of the last event written.
        self.number = after
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def start(self) -> Any:
        self.handler.write(f"retry: {RETRY_MS}\n\n")
        return self.handler.flush()

    def write_message(self, message: str, binary: bool = False) -> Any:
        if ack_count(message) is not None:
            return None  # a WebSocket client's acknowledgement; events carry their ids
        self.number += 1
        self.handler.write(f"id: {self.number}\nevent: message\ndata: {message}\n\n")
        return self.handler.flush()

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        if not self.ended.done():
            self.ended.set_result(None)
