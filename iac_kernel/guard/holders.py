"""Processes of mount namespaces (a call's shell), and which of them hold a file open
or mapped (``/proc/<pid>/fd`` and ``map_files``)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


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
            if any(_identity(f"/proc/{name}/{folder}/{e}") in files for e in entries):
                found.append(int(name))
                break
    return found


def stop_holders(files: list[Path], namespaces: set[int]) -> list[str]:
    """Kill the processes of ``namespaces`` holding one of ``files`` open or mapped, and
    wait until they are gone; one line for each."""
    wanted: set[tuple[int, int]] = set()
    for path in files:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            wanted.add((st.st_dev, st.st_ino))
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


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
