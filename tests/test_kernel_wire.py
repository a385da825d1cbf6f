"""The kernel's messages measured as received (the harness's ``wire_bytes``, which
``bench/bench_iopub.py`` reports)."""

from __future__ import annotations

from jupyter_client.session import Session

from kernel_harness import WIRE_SIZE, measure_frames, wire_bytes


def test_the_kernels_packer_is_compact_json() -> None:
    """jupyter_client packs with orjson (a dependency of this package): no spaces."""
    message = {"header": {"msg_id": "a"}, "content": {"data": {"text/plain": "x"}}}
    packed = Session().pack(message)
    assert b", " not in packed and b'": ' not in packed


def test_received_messages_are_measured_as_sent() -> None:
    sender, receiver = Session(key=b"k", packer="json"), Session(key=b"k", packer="json")
    measure_frames(receiver)
    message = sender.msg("update_display_data", {"data": {"text/plain": "x"}, "metadata": {}})
    frames = sender.serialize(message)
    received = receiver.deserialize(receiver.feed_identities(frames)[1])
    assert received[WIRE_SIZE] == sum(len(f) for f in frames)
    topic = len("kernel.") + 36 + 1 + len("update_display_data")
    assert wire_bytes(receiver, received) == received[WIRE_SIZE] + topic
