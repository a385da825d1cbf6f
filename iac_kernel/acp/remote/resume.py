"""Resumable connections: numbered frames and delivery cursors, both sides of the link.

A logical ACP connection on the server's WebSocket outlives the socket it started on.
Each side numbers the frames it sends, 1, 2, 3... (implicitly: the n-th counted text
frame of the connection in that direction has number n; nothing is added to the
JSON-RPC messages) and keeps them in an :class:`Outbox` until the peer acknowledges
them. Each side's cursor is the number of frames it has received.

- A client asks for a resumable connection by sending ``Acp-Received: 0`` with its
  upgrade; the answer's ``Acp-Connection-Id`` names the connection.
- After a drop it upgrades again with ``Acp-Connection-Id`` and ``Acp-Received: N``
  (the frames it has): if the server still holds that connection, the answer carries the
  same id and ``Acp-Received: M`` (the frames the server has); the server resends its
  frames after N, the client its frames after M. Another id in the answer means a new
  connection (the old one ended).
- Acknowledgements are notifications that are not counted:
  ``{"jsonrpc": "2.0", "method": "_iac/received", "params": {"count": N}}``, sent every
  :data:`ACK_EVERY` frames received. The outboxes drop what the peer has.

No lower layer imports this module's users: it has no I/O of its own.
"""

from __future__ import annotations

import json
from collections import deque

CONNECTION_HEADER = "Acp-Connection-Id"
RECEIVED_HEADER = "Acp-Received"
ACK_METHOD = "_iac/received"
#: Frames received between two acknowledgements.
ACK_EVERY = 16
#: Largest outbox kept (bytes): a peer that stays away longer loses the connection.
MAX_OUTBOX_BYTES = 64 * 1024 * 1024
#: Close code of a connection ended on purpose (not kept for resumption).
NORMAL_CLOSE = 1000


def ack_frame(count: int) -> str:
    """The acknowledgement of ``count`` frames (not counted itself)."""
    return json.dumps(
        {"jsonrpc": "2.0", "method": ACK_METHOD, "params": {"count": count}},
        separators=(",", ":"),
    )


def ack_count(text: str) -> int | None:
    """The count of an acknowledgement frame, or ``None`` for any other frame."""
    if ACK_METHOD not in text[:80]:
        return None
    try:
        message = json.loads(text)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != ACK_METHOD or "id" in message:
        return None
    count = (message.get("params") or {}).get("count")
    return count if type(count) is int and count >= 0 else None


def parse_count(value: str | None) -> int | None:
    """A cursor header's value (a number of frames), ``None`` if absent or not one."""
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())


class Outbox:
    """Frames sent on a connection, numbered, kept until the peer has them."""

    def __init__(self) -> None:
        #: Number of the last frame sent (0 before the first), and the last the peer has.
        self.sent = 0
        self.acked = 0
        self.size = 0
        self._frames: deque[tuple[int, str]] = deque()

    def add(self, text: str) -> int:
        """Number and keep ``text``; its number."""
        self.sent += 1
        self._frames.append((self.sent, text))
        self.size += len(text)
        return self.sent

    def ack(self, count: int) -> None:
        """The peer has every frame up to ``count``."""
        self.acked = max(self.acked, min(count, self.sent))
        while self._frames and self._frames[0][0] <= count:
            _, text = self._frames.popleft()
            self.size -= len(text)

    def after(self, count: int) -> list[str] | None:
        """The frames after ``count`` to send again, or ``None`` when they cannot be
        (some were dropped already, or ``count`` is beyond what was sent)."""
        if count > self.sent:
            return None
        first = self._frames[0][0] if self._frames else self.sent + 1
        if count + 1 < first:
            return None
        return [text for number, text in self._frames if number > count]
