"""Which processes belong to a running bash call (the shell and everything under it,
and the guarded programs the guard starts for it).

The kernel's own control channels (the ACP endpoint) ask :func:`from_a_call` about a
peer (its ``SO_PEERCRED`` pid) and refuse it when it runs inside a call: a tool call
must never steer the session that runs it, whatever it learned or reached.
"""

from __future__ import annotations

import contextlib
import os

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
