"""Process groups: who is in one, and signalling it without killing the sandbox first.

A sandboxed command's group holds ``bwrap`` (the group leader), bwrap's init inside the
PID namespace, and the command's processes. bwrap dies on SIGINT/SIGTERM, which would
SIGKILL everything inside; so graceful signals go to the command's processes only.
"""

from __future__ import annotations

import contextlib
import os


def group_members(pgid: int) -> list[tuple[int, int]]:
    """(pid, parent pid) of every live (non-zombie) process in group ``pgid``."""
    members = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return members
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append((int(name), int(fields[1])))
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
