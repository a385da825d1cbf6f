"""The kernel's messages as packed: compact JSON (kernel/wire.py), measured as received."""

from __future__ import annotations

import datetime
import json

from jupyter_client.session import Session, json_packer

from iac_kernel.kernel.testing import WIRE_SIZE, measure_frames, wire_bytes
from iac_kernel.kernel.wire import compact_packer, use_compact_json


def test_compact_json_reads_the_same_and_is_smaller() -> None:
    message = {
        "header": {"msg_id": "a_1_2", "date": datetime.datetime(2026, 12, 6, tzinfo=datetime.UTC)},
        "content": {"data": {"text/markdown": 'say "hi"\n…'}, "metadata": {}},
    }
    packed = compact_packer(message)
    assert json.loads(packed) == json.loads(json_packer(message))
    assert b", " not in packed and b'": ' not in packed
    assert len(json_packer(message)) - len(packed) == 10  # 7 colons and 3 commas


def test_only_the_plain_json_packer_is_replaced() -> None:
    """orjson's packer (jupyter_client's default when orjson is installed, as it is
    with this package) is compact already; pickle is left alone."""
    plain, pickled = Session(packer="json"), Session(packer="pickle")
    fast = Session(packer="orjson")
    for session in (plain, pickled, fast):
        use_compact_json(session)
    assert plain.pack is compact_packer
    assert pickled.pack is not compact_packer and fast.pack is not compact_packer
    message = {"header": {"msg_id": "a"}, "content": {"data": {"text/plain": "x"}}}
    assert b", " not in fast.pack(message) and b'": ' not in fast.pack(message)


def test_received_messages_are_measured_as_sent() -> None:
    sender, receiver = Session(key=b"k", packer="json"), Session(key=b"k", packer="json")
    use_compact_json(sender)
    measure_frames(receiver)
    message = sender.msg("update_display_data", {"data": {"text/plain": "x"}, "metadata": {}})
    frames = sender.serialize(message)
    received = receiver.deserialize(receiver.feed_identities(frames)[1])
    assert received[WIRE_SIZE] == sum(len(f) for f in frames)
    topic = len("kernel.") + 36 + 1 + len("update_display_data")
    assert wire_bytes(receiver, received) == received[WIRE_SIZE] + topic
    # Packed again by the receiver (default JSON, with spaces) it would count more.
    del received[WIRE_SIZE]
    assert wire_bytes(receiver, received) > sum(len(f) for f in frames) + topic
