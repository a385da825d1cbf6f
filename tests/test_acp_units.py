"""Unit tests of the ACP front end's parts, and ``serve()`` over a socket pair (the
stream kind the kernel's endpoint will use) instead of stdio."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from acp import RequestError, connect_to_agent, text_block
from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)

from iac_kernel.acp.protocol.content import to_anthropic
from iac_kernel.acp.protocol.updates import replay_updates, to_update
from iac_kernel.acp.serve.server import serve
from iac_kernel.acp.session.listing import decode_cursor, encode_cursor, list_page
from iac_kernel.acp.session.permissions import UNREADABLE, parse_answer
from iac_kernel.acp.wire.transport import LineTransport, check_message
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from iac_kernel.events import (
    Diff,
    Location,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
    Usage,
    UserMessage,
)
from iac_kernel.sessions.store import SessionMeta
from test_acp_support import MAIN_SCRIPT, RecordingClient, wait_until


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"outcome": {"outcome": "selected", "optionId": "allow_always"}}, "allow_always"),
        ({"outcome": {"outcome": "selected", "option_id": "reject_once"}}, "reject_once"),
        ({"outcome": {"outcome": "cancelled"}}, "cancelled"),
        ({"outcome": "allowed", "option_id": "allow_once"}, "allow_once"),
        ({"outcome": "allowed", "optionId": "reject_always"}, "reject_always"),
        ({"outcome": "allowed"}, "allow_once"),
        ({"outcome": "denied"}, "reject_once"),
        ({"outcome": "denied", "option_id": "reject_always"}, "reject_always"),
        ({"outcome": "denied", "option_id": "allow_once"}, "reject_once"),
        ({"outcome": "cancelled"}, "cancelled"),
        ({"outcome": {"outcome": "selected"}}, UNREADABLE),
        ({"outcome": {"outcome": "maybe"}}, UNREADABLE),
        ({"outcome": 3}, UNREADABLE),
        (None, UNREADABLE),
        ("allow_once", UNREADABLE),
    ],
)
def test_parse_permission_answers(answer, expected):
    assert parse_answer(answer) == expected


def test_content_blocks_to_anthropic():
    blocks = [
        TextContentBlock(type="text", text="look"),
        TextContentBlock(type="text", text=""),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=BlobResourceContents(uri="file:///x/a.bin", blob="AAAA", mime_type="x/y"),
        ),
        ResourceContentBlock(
            type="resource_link", uri="https://example.com/doc", name="doc", description="the doc"
        ),
        ImageContentBlock(type="image", data="AA==", mime_type="image/jpeg"),
        AudioContentBlock(type="audio", data="AA==", mime_type="audio/mpeg"),
    ]
    texts = [b["text"] for b in to_anthropic(blocks)]
    assert texts[0] == "look"
    assert texts[1].startswith("[binary resource: file:///x/a.bin") and "3 bytes" in texts[1]
    assert texts[2] == "[resource: https://example.com/doc] doc - the doc"
    assert texts[3:] == ["[image: image/jpeg]", "[audio: audio/mpeg]"]
    with pytest.raises(RequestError) as empty:
        to_anthropic([TextContentBlock(type="text", text="")])
    assert empty.value.code == -32602


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {}}, None),
        ({"jsonrpc": "2.0", "method": "x"}, None),
        ({"jsonrpc": "2.0", "id": "a", "result": None}, None),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": 1}}, None),
        ([], "batch"),
        ({"jsonrpc": "1.0", "id": 1, "method": "x"}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": True, "method": "x"}, "id must"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "x"}, "id must"),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": "x", "params": 3}, "params"),
        ({"jsonrpc": "2.0", "id": 1, "result": 1, "error": {}}, "exactly one"),
        ({"jsonrpc": "2.0"}, "needs a method"),
    ],
)
def test_check_message(message, problem):
    found, _id = check_message(message)
    if problem is None:
        assert found is None
    else:
        assert problem in found


def _meta(i: int, updated: str) -> SessionMeta:
    return SessionMeta(session_id=f"id-{i:03d}", cwd="/w", created_at=updated, updated_at=updated)


def test_list_paging_is_stable_when_sessions_are_added():
    metas = sorted(
        (_meta(i, f"2024-01-01T00:00:{i % 7:02d}Z") for i in range(12)),
        key=lambda m: (m.updated_at, m.session_id),
        reverse=True,
    )
    first = list_page(metas, None, page_size=5)
    assert len(first.sessions) == 5 and first.next_cursor
    # A newer session appears between two page requests: the next page does not repeat.
    newer = [_meta(99, "2025-01-01T00:00:00Z"), *metas]
    second = list_page(newer, first.next_cursor, page_size=5)
    third = list_page(newer, second.next_cursor, page_size=5)
    ids = [s.session_id for page in (first, second, third) for s in page.sessions]
    assert ids == [m.session_id for m in metas]
    assert third.next_cursor is None
    assert decode_cursor(encode_cursor(("t", "i"))) == ("t", "i")
    for bad in ("", "@@@", encode_cursor(("t", "i"))[:-3] + "A"):
        with pytest.raises(RequestError):
            decode_cursor(bad)


def test_tool_updates_and_replay_closes_open_calls():
    diff = Diff(path="/w/a.tf", old_text=None, new_text="x")
    started = to_update(ToolCallStarted("c1", "weird_tool", "weird_tool", "nonsense"))
    assert (started.kind, started.status) == ("other", "in_progress")
    result = to_update(ToolCallResult("c1", "write_file", "completed", "ok", None, diff))
    assert result.raw_output is None and [c.type for c in result.content] == ["content", "diff"]
    assert result.content[0].content.text == "ok"  # the text once, as content
    structured = to_update(ToolCallResult("c2", "bash", "completed", "ok", {"exit_code": 0}))
    assert structured.raw_output == {"exit_code": 0}
    assert to_update(TurnEnded("end_turn", Usage())) is None

    events = [
        UserMessage("hi"),
        ToolCallStarted("c2", "read_file", "read_file", "read"),
        ToolCallInput("c2", "read_file", "read_file: a", "read", {}, [Location("/w/a.tf", 3)]),
    ]
    updates = [update for update, _ in replay_updates(events)]
    kinds = [u.session_update for u in updates]
    assert kinds == ["user_message_chunk", "tool_call", "tool_call_update", "tool_call_update"]
    assert (updates[2].locations[0].path, updates[2].locations[0].line) == ("/w/a.tf", 3)
    assert updates[-1].status == "failed"


async def test_huge_and_overlong_lines(tmp_path):
    reader = asyncio.StreamReader(limit=1024)
    sent: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> None:
            sent.append(data)

        async def drain(self) -> None:
            return None

        def close(self) -> None:
            return None

    transport = LineTransport(reader, Sink(), max_line=100_000)
    big = json.dumps({"jsonrpc": "2.0", "method": "n", "params": {"x": "y" * 50_000}}).encode()
    reader.feed_data(b"z" * 200_000 + b"\n" + big + b"\n")
    reader.feed_eof()
    message = await transport.receive()
    assert message["params"]["x"] == "y" * 50_000
    assert await transport.receive() is None
    (error,) = [json.loads(line) for line in sent]
    assert error["error"]["code"] == -32600 and "longer than" in error["error"]["data"]["details"]


async def test_serve_works_over_a_socket_pair(workspace, monkeypatch):
    monkeypatch.setenv("IAC_KERNEL_SCRIPT", str(MAIN_SCRIPT))
    manager = SessionManager(Settings.from_env(), holder="test", origin="acp")
    server_sock, client_sock = socket.socketpair()
    server_reader, server_writer = await asyncio.open_unix_connection(sock=server_sock)
    client_reader, client_writer = await asyncio.open_unix_connection(sock=client_sock)
    serving = asyncio.ensure_future(serve(server_reader, server_writer, manager))
    client = RecordingClient()
    conn = connect_to_agent(client, client_writer, client_reader, use_unstable_protocol=True)
    try:
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert answer.stop_reason == "end_turn"
        # SDK 0.11's client may handle the updates just after the answer.
        await wait_until(lambda: client.text(sid) == "Hello from the script.", "the text")
    finally:
        await conn.close()
        client_writer.close()
        await asyncio.wait_for(serving, 10)
        # The session outlives the connection; its owner closes it.
        assert sid in manager.sessions
        await manager.close_all()
