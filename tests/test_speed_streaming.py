"""Cheap streaming, checked for correctness (timing is in bench/): text and thinking
deltas become the same ``session/update`` params as through the SDK's models, deltas of
one loop iteration go out as one chunk in event order, and the transport writes
everything sent in one loop iteration with one ``write``, in order."""

from __future__ import annotations

import asyncio
import json

import pytest
from acp.schema import SessionNotification
from acp.utils import serialize_params

from iac_kernel.acp.protocol.updates import chunk_kind, chunk_update, to_update
from iac_kernel.acp.session.turn import TurnRelay
from iac_kernel.acp.wire import transport as transport_mod
from iac_kernel.acp.wire.channel import ClientChannel
from iac_kernel.acp.wire.connection import Connection, after_answer
from iac_kernel.acp.wire.transport import LineTransport
from iac_kernel.events import TextDelta, ThinkingDelta, ToolCallStarted, UserMessage
from test_acp_support import RecordingChannel


@pytest.mark.parametrize(
    "event",
    [TextDelta("Hello"), TextDelta(""), TextDelta('ünï\ncode ✓ "q"'), ThinkingDelta("hmm")],
)
def test_chunk_update_is_what_the_sdk_models_serialize_to(event):
    model = serialize_params(SessionNotification(session_id="s1", update=to_update(event)))
    fast = {"sessionId": "s1", "update": chunk_update(chunk_kind(event), event.text)}
    assert fast == model
    # Same bytes on the wire too (key order included).
    assert json.dumps(fast) == json.dumps(model)


def test_chunks_only_for_deltas():
    assert chunk_kind(UserMessage("hi")) is None
    assert chunk_kind(ToolCallStarted("c1", "bash", "bash: ls", "execute")) is None


class Sink:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


def _note(i: int) -> dict:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"i": i}}


async def test_one_write_per_loop_iteration_in_order():
    sink = Sink()
    transport = LineTransport(asyncio.StreamReader(), sink)
    for i in range(100):
        await transport.send(_note(i))
    assert sink.writes == []  # queued, not yet written
    await asyncio.sleep(0)
    assert len(sink.writes) == 1
    lines = sink.writes[0].splitlines()
    assert [json.loads(line)["params"]["i"] for line in lines] == list(range(100))
    await transport.send(_note(100))
    await transport.close()  # close writes what is still queued
    assert json.loads(sink.writes[-1])["params"]["i"] == 100


async def test_big_output_is_written_at_once(monkeypatch):
    monkeypatch.setattr(transport_mod, "FLUSH_BYTES", 1000)
    sink = Sink()
    transport = LineTransport(asyncio.StreamReader(), sink)
    await transport.send({"jsonrpc": "2.0", "method": "n", "params": {"x": "y" * 2000}})
    assert len(sink.writes) == 1


async def test_deferred_work_follows_its_answer():
    sink, reader = Sink(), asyncio.StreamReader()

    async def handler(method: str, params: object, is_notification: bool) -> dict:
        async def later() -> None:
            await conn.send_notification("session/update", {"i": 2})

        after_answer(later)
        await conn.send_notification("session/update", {"i": 1})
        return {}

    conn = Connection(handler, LineTransport(reader, sink))
    conn.listen()
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 5, "method": "m", "params": {}}\n')
    for _ in range(5):
        await asyncio.sleep(0)
    reader.feed_eof()
    await conn.close()
    sent = [json.loads(line) for chunk in sink.writes for line in chunk.splitlines()]
    assert [m.get("params", {}).get("i", m.get("id")) for m in sent] == [1, 5, 2]
    with pytest.raises(RuntimeError):  # only a request's handler has an answer to follow
        after_answer(later_nothing)


async def later_nothing() -> None:
    return None


async def test_a_failed_write_surfaces_on_the_next_send():
    class Broken(Sink):
        def write(self, data: bytes) -> None:
            raise BrokenPipeError("gone")

    transport = LineTransport(asyncio.StreamReader(), Broken())
    await transport.send(_note(1))
    await asyncio.sleep(0)
    with pytest.raises(ConnectionError):
        await transport.send(_note(2))


def _texts(sent: list[dict]) -> list[tuple[str, str]]:
    def text(update: dict) -> str:
        content = update.get("content")
        return content.get("text", "") if isinstance(content, dict) else ""

    return [(u["sessionUpdate"], text(u)) for u in sent]


async def test_deltas_of_one_loop_iteration_go_out_as_one_chunk():
    channel = RecordingChannel()
    relay = TurnRelay(channel, "s1")
    for word in ("Plan: ", "3 to ", "add."):
        await relay(TextDelta(word))
    assert channel.sent == []  # held until the loop turns
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert _texts(channel.sent) == [("agent_message_chunk", "Plan: 3 to add.")]
    await relay(TextDelta(" Done"))
    for _ in range(3):
        await asyncio.sleep(0)
    assert _texts(channel.sent)[-1] == ("agent_message_chunk", " Done")


async def test_held_text_goes_before_any_other_update_and_at_the_end():
    channel = RecordingChannel()
    relay = TurnRelay(channel, "s1")
    await relay(ThinkingDelta("Check the "))
    await relay(ThinkingDelta("state."))
    await relay(TextDelta("Running "))
    await relay(TextDelta("plan."))
    await relay(ToolCallStarted("c1", "bash", "bash: terraform plan", "execute"))
    await relay(TextDelta("After."))
    await relay.finish()  # what the prompt answer waits for (it also closes c1)
    assert [k for k, _ in _texts(channel.sent)] == [
        "agent_thought_chunk", "agent_message_chunk", "tool_call", "agent_message_chunk",
        "tool_call_update",
    ]  # fmt: skip
    texts = [t for _, t in _texts(channel.sent)][:4]
    assert texts == ["Check the state.", "Running plan.", "", "After."]
    for _ in range(3):  # the scheduled sends find nothing left: nothing is sent twice
        await asyncio.sleep(0)
    assert len(channel.sent) == 5


async def test_a_slow_client_holds_the_stream_back():
    """Held text keeps back-pressure: while a send waits for the client to read, the
    next delta waits too (the model stream is not read ahead without bound)."""
    release = asyncio.Event()

    class SlowChannel(RecordingChannel):
        async def forward_update(self, params: dict) -> None:
            self.sent.append(params["update"])
            await release.wait()

    channel = SlowChannel()
    relay = TurnRelay(channel, "s1")
    await relay(TextDelta("one"))
    await asyncio.sleep(0)  # the send starts and blocks on the client
    assert len(channel.sent) == 1
    second = asyncio.ensure_future(relay(TextDelta("two")))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not second.done()
    release.set()
    await asyncio.wait_for(second, 5)
    await relay.finish()
    assert _texts(channel.sent) == [("agent_message_chunk", "one"), ("agent_message_chunk", "two")]


@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        ('ünï\ncode ✓ "q" \\ \x00 \u2028', 'ünï\ncode ✓ "q" \\ \x00 \u2028'),  # orjson's way
        ("bad \udcff byte", "bad ? byte"),  # a lone surrogate: json's way, as "?"
        (2**70, 2**70),  # beyond 64 bits
        ({1: "a"}, {"1": "a"}),  # a key that is not a string
        (float("nan"), None),
    ],
)
async def test_every_message_is_one_line_of_valid_json(value, decoded):
    sink = Sink()
    transport = LineTransport(asyncio.StreamReader(), sink)
    await transport.send({"jsonrpc": "2.0", "method": "session/update", "params": {"v": value}})
    await transport.close()
    data = b"".join(sink.writes)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data)["params"] == {"v": decoded}


async def test_notifications_sent_together_are_the_lines_sent_one_by_one():
    """A replay's updates go out through ``send_notifications``: the same bytes, in
    order, as ``send`` of each, written in chunks of about FLUSH_BYTES."""
    params = [{"sessionId": "s", "i": i, "text": f"{i} ✓ " * (i % 700)} for i in range(3000)]
    one, together = Sink(), Sink()
    single = LineTransport(asyncio.StreamReader(), one)
    for each in params:
        await single.send({"jsonrpc": "2.0", "method": "session/update", "params": each})
    await single.close()
    batch = LineTransport(asyncio.StreamReader(), together)
    await batch.send(_note(-1))  # queued before: still first
    await batch.send_notifications("session/update", iter(params))
    await batch.close()
    assert b"".join(together.writes) == json.dumps(_note(-1)).replace(
        " ", ""
    ).encode() + b"\n" + b"".join(one.writes)
    assert len(together.writes) > 5
    assert max(map(len, together.writes)) < 2 * transport_mod.FLUSH_BYTES


async def test_a_client_gone_during_a_replay_stops_it_without_an_error():
    class Broken(Sink):
        def write(self, data: bytes) -> None:
            raise BrokenPipeError("gone")

    transport = LineTransport(asyncio.StreamReader(), Broken())
    channel = ClientChannel(Connection(None, transport))  # type: ignore[arg-type]
    taken = []

    def updates():
        for i in range(10_000):
            taken.append(i)
            yield {"sessionId": "s", "update": {"text": "x" * 1000}}

    await channel.forward_updates(updates())
    assert len(taken) < 10_000  # stopped at the first failed write
    await channel.forward_updates(updates())  # and again: dropped quietly
