"""Newline-delimited JSON-RPC framing: what the SDK's NDJSON transport leaves out.

The SDK's transport skips a line that is not JSON without answering, crashes its
connection on a JSON array, and writes each message with its own ``write`` and
``drain``. This one answers such lines itself (``-32700`` parse error, ``-32600``
invalid request, with the id when it can be read), reads lines of any length up to
:data:`MAX_LINE_BYTES`, and hands only well-formed JSON-RPC objects to the connection
(:mod:`iac_kernel.acp.wire.connection`).

Messages are written in the order they are sent, but coalesced: everything sent during
one event-loop iteration goes out in one ``write`` at the start of the next (a streamed
answer sends many small ``session/update`` lines back to back), or at once when
:data:`FLUSH_BYTES` are pending; orjson encodes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Iterable
from typing import Any, Protocol

import orjson

log = logging.getLogger(__name__)

#: Longest line accepted; longer ones are discarded and answered with -32600.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: Buffer limit for stream readers created for this transport (lines may be longer).
READ_LIMIT = 1024 * 1024
#: Pending output written at once instead of at the next loop iteration.
FLUSH_BYTES = 256 * 1024


class Writer(Protocol):
    """What the transport writes to: an ``asyncio.StreamWriter`` or anything like it."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class LineTransport:
    """One JSON-RPC message per line over a reader/writer pair."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: Writer, *, max_line: int = MAX_LINE_BYTES
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._max_line = max_line
        self._closed = False
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._flush_scheduled = False
        self._write_error: BaseException | None = None

    # -- receiving -------------------------------------------------------------------

    async def receive(self) -> dict[str, Any] | None:
        """The next valid message, or ``None`` at end of stream."""
        while True:
            try:
                line = await self._read_line()
            except (ConnectionError, OSError) as exc:
                log.info("input stream ended: %s", exc)
                return None
            if line is None:
                return None
            if isinstance(line, _TooLong):
                await self._reply_error(
                    readable_id(line.head),
                    -32600,
                    "Invalid request",
                    f"message longer than {self._max_line} bytes",
                )
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
                request_id = readable_id(line) if isinstance(exc, RecursionError) else None
                await self._reply_error(request_id, -32700, "Parse error", _parse_detail(exc))
                continue
            problem, request_id = check_message(message)
            if problem:
                await self._reply_error(request_id, -32600, "Invalid request", problem)
                continue
            return message

    async def _read_line(self) -> bytes | object | None:
        chunks: list[bytes] = []
        size = 0
        too_long = False
        head = b""
        while True:
            try:
                chunk = await self._reader.readuntil(b"\n")
                done = True
            except asyncio.LimitOverrunError as exc:
                chunk = await self._reader.readexactly(exc.consumed)
                done = False
            except asyncio.IncompleteReadError as exc:
                chunk = exc.partial
                if not chunk and not chunks:
                    return None
                done = True
            size += len(chunk)
            if size > self._max_line and not too_long:
                too_long = True  # keep reading to the end of the line, but drop it
                head = (b"".join(chunks) + chunk)[:ID_SEARCH_BYTES]
                chunks.clear()
            elif not too_long:
                chunks.append(chunk)
            if done:
                return _TooLong(head) if too_long else b"".join(chunks)

    # -- sending ---------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        self._check_open()
        # Queued synchronously: the message is whole and in order before any other send.
        self._queue(_encode(message))
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()
        await self._writer.drain()

    async def send_notifications(self, method: str, params: Iterable[dict[str, Any]]) -> None:
        """Notifications of one ``method``, in order, each queued as :meth:`send` queues
        it, waiting for the writer only when :data:`FLUSH_BYTES` are pending (a replay
        sends tens of thousands: a wait per message cost more than its encoding).
        Writing further ahead of the client was slower: the pipe transport's buffer
        moves what is left after each write."""
        for each in params:
            self._check_open()
            line = encode_notification(method, each)
            self._queue(line)
            if self._pending_bytes >= FLUSH_BYTES:
                self.flush()
                await self._writer.drain()
        await self._writer.drain()

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionError("transport closed")
        if self._write_error is not None:
            raise ConnectionError(f"output failed: {self._write_error}")

    def _queue(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        """Write everything queued, in one ``write``."""
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        try:
            self._writer.write(data)
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.info("output failed: %s", exc)
            self._write_error = exc

    async def _reply_error(self, request_id: Any, code: int, message: str, detail: str) -> None:
        payload = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": code, "message": message, "data": {"details": detail}},
        }
        try:
            await self.send(payload)
            self.flush()
        except (ConnectionError, OSError):
            log.info("could not answer a malformed message: the output is closed")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.flush()
        with contextlib.suppress(Exception):
            self._writer.close()


class _TooLong:
    """A line over the limit: only its head is kept (to find the request's id)."""

    def __init__(self, head: bytes):
        self.head = head


#: How much of a line too long to keep is searched for its id.
ID_SEARCH_BYTES = 1024 * 1024
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_ID_VALUE = re.compile(rb'\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|null)\s*[,}]')


def readable_id(line: bytes) -> Any:
    """The top-level ``id`` of a request ``json.loads`` cannot parse (nested too deeply,
    or cut because too long), when it can be read; else ``None``. Only brackets and
    strings are tokenised, so depth costs nothing."""
    depth = 0
    for token in _TOKEN.finditer(line):
        text = token.group()
        if text in (b"{", b"["):
            depth += 1
        elif text in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and text == b'"id"':
            value = _ID_VALUE.match(line, token.end())
            if value is None:
                return None
            try:
                found = json.loads(value.group(1))
            except ValueError:
                return None
            return found if _valid_id(found) else None
    return None


def check_message(message: Any) -> tuple[str | None, Any]:
    """Why ``message`` is not a valid JSON-RPC 2.0 object (``None`` if it is), and the id
    to answer with."""
    if not isinstance(message, dict):
        kind = "a batch (array)" if isinstance(message, list) else type(message).__name__
        return f"expected a JSON-RPC object, got {kind}; batches are not supported", None
    request_id = message.get("id")
    if "id" in message and not _valid_id(request_id):
        return "id must be a string, an integer or null", None
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"', request_id
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            return "method must be a non-empty string", request_id
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            return "params must be an object", request_id
        return None, request_id
    if "id" not in message:
        return "a message needs a method (request) or an id (response)", None
    if ("result" in message) == ("error" in message):
        return "a response needs exactly one of result and error", request_id
    return None, request_id


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (type(value) is int)


#: The fallback encoder (``json.dumps`` with options builds one per call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode_notification(method: str, params: dict[str, Any]) -> bytes:
    """A notification's line, as every notification is sent."""
    return _encode({"jsonrpc": "2.0", "method": method, "params": params})


def _encode(message: dict[str, Any]) -> bytes:
    """One JSON-RPC line. orjson writes the UTF-8 directly, several times faster than
    ``json`` on long texts (a replayed session sends tens of megabytes); what it refuses
    (a lone surrogate, an integer beyond 64 bits, a non-string key) goes through
    ``json``, unpaired surrogates written as ``?``."""
    try:
        return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError
        pass
    try:
        text = _ENCODER.encode(message)
    except (TypeError, ValueError):
        log.exception("message could not be encoded as JSON")
        if "method" in message or "id" not in message:
            raise
        text = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {
                    "code": -32603,
                    "message": "Internal error",
                    "data": {"details": "the answer could not be encoded as JSON"},
                },
            }
        )
    return text.encode("utf-8", errors="replace") + b"\n"


def _parse_detail(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "the message is nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return "the message is not valid UTF-8"
    return f"invalid JSON: {str(exc)[:200]}"
