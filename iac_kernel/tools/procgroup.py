"""Stopping a command's process group: gracefully first, then for sure.

A sandboxed command's group is led by ``bwrap``; graceful signals (SIGINT so terraform
can release its state lock, then SIGTERM) go to the command's own processes only,
because bwrap dies on them and takes everything inside down with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from iac_kernel.guard.sandbox.processes import group_members, signal_group

_POLL = 0.05


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` is running (zombies count as gone)."""
    if not os.path.exists("/proc/self/stat"):
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return bool(group_members(pgid))


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def wait_gone(proc: asyncio.subprocess.Process, pgid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for the shell and every process of its group to exit."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        if proc.returncode is not None and not group_alive(pgid):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_POLL)


async def stop_group(
    proc: asyncio.subprocess.Process, pgid: int, grace: float, sandboxed: bool = False
) -> None:
    """SIGINT (so terraform can release its state lock), then SIGTERM, then SIGKILL.

    Each step waits ``grace`` seconds for the whole process group to exit.
    """
    for sig in (signal.SIGINT, signal.SIGTERM):
        if proc.returncode is not None and not group_alive(pgid):
            return
        signal_group(pgid, sig, sandboxed)
        if await wait_gone(proc, pgid, grace):
            return
    kill_group(pgid)
    await wait_gone(proc, pgid, 5.0)


async def stop_leftovers(
    proc: asyncio.subprocess.Process, pgid: int, grace: float, sandboxed: bool = False
) -> bool:
    """The shell exited; stop background processes it left in its group. True if any.

    In a sandbox (its own PID namespace) the kernel kills whatever is left when the
    namespace's first process exits; on a loaded machine those processes can outlive
    bwrap by a moment, so they get up to a second to go before they count as left."""
    if not group_alive(pgid):
        return False
    if sandboxed and await wait_gone(proc, pgid, min(grace, 1.0)):
        return False
    signal_group(pgid, signal.SIGTERM, False)
    if not await wait_gone(proc, pgid, min(grace, 1.0)):
        kill_group(pgid)
        await wait_gone(proc, pgid, 5.0)
    return True


async def wait_exit(proc: asyncio.subprocess.Process, limit: float, paused: object = None) -> None:
    """Wait for the shell itself to exit; TimeoutError after ``limit`` seconds, not
    counting the seconds ``paused()`` reports (time spent waiting for the user).

    Not ``proc.wait()``: in Python 3.11 that also waits for the output pipe to close,
    which a background child holding the pipe delays until it exits.
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    delay = 0.002
    while proc.returncode is None:
        waited = paused() if callable(paused) else 0.0
        if loop.time() - start - waited > limit:
            raise TimeoutError
        await asyncio.sleep(delay)
        delay = min(delay * 2, _POLL)
