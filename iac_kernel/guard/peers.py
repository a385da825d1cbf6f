"""Which process is at the other end of a connection to one of our servers, and whether
it runs in a bash call's sandbox.

The Jupyter server extension refuses an ACP WebSocket whose peer is sandboxed (defense
in depth: once a sandbox has its own network namespace it cannot connect at all). For a
unix socket the peer's pid comes from ``SO_PEERCRED``; for TCP on loopback, the peer's
socket is found in ``/proc/net/tcp`` / ``tcp6`` (its local address is our peer address)
and its holders in ``/proc/*/fd``. A process is sandboxed when it belongs to a call of
this process (:mod:`.callers`) or runs in another mount namespace that shows a guard
folder at :data:`~.sandbox.GUARD_MOUNT` (any agent's call, a kernel's included).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import struct

from iac_kernel.guard import callers
from iac_kernel.guard.sandbox import GUARD_MOUNT
from iac_kernel.peercred import peer_pid


def from_a_sandbox(sock: socket.socket) -> bool:
    """The peer of ``sock`` (a unix socket, or TCP from loopback) is a sandboxed process.
    A peer that cannot be found (another host, a pid namespace we cannot see) is not."""
    return any(sandboxed(pid) for pid in peer_pids(sock))


def peer_pids(sock: socket.socket) -> set[int]:
    """The processes holding the other end of ``sock`` (empty when unknown)."""
    if sock.family == socket.AF_UNIX:
        pid = peer_pid(sock)
        return {pid} if pid else set()
    try:
        peer, local = sock.getpeername(), sock.getsockname()
    except OSError:
        return set()
    if not ipaddress.ip_address(peer[0]).is_loopback and not _mapped_loopback(peer[0]):
        return set()
    inode = _inode(peer, local, sock.family)
    return holders(inode) if inode else set()


def _mapped_loopback(host: str) -> bool:
    address = ipaddress.ip_address(host)
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(mapped and mapped.is_loopback)


def _hex(address: tuple, family: int) -> str:
    """An (ip, port) as ``/proc/net/tcp*`` prints it (host-order 32-bit words)."""
    packed = socket.inet_pton(family, address[0])
    words = struct.unpack(f"<{len(packed) // 4}I", packed)
    return "".join(f"{w:08X}" for w in words) + f":{address[1]:04X}"


def _inode(peer: tuple, local: tuple, family: int) -> int | None:
    """The inode of the socket whose local address is ``peer`` and remote ``local``."""
    table = "/proc/net/tcp6" if family == socket.AF_INET6 else "/proc/net/tcp"
    want = (_hex(peer, family), _hex(local, family))
    with contextlib.suppress(OSError), open(table, encoding="ascii") as fh:
        next(fh, None)
        for line in fh:
            fields = line.split()
            if len(fields) > 9 and (fields[1], fields[2]) == want:
                return int(fields[9]) or None
    return None


def holders(inode: int) -> set[int]:
    """Every pid with a descriptor on socket ``inode`` (processes we may inspect)."""
    target = f"socket:[{inode}]"
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{name}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{name}/fd/{fd}") == target:
                        found.add(int(name))
                        break
    return found


def sandboxed(pid: int) -> bool:
    """``pid`` runs in a bash call's sandbox (see the module doc)."""
    if callers.from_a_call(pid):
        return True
    try:
        if os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
            return False
        return os.path.isdir(f"/proc/{pid}/root{GUARD_MOUNT}")
    except OSError:
        return False
