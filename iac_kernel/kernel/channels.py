"""A cell's own channels: IOPub messages and stdin input requests, both bound to the
cell's parent header (fixed when the cell starts; see :mod:`~iac_kernel.kernel.publish`)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import zmq

from iac_kernel.kernel.publish import Envelope, Send

#: Seconds between two polls of the stdin socket while an input request waits.
STDIN_POLL = 0.05


def iopub_sender(kernel: Any, parent: dict[str, Any]) -> Send:
    """``send(msg_type, content)`` on the kernel's IOPub socket with ``parent``."""

    def send(msg_type: str, content: dict[str, Any]) -> None:
        assert kernel.session is not None
        kernel.session.send(
            kernel.iopub_socket,
            msg_type,
            content,
            parent=parent,
            ident=kernel._topic(msg_type),
        )

    return send


def iopub_envelope(kernel: Any, parent: dict[str, Any]) -> Envelope:
    """``envelope(msg_type)``: the bytes a message of that type with ``parent`` takes on
    the kernel's IOPub besides its content, measured once per type by signing an empty
    one as :func:`iopub_sender` would send it."""
    sizes: dict[str, int] = {}

    def envelope(msg_type: str) -> int:
        if msg_type not in sizes:
            assert kernel.session is not None
            session = kernel.session
            message = session.msg(msg_type, {}, parent=parent)
            frames = session.serialize(message, ident=kernel._topic(msg_type))
            # The counter in msg_id grows a digit now and then: a few bytes of margin.
            sizes[msg_type] = sum(len(f) for f in frames) - len(session.pack({})) + 4
        return sizes[msg_type]

    return envelope


async def input_request(kernel: Any, prompt: str, parent: dict[str, Any], ident: Any) -> str:
    """An input_request answered on the stdin channel, awaited without blocking the loop
    (so widget comms and interrupts still get through)."""
    assert kernel.session is not None
    socket = kernel.stdin_socket
    with contextlib.suppress(zmq.ZMQError):
        while socket.poll(0):
            socket.recv_multipart(zmq.NOBLOCK)  # stale replies
    content = {"prompt": prompt, "password": False}
    kernel.session.send(socket, "input_request", content, parent, ident=ident)
    while True:
        if socket.poll(0):
            try:
                _ident, reply = kernel.session.recv(socket, mode=zmq.NOBLOCK)
            except Exception:
                kernel.log.warning("bad message on stdin", exc_info=True)
                reply = None
            if reply is not None and reply["header"]["msg_type"] == "input_reply":
                value = str(reply["content"].get("value", ""))
                return "" if value == "\x04" else value
        await asyncio.sleep(STDIN_POLL)
