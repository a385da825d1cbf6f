"""Stopping what a command left behind (:mod:`iac_kernel.tools.procgroup`): in a sandbox,
processes that go by themselves a moment after the shell (a PID namespace being torn
down on a loaded machine) are not reported as left behind; without one they are."""

from __future__ import annotations

import asyncio

from iac_kernel.tools.procgroup import group_alive, stop_leftovers, wait_exit


async def _shell_that_leaves(seconds: float) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", f"sleep {seconds} & exit 0", start_new_session=True
    )
    await wait_exit(proc, 10)
    return proc


async def test_a_sandbox_group_that_empties_by_itself_left_nothing():
    proc = await _shell_that_leaves(0.3)
    assert group_alive(proc.pid)  # the sleep is still there when the shell is gone
    assert await stop_leftovers(proc, proc.pid, grace=2.0, sandboxed=True) is False
    assert not group_alive(proc.pid)


async def test_what_stays_is_stopped_and_reported():
    for sandboxed in (False, True):
        proc = await _shell_that_leaves(30)
        assert await stop_leftovers(proc, proc.pid, grace=2.0, sandboxed=sandboxed) is True
        assert not group_alive(proc.pid)
