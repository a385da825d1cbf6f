"""The processes of bash calls: which belong to a running call (its shell, everything
under it, the guarded programs the guard starts for it), who is at the other end of a
connection, which others run beside one asking the guard, and signalling a call's
process group without killing its sandbox first.

The agent's own control channels ask whether a peer runs in a call's sandbox and refuse
it: the kernel's ACP endpoint (:func:`from_a_call`, :func:`sandboxed`: a tool call must
never steer the session that runs it, whatever it learned or reached) and the Jupyter
server extension's WebSocket (:func:`from_a_sandbox`; defense in depth: a sandbox with
its own network namespace cannot connect at all). For a unix socket the peer's pid
comes from ``SO_PEERCRED``; for TCP on loopback, the peer's socket is found in
``/proc/net/tcp`` / ``tcp6`` (its local address is our peer address) and its holders in
``/proc/*/fd``.

A sandboxed command's process group holds ``bwrap`` (the group leader), bwrap's init
inside the PID namespace, and the command's processes. bwrap dies on SIGINT/SIGTERM,
which would SIGKILL everything inside; so graceful signals go to the command's
processes only (:func:`signal_group`).

The guard reads git's configuration before a push, and git reads it again when it runs;
a process of the same call running meanwhile (``(... rewrite .git/config ...) &``) can
flip it in between (:func:`others_alive`): the call's processes are those in its PID
namespace (bwrap ``--unshare-pid``). Programs the guard already started run in sibling
sandboxes (their own namespaces) and are not counted; their launchers, which wait for
them inside the call, are.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import struct
from collections.abc import Container
from pathlib import Path

from iac_kernel.egress.inside import is_forwarder
from iac_kernel.guard.sandbox.bwrap import GUARD_MOUNT, Layout
from iac_kernel.peercred import peer_pid

_ROOTS: set[int] = set()


def started(pid: int) -> None:
    """``pid`` (a call's shell or bwrap, or a guarded program) runs for a call."""
    _ROOTS.add(pid)


def ended(pid: int) -> None:
    _ROOTS.discard(pid)


def parent_of(pid: int) -> int | None:
    """The parent pid from ``/proc`` (None when the process is gone or unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    return None


def nearest(pid: int | None, pids: Container[int]) -> int | None:
    """The first of ``pid`` and its ancestors that is in ``pids``, or None."""
    seen: set[int] = set()
    current = pid
    while current and current not in seen:
        if current in pids:
            return current
        seen.add(current)
        current = parent_of(current)
    return None


def from_a_call(pid: int) -> bool:
    """``pid`` is a call's process or one of its descendants (orphans inside a sandbox
    are adopted by the sandbox's own init, itself under the call's bwrap)."""
    if pid <= 0 or not os.path.isdir("/proc"):
        return False
    return nearest(pid, _ROOTS) is not None


def same_call(pid: int | None, guard_dir: Path, layout: Layout | None) -> bool:
    """True when the process ``pid`` runs in the sandbox of the call whose guard folder
    is ``guard_dir`` (or a sibling the guard started): it sees that folder at
    GUARD_MOUNT. Another session's sandbox that can see this call's socket (another
    TMPDIR) sees its own there. Always true in reduced mode (``layout`` None)."""
    if layout is None:
        return True
    try:
        seen = os.stat(f"/proc/{pid}/root{GUARD_MOUNT}") if pid else None
        own = os.stat(guard_dir)
    except OSError:
        return False
    return seen is not None and (seen.st_dev, seen.st_ino) == (own.st_dev, own.st_ino)


def from_a_sandbox(sock: socket.socket) -> bool:
    """The peer of ``sock`` (a unix socket, or TCP from loopback) is a sandboxed process.
    A peer that cannot be found (another host, a pid namespace we cannot see) is not."""
    return any(sandboxed(pid) for pid in peer_pids(sock))


def sandboxed(pid: int) -> bool:
    """``pid`` runs in a bash call's sandbox: it belongs to a call of this process, or
    runs in another mount namespace that shows a guard folder at GUARD_MOUNT (any
    agent's call, a kernel's included)."""
    if from_a_call(pid):
        return True
    try:
        if os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
            return False
        return os.path.isdir(f"/proc/{pid}/root{GUARD_MOUNT}")
    except OSError:
        return False


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
    for pid in _pids():
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        found.add(pid)
                        break
    return found


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command (state, parent, group ...), or
    None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
    except OSError:
        return None


def _namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _waiting(pid: int) -> bool:
    """Every thread of ``pid`` is blocked waiting for a child (``wait``)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        return bool(tasks) and all(
            Path(f"/proc/{pid}/task/{t}/wchan").read_text().strip() == "do_wait" for t in tasks
        )
    except OSError:
        return False


def others_alive(pid: int | None) -> list[int] | None:
    """Processes in ``pid``'s PID namespace that could act while ``pid`` waits: live ones
    other than ``pid`` and its ancestors, and ancestors not blocked in ``wait`` (a shell
    that ran ``git push &`` and goes on with builtins); None when that cannot be told
    (the caller then assumes there are some)."""
    namespace = _namespace(pid) if pid is not None else None
    if pid is None or namespace is None:
        return None
    ancestors, current = set(), pid
    while current > 0 and current not in ancestors and _namespace(current) == namespace:
        ancestors.add(current)
        fields = _stat(current)
        if fields is None:
            break
        current = int(fields[1])
    others = [a for a in ancestors if a != pid and not _waiting(a)]
    for other in _pids():
        if other in ancestors or _namespace(other) != namespace:
            continue
        fields = _stat(other)
        if fields is not None and fields[0] not in (b"Z", b"X") and not is_forwarder(other):
            others.append(other)
    return others


def group_members(pgid: int) -> list[tuple[int, int]]:
    """(pid, parent pid) of every live (non-zombie) process in group ``pgid``."""
    members = []
    for pid in _pids():
        fields = _stat(pid)
        if fields and len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append((pid, int(fields[1])))
    return members


def signal_group(pgid: int, sig: int, sandboxed: bool) -> None:
    """Send ``sig`` to group ``pgid``; when ``sandboxed``, spare bwrap and its init."""
    if not sandboxed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        return
    for pid, ppid in group_members(pgid):
        if pid != pgid and ppid != pgid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
