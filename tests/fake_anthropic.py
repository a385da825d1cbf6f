"""A local fake of the Anthropic Messages API, for driving the real SDK in tests.

``FakeAnthropicServer`` is a real HTTP server on 127.0.0.1 (random port, own thread) that
answers ``POST /v1/messages`` with ``"stream": true`` as Server-Sent Events in the Messages
API format: ``message_start``, ``content_block_start``, ``content_block_delta`` (``text_delta``,
``thinking_delta``, ``signature_delta``, ``input_json_delta``), ``content_block_stop``,
``message_delta``, ``message_stop``, ``ping`` and ``event: error`` frames.

Tests queue scripted responses (:class:`StreamedMessage`, :class:`ErrorResponse`) and read
back what the server received in :attr:`FakeAnthropicServer.requests`::

    with FakeAnthropicServer() as server:
        server.enqueue(StreamedMessage([text("Hello")]))
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fake_http import FakeHandler, Recorded, ScriptedServer, pieces

#: How long a held stream waits for :meth:`StreamedMessage.release` before going on anyway,
#: so a test that never releases fails instead of hanging.
HOLD_TIMEOUT = 10.0


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def thinking(value: str, signature: str) -> dict[str, Any]:
    """A thinking content block with its signature."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def redacted_thinking(data: str) -> dict[str, Any]:
    """A redacted_thinking content block (sent whole in content_block_start)."""
    return {"type": "redacted_thinking", "data": data}


def tool_use(
    id: str,
    name: str,
    input: dict[str, Any] | None = None,
    *,
    partial_json: list[str] | None = None,
) -> dict[str, Any]:
    """A tool_use block. ``partial_json`` gives the exact input_json_delta chunks to send."""
    block: dict[str, Any] = {"type": "tool_use", "id": id, "name": name, "input": input or {}}
    if partial_json is not None:
        block["partial_json"] = partial_json
    return block


@dataclass
class StreamedMessage:
    """One streamed 200 response.

    ``blocks`` are API content blocks (see :func:`text`, :func:`thinking`, :func:`tool_use`,
    :func:`redacted_thinking`); text and thinking are split into deltas of ``chunk_size``
    characters, tool input JSON likewise unless the block gives ``partial_json``.
    ``usage`` is sent in message_start (input and cache counts, ``output_tokens`` 1) and
    ``output_tokens`` again in message_delta; ``delta_usage`` replaces the message_delta usage.

    Failure modes, counted in SSE events written (see :meth:`events`):
    ``drop_after`` aborts the TCP connection mid-body after that many events;
    ``end_after`` ends the body cleanly after that many events (no message_stop);
    ``error_after`` sends ``event: error`` with ``error`` (type, message) after that many.
    ``hold_before`` pauses before writing that event until :meth:`release` is called.
    """

    blocks: list[dict[str, Any]]
    stop_reason: str | None = "end_turn"
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 10, "output_tokens": 5})
    delta_usage: dict[str, int] | None = None
    model: str = "claude-test"
    chunk_size: int = 5
    ping: bool = True
    drop_after: int | None = None
    end_after: int | None = None
    error_after: int | None = None
    error: dict[str, str] = field(
        default_factory=lambda: {"type": "overloaded_error", "message": "Overloaded"}
    )
    hold_before: int | None = None
    #: Seconds between two events (a slow but steady stream).
    pace: float = 0.0
    #: Set by the server when it has written that many events (read by tests).
    events_sent: int = 0
    _released: threading.Event = field(default_factory=threading.Event, repr=False)

    def release(self) -> None:
        """Let a stream paused by ``hold_before`` continue."""
        self._released.set()

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The complete event sequence of this message, as (event name, data)."""
        start_usage = {
            "input_tokens": self.usage.get("input_tokens", 0),
            "output_tokens": 1,
        }
        for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
            if key in self.usage:
                start_usage[key] = self.usage[key]
        out: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_fake",
                        "type": "message",
                        "role": "assistant",
                        "model": self.model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": start_usage,
                    },
                },
            )
        ]
        for index, block in enumerate(self.blocks):
            out.extend(self._block_events(index, block))
            if index == 0 and self.ping:
                out.append(("ping", {"type": "ping"}))
        usage = self.delta_usage
        if usage is None:
            usage = {"output_tokens": self.usage.get("output_tokens", 0)}
        out.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                    "usage": usage,
                },
            )
        )
        out.append(("message_stop", {"type": "message_stop"}))
        return out

    def _block_events(self, index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        kind = block["type"]
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": part}
                for part in pieces(block["text"], self.chunk_size)
            ]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": part}
                for part in pieces(block["thinking"], self.chunk_size)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            parts = block.get("partial_json")
            if parts is None:
                encoded = json.dumps(block["input"]) if block["input"] else ""
                parts = pieces(encoded, self.chunk_size)
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in parts]
        else:
            # redacted_thinking and anything else arrive whole in content_block_start.
            start, deltas = dict(block), []
        events = [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        ]
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            for delta in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        return events


@dataclass
class ErrorResponse:
    """A non-200 answer with the API's JSON error body and optional extra headers."""

    status: int
    error_type: str = "api_error"
    message: str = "Internal server error"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def rate_limited(cls, retry_after: str | None = None) -> ErrorResponse:
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        return cls(
            429, "rate_limit_error", "Number of requests has exceeded your rate limit", headers
        )

    @classmethod
    def overloaded(cls) -> ErrorResponse:
        return cls(529, "overloaded_error", "Overloaded")


class _Handler(FakeHandler):
    fake: FakeAnthropicServer

    def setup(self) -> None:
        super().setup()
        nodelay = self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        self.fake.nodelay.append(bool(nodelay))

    def do_POST(self) -> None:
        request = self._read("POST")
        body = request.body
        if self.path.split("?")[0] != "/v1/messages":
            self._send_error(ErrorResponse(404, "not_found_error", f"no route {self.path}"))
            return
        if not isinstance(body, dict) or body.get("stream") is not True:
            self._send_error(
                ErrorResponse(400, "invalid_request_error", "fake server only serves stream: true")
            )
            return
        scripted = self.fake._next(request)
        if scripted is None:
            self._send_error(
                ErrorResponse(
                    500,
                    "api_error",
                    "fake server: no scripted response left",
                    {"x-should-retry": "false"},
                )
            )
        elif isinstance(scripted, ErrorResponse):
            self._send_error(scripted)
        else:
            self._send_stream(scripted)

    def _send_error(self, error: ErrorResponse) -> None:
        payload = {
            "type": "error",
            "error": {"type": error.error_type, "message": error.message},
            "request_id": "req_fake",
        }
        self._json(error.status, payload, {"request-id": "req_fake", **error.headers})

    def _send_stream(self, message: StreamedMessage) -> None:
        headers = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
        self._start_stream({**headers, "request-id": "req_fake"})
        try:
            self._write_events(message)
        except (BrokenPipeError, ConnectionResetError):
            # The client went away (a test stopped reading early): nothing to report.
            self.close_connection = True

    def _write_events(self, message: StreamedMessage) -> None:
        for position, (name, data) in enumerate(message.events()):
            if position == message.hold_before:
                message._released.wait(HOLD_TIMEOUT)
            if position == message.drop_after:
                self._abort()
                return
            if position == message.end_after:
                break
            if position == message.error_after:
                self._write_event("error", {"type": "error", "error": message.error})
                break
            if message.pace and position:
                time.sleep(message.pace)
            self._write_event(name, data)
            message.events_sent = position + 1
        self._end_chunks()

    def _write_event(self, name: str, data: dict[str, Any]) -> None:
        self._write_chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())


class FakeAnthropicServer(ScriptedServer[StreamedMessage | ErrorResponse]):
    """The fake Messages API server; use as a context manager or call start()/stop()."""

    handler = _Handler

    def __init__(self) -> None:
        super().__init__()
        #: TCP_NODELAY as read back from each accepted connection.
        self.nodelay: list[bool] = []

    @property
    def url(self) -> str:
        """Base URL to give the SDK (``http://127.0.0.1:PORT``)."""
        return self.root

    def stop(self) -> None:
        with self._lock:
            # Unblock any stream still held, so its handler thread can finish.
            for item in [*self._queue, *self._served]:
                if isinstance(item, StreamedMessage):
                    item.release()
        super().stop()


def sent_credential(request: Recorded) -> str | None:
    """The API key or token a request carried (``x-api-key``, or a bearer ``authorization``,
    which is how SDK 2.x sends API keys)."""
    if "x-api-key" in request.headers:
        return request.headers["x-api-key"]
    auth = request.headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
