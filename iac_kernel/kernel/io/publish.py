"""A cell's own channels: IOPub output and stdin input requests for one execute_request,
with its parent header fixed when the cell starts.

ipykernel keeps "the current parent" in globals that a comm message (a widget click)
replaces while a cell is still running; every send here passes the cell's own parent
explicitly, so output never lands in another cell. Every string sent goes through
:func:`~iac_kernel.kernel.io.paths.sanitize` first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import zmq

from iac_kernel.kernel.io.paths import sanitize

#: ``send(msg_type, content)``: puts one message on IOPub (the kernel binds the parent).
Send = Callable[[str, dict[str, Any]], None]
#: ``envelope(msg_type)``: bytes a message of that type takes on IOPub besides its
#: content (topic, delimiter, signature, header, parent header, metadata).
Envelope = Callable[[str], int]
#: The envelope assumed when the sender cannot tell (a typical kernel's messages).
ENVELOPE = 700
#: ``pack(content)``: a message part as the sender's session packs it.
Pack = Callable[[Any], bytes]

#: Seconds between two polls of the stdin socket while an input request waits.
STDIN_POLL = 0.05

RED = "\x1b[0;31m"
RESET = "\x1b[0m"


class Publisher:
    """Sends display, stream and error messages for one cell."""

    def __init__(self, send: Send, envelope: Envelope | None = None, pack: Pack | None = None):
        self._send = send
        self._envelope = envelope
        self._pack = pack

    def envelope(self, msg_type: str) -> int:
        """Bytes a ``msg_type`` message costs on IOPub besides its content."""
        return self._envelope(msg_type) if self._envelope is not None else ENVELOPE

    def display_size(
        self, data: dict[str, Any], display_id: str, metadata: dict[str, Any] | None = None
    ) -> int:
        """Bytes of the content of :meth:`display` ``(data, display_id, metadata)`` as
        packed (``json.dumps``' default form when the sender did not say how it packs)."""
        content = {
            "data": sanitize(data),
            "metadata": sanitize(metadata or {}),
            "transient": {"display_id": display_id},
        }
        if self._pack is not None:
            return len(self._pack(content))
        return len(json.dumps(content, ensure_ascii=False).encode())

    def display(
        self,
        data: dict[str, Any],
        display_id: str | None = None,
        *,
        update: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """A ``display_data`` (or, with ``update``, an ``update_display_data``) message."""
        content: dict[str, Any] = {"data": sanitize(data), "metadata": sanitize(metadata or {})}
        if display_id is not None:
            content["transient"] = {"display_id": display_id}
        elif update:
            raise ValueError("update_display_data needs a display_id")
        self._send("update_display_data" if update else "display_data", content)

    def markdown(self, text: str, plain: str | None = None, display_id: str | None = None) -> None:
        """A Markdown display; its text/plain form drops the ``**`` and backtick marks."""
        self.display({"text/markdown": text, "text/plain": plain or plain_text(text)}, display_id)

    def result(
        self, data: dict[str, Any], execution_count: int, metadata: dict[str, Any] | None = None
    ) -> None:
        """An ``execute_result``: the cell's value (e.g. ``%config KEY``)."""
        content = {"data": data, "metadata": metadata or {}, "execution_count": execution_count}
        self._send("execute_result", content)

    def stream(self, text: str, name: str = "stdout") -> None:
        self._send("stream", {"name": name, "text": sanitize(text)})

    def error(self, ename: str, evalue: str) -> dict[str, Any]:
        """Show a short error (one line, no Python traceback); returns the reply content."""
        content = error_content(ename, sanitize(evalue))
        self._send("error", {k: content[k] for k in ("ename", "evalue", "traceback")})
        return content


def plain_text(markdown: str) -> str:
    """Short Markdown notes as plain text (bold and code marks removed)."""
    return markdown.replace("**", "").replace("`", "")


def error_content(ename: str, evalue: str) -> dict[str, Any]:
    """An ``error`` reply body whose "traceback" is the one readable line."""
    return {
        "status": "error",
        "ename": ename,
        "evalue": evalue,
        "traceback": [f"{RED}{ename}{RESET}: {evalue}"],
    }


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
