"""Starting a guarded program: in a sandbox of its own beside the call's (bwrap runs the
exec helper, which execs the program from a descriptor opened here), or directly when
the call has no sandbox."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from iac_kernel.guard.sandbox import Layout
from iac_kernel.guard.startup import direct_exec_error, exec_fd
from iac_kernel.interpreter import sandbox_python

#: The exec helper; its path is the same inside a sandbox.
EXEC_HELPER = os.path.realpath(Path(__file__).with_name("exec_helper.py"))


def helper_command(fd: int, script: bool, argv: Sequence[str]) -> list[str]:
    """The tail of a bwrap command that execs the program open at ``fd`` as ``argv``
    (``script``: it starts with ``#!``)."""
    return [sandbox_python(), "-IS", EXEC_HELPER, str(fd), "1" if script else "0", *argv]


def setenv_args(env: Mapping[str, str]) -> list[str]:
    """bwrap words that set ``env`` inside (a name holding ``=`` cannot be set)."""
    words: list[str] = []
    for key, value in env.items():
        if key and "=" not in key:
            words += ["--setenv", key, value]
    return words


async def start_program(
    real: str,
    argv: list[str],
    std: dict[str, Any],
    env: dict[str, str],
    cwd: str,
    layout: Layout | None,
    bwrap: str | None,
    guarded: bool = True,
    original: bool = False,
    run_route: tuple[Path, int] | None = None,
) -> asyncio.subprocess.Process:
    """Start ``real`` as ``argv`` in ``cwd`` with ``env`` and the stdio ``std`` (keys
    ``i``, ``o``, ``e``), in its own process group (``run_route``: the run's own relay
    folder and port, see :meth:`Layout.bwrap_args`); raises
    :class:`~iac_kernel.guard.startup.CannotStart` when it cannot start."""
    if layout is not None and bwrap:
        fd, script = exec_fd(real, sandbox_python())
        extra = ["--clearenv", *setenv_args(env)]
        command = layout.bwrap_args(
            bwrap,
            chdir=cwd,
            extra=extra,
            guarded=guarded,
            originals=original,
            run_route=run_route,
        )
        try:
            return await asyncio.create_subprocess_exec(
                *command,
                *helper_command(fd, script, argv),
                stdin=std["i"],
                stdout=std["o"],
                stderr=std["e"],
                pass_fds=(fd,),
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                start_new_session=True,
            )
        finally:
            os.close(fd)
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            executable=real,
            cwd=cwd,
            env=env,
            stdin=std["i"],
            stdout=std["o"],
            stderr=std["e"],
            start_new_session=True,
        )
    except OSError as exc:
        raise direct_exec_error(real, exc) from None
