"""The process at the other end of a unix socket (``SO_PEERCRED``). A leaf module: the
guard's approval server and the egress proxy both check who connected."""

from __future__ import annotations

import socket
import struct


def peer_pid(conn: socket.socket) -> int | None:
    """The host PID of the process at the other end of a unix socket."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid = struct.unpack("3i", raw)[0]
    return pid if pid > 0 else None
