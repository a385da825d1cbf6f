"""The loopback-server scaffolding of the fake model endpoints (fake_openai.py,
fake_anthropic.py).

:class:`ScriptedServer` is a real HTTP server on 127.0.0.1 (random port, own thread): each
request takes the next scripted response (``repeat`` when none is left) and is recorded in
``requests``. :class:`FakeHandler` reads JSON bodies and writes JSON answers and chunked
event streams; a fake's handler subclasses it and sets ``fake``.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

Scripted = TypeVar("Scripted")


@dataclass
class Recorded:
    """One request as the server received it (header names in lower case)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeHandler(BaseHTTPRequestHandler):
    """Request handler base: keep-alive, TCP_NODELAY, quiet."""

    protocol_version = "HTTP/1.1"
    #: TCP_NODELAY: without it Nagle's algorithm and the client's delayed ACK add ~40 ms
    #: to each response on a kept-alive connection.
    disable_nagle_algorithm = True
    fake: Any

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _abort(self) -> None:
        """Cut the connection in the middle of the chunked body."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _read(self, method: str) -> Recorded:
        """The request, its body parsed as JSON where it is JSON."""
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        return Recorded(method, self.path, self._headers(), body)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _start_stream(self, headers: dict[str, str]) -> None:
        """A 200 with a chunked body (``headers`` give its content type and more)."""
        self.send_response(200)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _write_chunk(self, frame: bytes) -> None:
        self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class ScriptedServer(Generic[Scripted]):
    """Serves scripted responses in order; use as a context manager or start()/stop()."""

    handler: type[FakeHandler] = FakeHandler

    def __init__(self) -> None:
        self._queue: collections.deque[Scripted] = collections.deque()
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        #: Every scripted response handed out so far.
        self._served: list[Scripted] = []
        #: Served whenever the queue is empty (a notebook run, benchmarks); None: an error.
        self.repeat: Scripted | None = None
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT``."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def enqueue(self, *responses: Scripted) -> None:
        """Add scripted responses; each request takes the next one."""
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """Scripted responses not yet used."""
        with self._lock:
            return len(self._queue)

    def start(self) -> Self:
        handler = type("Handler", (self.handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, request: Recorded) -> Scripted | None:
        """Record ``request``; the response it gets."""
        with self._lock:
            self.requests.append(request)
            if not self._queue:
                return self.repeat
            item = self._queue.popleft()
            self._served.append(item)
            return item


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of ``size`` characters (at least 1)."""
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


class SilentServer:
    """A loopback endpoint that accepts connections, reads what arrives and never
    answers (a model endpoint that hangs). ``connections`` counts the accepted ones."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._held: list[socket.socket] = []
        self.connections = 0
        self._closed = threading.Event()

    @property
    def root(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            self._held.append(conn)  # kept open, never answered

    def __enter__(self) -> Self:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._sock.close()
        for conn in self._held:
            conn.close()
