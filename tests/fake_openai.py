"""A local fake of an OpenAI-compatible Chat Completions endpoint, for the real ``openai`` SDK.

``FakeOpenAIServer`` is a real HTTP server on 127.0.0.1 (random port, own thread):
``POST {prefix}/chat/completions`` with ``"stream": true`` answers Server-Sent Events
(``data: {chunk}`` lines, then ``data: [DONE]``); ``GET {prefix}/models`` lists
:attr:`FakeOpenAIServer.models`. ``prefix`` is ``/v1`` unless a test moves it (to check
the "needs a /v1 suffix" hint).

Tests queue :class:`Chat` (a streamed answer), :class:`Failure` (a non-200 JSON error) or
:class:`Empty` (a 200 with no chunks), and read what arrived in ``requests``::

    with FakeOpenAIServer() as server:
        server.enqueue(Chat(text="Hello"))
        client = openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
"""

from __future__ import annotations

import collections
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Call:
    """A tool call as the model streams it: ``fragments`` are the argument pieces."""

    id: str
    name: str
    fragments: list[str]


@dataclass
class Chat:
    """One streamed answer: reasoning, text, tool calls (each split as given), then the
    finish chunk and, unless ``usage`` is None, the usage chunk with empty ``choices``."""

    text: str = ""
    reasoning: str = ""
    calls: list[Call] = field(default_factory=list)
    finish_reason: str | None = "stop"
    usage: dict[str, Any] | None = field(
        default_factory=lambda: {"prompt_tokens": 100, "completion_tokens": 20}
    )
    chunk_size: int = 4
    #: Field name of the reasoning delta (``reasoning_content`` for DeepSeek/Qwen).
    reasoning_field: str = "reasoning_content"

    def chunks(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [_chunk({"role": "assistant", "content": ""})]
        for piece in _pieces(self.reasoning, self.chunk_size):
            out.append(_chunk({self.reasoning_field: piece}))
        for piece in _pieces(self.text, self.chunk_size):
            out.append(_chunk({"content": piece}))
        for index, call in enumerate(self.calls):
            first = {"index": index, "type": "function", "function": {"name": call.name}}
            if call.id:
                first["id"] = call.id
            first["function"]["arguments"] = ""
            out.append(_chunk({"tool_calls": [first]}))
            for fragment in call.fragments:
                out.append(
                    _chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
                )
        if self.finish_reason is not None:
            out.append(_chunk({}, finish_reason=self.finish_reason))
        if self.usage is not None:
            out.append({**_chunk({}), "choices": [], "usage": self.usage})
        return out


@dataclass
class Failure:
    """A non-200 answer with an OpenAI-style JSON error body."""

    status: int
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Empty:
    """A 200 event stream with no chunk at all (what a wrong path on some servers gives)."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeOpenAIServer:
    """The fake endpoint; use as a context manager or call start()/stop()."""

    def __init__(self, prefix: str = "/v1") -> None:
        self.prefix = prefix
        self._queue: collections.deque[Chat | Failure | Empty] = collections.deque()
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self.models = ["fake-small", "fake-large"]
        #: Served whenever the queue is empty (a notebook run); None: a 500.
        self.repeat: Chat | None = None
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def root(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        """The base URL to configure (``http://127.0.0.1:PORT/v1``)."""
        return self.root + self.prefix

    def enqueue(self, *responses: Chat | Failure | Empty) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def start(self) -> FakeOpenAIServer:
        handler = type("Handler", (_Handler,), {"fake": self})
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

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, request: Recorded) -> Chat | Failure | Empty | None:
        with self._lock:
            self.requests.append(request)
            return self._queue.popleft() if self._queue else self.repeat


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    fake: FakeOpenAIServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def do_GET(self) -> None:
        self.fake.requests.append(Recorded("GET", self.path, self._headers(), None))
        if self.path.split("?")[0] != self.fake.prefix + "/models":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.fake.models]
        self._json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        request = Recorded("POST", self.path, self._headers(), body)
        if self.path.split("?")[0] != self.fake.prefix + "/chat/completions":
            self.fake.requests.append(request)
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        scripted = self.fake._next(request)
        if scripted is None:
            self._json(500, {"error": {"message": "fake server: no scripted response left"}})
        elif isinstance(scripted, Failure):
            self._json(
                scripted.status,
                {"error": {"message": scripted.message, "type": "fake", "code": None}},
                scripted.headers,
            )
        else:
            self._stream([] if isinstance(scripted, Empty) else scripted.chunks())

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for chunk in chunks:
                self._write(f"data: {json.dumps(chunk)}\n\n".encode())
            if chunks:
                self._write(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _write(self, frame: bytes) -> None:
        self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
        self.wfile.flush()


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]
