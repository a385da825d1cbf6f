"""Session locks that hold no file descriptor while the session is open.

``<id>.lock`` names the one process that writes a session: pid, host, process start
time, a random token, who (``holder``) and since when. Taking or releasing it happens
under a short ``flock`` of that file (the fd is closed right after), so 10,000 open
sessions cost no descriptors. A lock whose process is gone (killed with SIGKILL, say, or
a zombie, or a pid reused by another program) is stale and may be taken over.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iac_kernel.sessions.files import open_fd


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to detect pid reuse."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


def _alive(info: dict[str, Any]) -> bool:
    """Whether the process named by a lock's ``info`` still runs (and is the same one)."""
    pid = info.get("pid")
    if type(pid) is not int or pid <= 0:
        return False
    if info.get("host") not in (None, socket.gethostname()):
        return True  # another machine's process: we cannot tell, so it counts as alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if sys.platform.startswith("linux"):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return False
        started = info.get("started_ticks")
        if started is not None and _start_time(pid) not in (None, started):
            return False  # the pid was reused by another process
    return True


@contextlib.contextmanager
def _flocked(path: Path, exclusive: bool) -> Iterator[int]:
    fd = open_fd(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield fd
    finally:
        os.close(fd)  # releases the flock


def _read(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    try:
        info = json.loads(data or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


def holder(path: Path) -> dict[str, Any] | None:
    """The live holder of the lock at ``path``, or ``None`` when it is free or stale."""
    if not path.exists():
        return None
    with _flocked(path, exclusive=False) as fd:
        info = _read(fd)
    return info if info and _alive(info) else None


def acquire(path: Path, who: str, since: str) -> tuple[str, dict[str, Any] | None]:
    """Take the lock for ``who``; returns ``(token, None)``, or ``("", holder)`` when a
    live process holds it."""
    with _flocked(path, exclusive=True) as fd:
        info = _read(fd)
        if info and _alive(info):
            return "", info
        token = uuid.uuid4().hex
        mine = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "holder": who,
            "since": since,
            "started_ticks": _start_time(os.getpid()),
            "token": token,
        }
        data = json.dumps(mine).encode()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
        return token, None


def release(path: Path, token: str) -> None:
    """Free the lock if ``token`` still holds it."""
    with contextlib.suppress(FileNotFoundError), _flocked(path, exclusive=True) as fd:
        if _read(fd).get("token") == token:
            os.ftruncate(fd, 0)
