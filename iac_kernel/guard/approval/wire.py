"""The approval server's end of the launcher's socket (launcher.py is the other end).

A launcher sends a 4-byte length, then its request as JSON, with its stdio descriptors
attached to the first bytes; the server answers with JSON lines (``started``, then
``exit`` or ``refused``) and reads relayed signals as JSON lines.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator

MAX_REQUEST = 8 * 1024 * 1024


async def read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """One launcher's request (argv, cwd, env normalized to strings) and its descriptors."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(conn.fileno(), lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(conn.fileno())
    header, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
    while len(header) < 4:
        more = await loop.sock_recv(conn, 4 - len(header))
        if not more:
            raise ValueError("short header")
        header += more
    (length,) = struct.unpack("!I", header)
    if length > MAX_REQUEST:
        raise ValueError("request too large")
    data = b""
    while len(data) < length:
        chunk = await loop.sock_recv(conn, min(65536, length - len(data)))
        if not chunk:
            raise ValueError("short request")
        data += chunk
    request = json.loads(data)
    if not isinstance(request.get("argv"), list) or not request["argv"]:
        raise ValueError("argv missing")
    request["argv"] = [str(a) for a in request["argv"]]
    request["env"] = {str(k): str(v) for k, v in dict(request.get("env") or {}).items()}
    request["cwd"] = str(request.get("cwd") or "/")
    return request, list(fds)


async def send(conn: socket.socket, message: dict) -> None:
    """One JSON line to the launcher."""
    await asyncio.get_running_loop().sock_sendall(conn, json.dumps(message).encode() + b"\n")


def gone_or_signalled(conn: socket.socket) -> bool:
    """True when the launcher hung up or relayed a signal while its question was open."""
    try:
        conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return True  # EOF, or a relayed signal waiting to be read


async def relayed_signals(conn: socket.socket) -> AsyncIterator[int]:
    """The signal numbers the launcher relays, until it hangs up."""
    loop = asyncio.get_running_loop()
    buffer = b""
    while True:
        try:
            chunk = await loop.sock_recv(conn, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                signum = int(json.loads(line)["signal"])
            except (ValueError, TypeError, KeyError):
                continue
            yield signum
