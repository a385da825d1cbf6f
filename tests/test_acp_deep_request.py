"""A request nested too deeply or too long to parse still gets a JSON-RPC error, with
its id whenever the id can be read; the server keeps serving (issue 23 point 4)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from iac_kernel.acp.wire.transport import LineTransport, readable_id
from test_acp_support import RawServer, server_env


def deep_prompt(request_id: int, depth: int, id_first: bool = True) -> str:
    nested = "[" * depth + "]" * depth
    body = f'"method":"session/prompt","params":{{"sessionId":"s","prompt":{nested}}}'
    head = f'"jsonrpc":"2.0","id":{request_id}'
    return "{" + (f"{head},{body}" if id_first else f"{body},{head}") + "}"


@pytest.mark.parametrize("depth", [200_000, 5_000, 2_000, 900, 400])
async def test_a_deep_request_is_answered_with_its_id(tmp_path: Path, depth: int):
    async with RawServer.start(server_env(), tmp_path / "err.log") as server:
        await server.initialize()
        await server.send_line(deep_prompt(77, depth, id_first=depth % 2 == 0))
        answer = await server.answer(77)
        assert answer["error"]["code"] in (-32700, -32600, -32602, -32603)
        assert "Traceback" not in json.dumps(answer)
        # and the server still serves
        again = await server.call("session/list", {"cwd": str(tmp_path)})
        assert "result" in again


def test_the_id_is_read_from_text_json_cannot_parse():
    assert readable_id(deep_prompt(5, 100_000).encode()) == 5
    assert readable_id(deep_prompt(6, 100_000, id_first=False).encode()) == 6
    line = '{"jsonrpc":"2.0","params":{"id":9,"x":"\\"id\\": 3"},"id":"abc"}'
    assert readable_id(line.encode()) == "abc"  # the top-level id, not a nested one
    assert readable_id(b'{"jsonrpc":"2.0","method":"x"') is None
    assert readable_id(b'{"id": true}') is None


class _Sink:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


async def test_a_request_too_long_is_answered_with_its_id():
    reader = asyncio.StreamReader(limit=1024)
    big = "x" * 50_000
    reader.feed_data(
        f'{{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{{"p":"{big}"}}}}\n'.encode()
    )
    reader.feed_data(b'{"jsonrpc":"2.0","id":43,"method":"session/list","params":{}}\n')
    reader.feed_eof()
    sink = _Sink()
    transport = LineTransport(reader, sink, max_line=10_000)
    message = await transport.receive()
    transport.flush()
    error = json.loads(sink.data.splitlines()[0])
    assert error["id"] == 42 and error["error"]["code"] == -32600
    assert message is not None and message["id"] == 43  # the next line is read whole
