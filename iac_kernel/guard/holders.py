"""Processes of mount namespaces (a call's shell), and which of them hold a file open
or mapped (``/proc/<pid>/fd`` and ``map_files``)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from iac_kernel.guard.held import identity


def holders(files: set[tuple[int, int]], namespaces: set[int]) -> list[int]:
    """Pids in the mount ``namespaces`` (inodes) with a descriptor on, or a mapping of,
    one of ``files`` (``(st_dev, st_ino)``)."""
    found: list[int] = []
    for pid in pids_in(namespaces):
        name = str(pid)
        for folder in ("fd", "map_files"):
            try:
                entries = os.listdir(f"/proc/{name}/{folder}")
            except OSError:
                continue
            held = (identity(f"/proc/{name}/{folder}/{e}", follow_symlinks=True) for e in entries)
            if any(file_id in files for file_id in held):
                found.append(int(name))
                break
    return found


def stop_holders(files: list[Path], namespaces: set[int]) -> list[str]:
    """Kill the processes of ``namespaces`` holding one of ``files`` open or mapped, and
    wait until they are gone; one line for each."""
    found = (identity(str(path), follow_symlinks=True) for path in files)
    wanted = {file_id for file_id in found if file_id is not None}
    if not wanted or not namespaces:
        return []
    pids = holders(wanted, namespaces)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    wait_dead(pids)
    return [f"process {pid} held a terraform file open: stopped" for pid in pids]


def wait_dead(pids: list[int], limit: float = 2.0) -> None:
    """Wait (at most ``limit`` seconds) until ``pids`` are gone or zombies: their
    descriptors are closed then."""
    end = time.monotonic() + limit
    for pid in pids:
        while time.monotonic() < end:
            try:
                state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
            except (OSError, IndexError):
                break
            if state in (b"Z", b"X"):
                break
            time.sleep(0.01)


def pids_in(namespaces: set[int]) -> list[int]:
    """The processes whose mount namespace is one of ``namespaces`` (inodes)."""
    names = [n for n in os.listdir("/proc") if n.isdigit()]
    return [int(n) for n in names if ns_inode(f"/proc/{n}/ns/mnt") in namespaces]


def ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
