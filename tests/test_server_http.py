# ruff: noqa: F811  (the fixtures imported from server_support are test arguments)
"""The endpoint's HTTP profile: POST for the client's messages, a GET event stream for
the server's, beside the WebSocket. A raw HTTP client against a real ``jupyter server``;
the event stream is cut mid-turn and resumed with ``Last-Event-ID``."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from server_support import JupyterServer, root, server, work  # noqa: F401  (fixtures)
from test_acp_support import wait_until

EVENT = re.compile(r"id: (\d+)\nevent: message\ndata: (.*)\n\n")
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


class HttpClient:
    """POSTs with tornado's client; the event stream read raw off a socket, so the test
    can cut it."""

    def __init__(self, server: JupyterServer) -> None:
        self.server = server
        self.url = f"{server.http}/iac-kernel/acp"
        self.link: str | None = None
        self.events: list[tuple[int, dict[str, Any]]] = []
        self._stream: asyncio.StreamWriter | None = None
        self._reader: asyncio.Task[None] | None = None

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.server.token}", **extra}
        if self.link:
            headers["Acp-Connection-Id"] = self.link
        return headers

    async def post(self, message: dict[str, Any]) -> Any:
        body = json.dumps({"jsonrpc": "2.0", **message})
        request = HTTPRequest(self.url, method="POST", headers=self.headers(), body=body)
        return await AsyncHTTPClient().fetch(request, raise_error=False)

    async def listen(self, last: int | None = None) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.server.port)
        extra = {"Accept": "text/event-stream"}
        if last is not None:
            extra["Last-Event-ID"] = str(last)
        lines = ["GET /iac-kernel/acp HTTP/1.1", f"Host: 127.0.0.1:{self.server.port}"]
        lines += [f"{k}: {v}" for k, v in self.headers(**extra).items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        self._stream = writer
        self._reader = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        data = ""
        while chunk := await reader.read(65536):
            data += chunk.decode()
            while match := EVENT.search(data):
                self.events.append((int(match.group(1)), json.loads(match.group(2))))
                data = data[match.end() :]

    def cut(self) -> None:
        if self._stream is not None:
            self._stream.transport.abort()
        if self._reader is not None:
            self._reader.cancel()

    def messages(self) -> list[dict[str, Any]]:
        return [m for _, m in self.events]

    def answer(self, request_id: str) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m.get("id") == request_id and "method" not in m]

    async def call(self, request_id: str, method: str, params: Any) -> dict[str, Any]:
        sent = await self.post({"id": request_id, "method": method, "params": params})
        assert sent.code == 202, sent.code
        (answer,) = await wait_until(lambda: self.answer(request_id), method)
        return answer

    def questions(self) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m.get("method") == "session/request_permission"]

    def questions(self) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m.get("method") == "session/request_permission"]

    def text(self) -> str:
        return "".join(
            m["params"]["update"]["content"]["text"]
            for m in self.messages()
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )


async def test_post_and_event_stream_with_a_turn_across_a_cut(
    server: JupyterServer, work: Path
) -> None:
    client = HttpClient(server)
    opened = await client.post({"id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    assert opened.code == 200
    assert json.loads(opened.body)["result"]["protocolVersion"] == 1
    client.link = opened.headers["Acp-Connection-Id"]
    try:
        await client.listen()
        created = await client.call("n", "session/new", {"cwd": str(work), "mcpServers": []})
        sid = created["result"]["sessionId"]
        assert client.events[0][0] == 2  # event 1 was the initialize answer, POST's body
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "write the plan note"}]}
        sent = await client.post({"id": "p", "method": "session/prompt", "params": prompt})
        assert sent.code == 202
        (question,) = await wait_until(client.questions, "the permission question")
        last, _ = client.events[-1]
        client.cut()

        # Back with Last-Event-ID one short: that event again, then the rest, once.
        seen = list(client.events)
        await client.listen(last - 1)
        await wait_until(lambda: len(client.events) > len(seen), "the event again")
        assert client.events[len(seen)] == seen[-1]
        del client.events[len(seen)]
        await client.post({"id": question["id"], "result": ALLOW})
        (answer,) = await wait_until(lambda: client.answer("p"), "the turn's answer")
        assert answer["result"]["stopReason"] == "end_turn"
        numbers = [n for n, _ in client.events]
        assert numbers == list(range(2, numbers[-1] + 1))  # every event once, in order
        assert client.text() == "Writing the note.Done with the note."
        assert (work / "plan.txt").read_text() == "reviewed from the editor\n"
    finally:
        client.cut()
        request = HTTPRequest(client.url, method="DELETE", headers=client.headers())
        ended = await AsyncHTTPClient().fetch(request, raise_error=False)
    assert ended.code == 204
    gone = await client.post({"method": "session/cancel", "params": {"sessionId": sid}})
    assert gone.code == 404


async def test_the_http_profile_needs_the_token_and_an_initialize(server: JupyterServer) -> None:
    url = f"{server.http}/iac-kernel/acp"
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        request = HTTPRequest(url, method="POST", headers=headers, body=body)
        answer = await AsyncHTTPClient().fetch(request, raise_error=False)
        assert answer.code == 403, (headers, answer.code)
    auth = {"Authorization": f"Bearer {server.token}"}
    first = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}})
    answer = await AsyncHTTPClient().fetch(
        HTTPRequest(url, method="POST", headers=auth, body=first), raise_error=False
    )
    assert answer.code == 400
    stream = HTTPRequest(
        url, headers={**auth, "Accept": "text/event-stream", "Acp-Connection-Id": "nope"}
    )
    answer = await AsyncHTTPClient().fetch(stream, raise_error=False)
    assert answer.code == 404
