"""Logical ACP connections of the server's endpoint, which may outlive their WebSocket.

A :class:`Link` is what one ACP client sees as its connection: one agent, the turns it
started, the questions it was asked. It is served on one WebSocket at a time. A
resumable link (its client sent ``Acp-Received`` with the upgrade, see
:mod:`iac_kernel.acp.remote.resume`) keeps its frames numbered in an outbox; when its socket
drops it waits :attr:`Links.window` seconds for the client to come back with its
cursor, and meanwhile its turns go on and its questions stay open. A link whose socket
closes cleanly (code 1000), or that is not resumable, ends at once: its turns are
cancelled and the sessions only it had open are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from iac_kernel.acp.remote.resume import (
    ACK_EVERY,
    MAX_OUTBOX_BYTES,
    NORMAL_CLOSE,
    Outbox,
    ack_count,
    ack_frame,
)
from iac_kernel.server.stream import FrameReader

log = logging.getLogger(__name__)

#: Seconds a dropped resumable link waits for its client (the bridge's own default).
WINDOW = 300.0

Serve = Callable[["Link"], Awaitable[None]]


class Socket(Protocol):
    """What a link needs of its WebSocket (tornado's ``WebSocketHandler``)."""

    def write_message(self, message: str, binary: bool = False) -> Any: ...

    def close(self, code: int | None = None, reason: str | None = None) -> None: ...


class Link:
    """One logical connection: the reader/writer pair its ACP server runs on."""

    def __init__(self, links: Links, user: str, resumable: bool) -> None:
        self.id = str(uuid.uuid4())
        self.user = user
        self.resumable = resumable
        self.frames = FrameReader()
        self.outbox = Outbox()
        #: Frames received from the client (its frames' cursor).
        self.received = 0
        self.socket: Socket | None = None
        self.ended = False
        self.task: asyncio.Task[None] | None = None
        self._links = links
        self._acked = 0
        self._last: Any = None
        self._expiry: asyncio.TimerHandle | None = None
        #: Answers awaited by id (the HTTP profile's ``initialize``): id -> (number, text).
        self._awaited: dict[Any, asyncio.Future[tuple[int, str]]] = {}

    # -- the writer the ACP server writes to -----------------------------------------

    def write(self, data: bytes) -> None:
        if self.ended:
            raise ConnectionError("the connection ended")
        for line in data.split(b"\n"):
            if not line:
                continue
            text = line.decode("utf-8", "replace")
            number = self.outbox.add(text) if self.resumable else 0
            if self._awaited:
                self._answered(number, text)
            self._send(text)
        if self.outbox.size > MAX_OUTBOX_BYTES:
            log.warning("ACP connection %s: its client stayed away too long", self.id)
            self.end()

    async def drain(self) -> None:
        last, self._last = self._last, None
        if last is None:
            return
        try:
            await last
        except Exception as exc:  # tornado's WebSocketClosedError
            if not self.resumable:
                raise ConnectionError(f"the WebSocket is closed: {exc}") from None

    def close(self) -> None:
        """The ACP server is done with the link (it ended)."""
        self.end()

    def answer_to(self, request_id: Any) -> asyncio.Future[tuple[int, str]]:
        """The number and text of the frame that will answer ``request_id``."""
        future = asyncio.get_running_loop().create_future()
        self._awaited[request_id] = future
        return future

    def _answered(self, number: int, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            return
        if isinstance(message, dict) and "method" not in message:
            future = self._awaited.pop(message.get("id"), None)
            if future is not None and not future.done():
                future.set_result((number, text))

    def _send(self, text: str) -> None:
        socket = self.socket
        if socket is None:
            if not self.resumable:
                raise ConnectionError("the WebSocket is closed")
            return  # kept in the outbox for the client's return
        try:
            self._last = socket.write_message(text)
        except Exception as exc:  # tornado's WebSocketClosedError
            self.detach(socket, clean=False)
            if not self.resumable:
                raise ConnectionError(f"the WebSocket is closed: {exc}") from None

    # -- sockets ---------------------------------------------------------------------

    def attach(self, socket: Socket, client_has: int, serve: Serve) -> None:
        """Serve the link on ``socket``; resend what the client does not have."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        self.socket = socket
        if self.task is None:
            self.start(serve)
            return
        self.outbox.ack(client_has)
        for text in self.outbox.after(client_has) or []:
            self._send(text)
        log.info("ACP connection %s resumed after frame %d", self.id, client_has)

    def start(self, serve: Serve) -> None:
        """Keep the link and start its ACP server (a link with no socket yet waits for
        one for the window)."""
        self._links.keep(self)
        self.task = asyncio.ensure_future(serve(self))
        if self.socket is None:
            self._expiry = asyncio.get_running_loop().call_later(self._links.window, self.end)

    def take_over(self) -> None:
        """A new socket is about to serve this link: the old one is not listened to."""
        old = self.socket
        if old is not None:
            self.detach(old, clean=False)  # the window runs until the new one attaches
            with contextlib.suppress(Exception):
                old.close()

    def detach(self, socket: Socket, *, clean: bool) -> None:
        """``socket`` closed; a clean close or a link that cannot resume ends now."""
        if self.socket is not socket:
            return
        self.socket = None
        self._last = None
        if clean or not self.resumable:
            self.end()
        elif not self.ended:
            log.info("ACP connection %s dropped; kept %gs", self.id, self._links.window)
            loop = asyncio.get_running_loop()
            self._expiry = loop.call_later(self._links.window, self.end)

    def feed(self, socket: Socket, text: str) -> None:
        """A text frame from ``socket`` (ignored unless it is the link's socket)."""
        if socket is not self.socket or self.ended:
            return
        if not self.post(text):
            return
        if self.resumable and self.received - self._acked >= ACK_EVERY:
            self._acked = self.received
            with contextlib.suppress(Exception):
                socket.write_message(ack_frame(self.received))

    def post(self, text: str) -> bool:
        """A frame from the client (whichever way it came); False for an
        acknowledgement, which is not counted."""
        count = ack_count(text)
        if count is not None:
            self.outbox.ack(count)
            return False
        self.received += 1
        self.frames.feed(text)
        return True

    def can_resume(self, client_has: int) -> bool:
        return self.resumable and not self.ended and self.outbox.after(client_has) is not None

    def end(self) -> None:
        """End the link: its ACP server sees the end of its input and stops."""
        if self.ended:
            return
        self.ended = True
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        self.frames.end()
        self._links.forget(self)
        socket, self.socket = self.socket, None
        if socket is not None:
            with contextlib.suppress(Exception):
                socket.close(NORMAL_CLOSE)


class Links:
    """The server's logical connections, by id."""

    def __init__(self, window: float = WINDOW) -> None:
        self.window = window
        self._links: dict[str, Link] = {}

    def new(self, user: str, *, resumable: bool) -> Link:
        """A link, kept once its first socket opens."""
        return Link(self, user, resumable)

    def keep(self, link: Link) -> None:
        self._links[link.id] = link

    def find(self, link_id: str | None, client_has: int) -> Link | None:
        """The link to resume, if it is still held and can resend what the client lacks.

        The id is the capability (122 random bits, given only to the client in the
        upgrade's answer, and presented only by a client the server authenticated): a
        plain Jupyter server names each token login anew, so names cannot be compared.
        """
        link = self._links.get(link_id or "")
        return link if link is not None and link.can_resume(client_has) else None

    def get(self, link_id: str | None) -> Link | None:
        link = self._links.get(link_id or "")
        return link if link is not None and not link.ended else None

    def forget(self, link: Link) -> None:
        if self._links.get(link.id) is link:
            del self._links[link.id]

    async def end_all(self) -> None:
        """End every link and wait for their servers to stop."""
        links = list(self._links.values())
        for link in links:
            link.end()
        tasks = [link.task for link in links if link.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=30)
