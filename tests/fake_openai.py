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

import json
import time
from dataclasses import dataclass, field
from typing import Any

from fake_http import FakeHandler, Recorded, ScriptedServer, pieces


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
    #: Abort the TCP connection mid-body after that many chunks.
    drop_after: int | None = None
    #: Seconds between two chunks (a slow but steady stream).
    pace: float = 0.0

    def chunks(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [_chunk({"role": "assistant", "content": ""})]
        for piece in pieces(self.reasoning, self.chunk_size):
            out.append(_chunk({self.reasoning_field: piece}))
        for piece in pieces(self.text, self.chunk_size):
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


class _Handler(FakeHandler):
    fake: FakeOpenAIServer

    def do_GET(self) -> None:
        self.fake.requests.append(Recorded("GET", self.path, self._headers(), None))
        if self.path.split("?")[0] != self.fake.prefix + "/models":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.fake.models]
        self._json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        request = self._read("POST")
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
            if isinstance(scripted, Empty):
                self._stream([])
            else:
                self._stream(scripted.chunks(), scripted.drop_after, scripted.pace)

    def _stream(
        self, chunks: list[dict[str, Any]], drop_after: int | None = None, pace: float = 0.0
    ) -> None:
        self._start_stream({"content-type": "text/event-stream"})
        try:
            for position, chunk in enumerate(chunks):
                if position == drop_after:
                    self._abort()
                    return
                if pace and position:
                    time.sleep(pace)
                self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            if chunks:
                self._write_chunk(b"data: [DONE]\n\n")
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class FakeOpenAIServer(ScriptedServer[Chat | Failure | Empty]):
    """The fake endpoint; use as a context manager or call start()/stop()."""

    handler = _Handler

    def __init__(self, prefix: str = "/v1") -> None:
        super().__init__()
        self.prefix = prefix
        self.models = ["fake-small", "fake-large"]

    @property
    def url(self) -> str:
        """The base URL to configure (``http://127.0.0.1:PORT/v1``)."""
        return self.root + self.prefix

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
