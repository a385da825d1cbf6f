"""Which processes belong to a running bash call (the shell and everything under it,
and the guarded programs the guard starts for it).

The kernel's own control channels (the ACP endpoint) ask :func:`from_a_call` about a
peer (its ``SO_PEERCRED`` pid) and refuse it when it runs inside a call: a tool call
must never steer the session that runs it, whatever it learned or reached.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from iac_kernel.guard.sandbox import GUARD_MOUNT, Layout
from iac_kernel.peercred import peer_pid

_ROOTS: set[int] = set()


def started(pid: int) -> None:
    """``pid`` (a call's shell or bwrap, or a guarded program) runs for a call."""
    _ROOTS.add(pid)


def ended(pid: int) -> None:
    _ROOTS.discard(pid)


def running() -> frozenset[int]:
    return frozenset(_ROOTS)


def parent_of(pid: int) -> int | None:
    """The parent pid from ``/proc`` (None when the process is gone or unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    return None


def from_a_call(pid: int) -> bool:
    """``pid`` is a call's process or one of its descendants (orphans inside a sandbox
    are adopted by the sandbox's own init, itself under the call's bwrap)."""
    if pid <= 0 or not os.path.isdir("/proc"):
        return False
    seen: set[int] = set()
    current: int | None = pid
    while current and current not in seen:
        if current in _ROOTS:
            return True
        seen.add(current)
        current = parent_of(current)
    return False


def same_call(conn: socket.socket, guard_dir: Path, layout: Layout | None) -> bool:
    """True when the peer of ``conn`` runs in the sandbox of the call whose guard folder
    is ``guard_dir`` (or a sibling the guard started): it sees that folder at
    GUARD_MOUNT. Another session's sandbox that can see this call's socket (another
    TMPDIR) sees its own there. Always true in reduced mode (``layout`` None)."""
    if layout is None:
        return True
    pid = peer_pid(conn)
    try:
        seen = os.stat(f"/proc/{pid}/root{GUARD_MOUNT}") if pid else None
        own = os.stat(guard_dir)
    except OSError:
        return False
    return seen is not None and (seen.st_dev, seen.st_ino) == (own.st_dev, own.st_ino)
