"""Starting a guarded program: in a sandbox of its own beside the call's (bwrap runs the
exec helper, which execs the program from a descriptor opened here), or directly when
the call has no sandbox; and why one cannot start.

Told before its exec: not on the call's PATH, found but not executable, its file gone,
or the guard's own Python missing. Each is a :class:`CannotStart` with one line of
reason and the shell's status for it (127 not found, 126 found but cannot run); the
approval server sends both to the launcher, which prints ``guard: cannot start PROGRAM:
WHY`` and exits with that status. What only the exec itself can tell (a ``#!``
interpreter, a dynamic loader, a format) is told by :mod:`.exec_helper` in the
program's sandbox, with the same wording.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from iac_kernel.guard.sandbox import reals
from iac_kernel.guard.sandbox.bwrap import LAUNCHER_MOUNT, Layout
from iac_kernel.guard.sandbox.exec_helper import CANNOT_RUN, NOT_FOUND, cannot_start
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
    read_only: bool = False,
) -> asyncio.subprocess.Process:
    """Start ``real`` as ``argv`` in ``cwd`` with ``env`` and the stdio ``std`` (keys
    ``stdin``, ``stdout``, ``stderr``), in its own process group (``run_route``: the run's own relay
    folder and port, see :meth:`Layout.bwrap_args`; ``read_only``: every place the call
    can write is read-only to it); raises :class:`CannotStart` when it cannot start."""
    std_kw = {**std, "start_new_session": True}
    if layout is None or not bwrap:
        try:
            return await asyncio.create_subprocess_exec(
                *argv, executable=real, cwd=cwd, env=env, **std_kw
            )
        except OSError as exc:
            code, why = cannot_start(exc.errno or 0, _head(real))
            raise CannotStart(why, code) from None
    fd, script = _exec_fd(real, sandbox_python())
    extra = [*(_read_only(layout) if read_only else ()), "--clearenv", *setenv_args(env)]
    command = layout.bwrap_args(
        bwrap, chdir=cwd, extra=extra, guarded=guarded, originals=original, run_route=run_route
    )
    try:
        return await asyncio.create_subprocess_exec(
            *command,
            *helper_command(fd, script, argv),
            pass_fds=(fd,),
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            **std_kw,
        )
    finally:
        os.close(fd)


def _read_only(layout: Layout) -> list[str]:
    """bwrap options that remount every writable place of ``layout`` read-only."""
    options: list[str] = []
    for path in ["/tmp", *map(str, layout.writable), str(layout.cwd)]:
        if os.path.exists(layout.host_path(path)):
            options += ["--remount-ro", path]
    return options


class Refused(Exception):
    """The program must not run; the message goes to the launcher's stderr."""


class CannotStart(Refused):
    """The program cannot start: why (one line) and the shell's status (126 or 127)."""

    def __init__(self, why: str, code: int = CANNOT_RUN) -> None:
        super().__init__(why)
        self.code = code


def not_on_path(program: str, path: str, layout: Layout | None) -> CannotStart:
    """Why ``program``, which has no real file on the call's PATH, cannot start
    (``path``: the PATH the command ran it with, as seen inside the sandbox)."""
    for folder in path.split(os.pathsep):
        if not folder or folder == LAUNCHER_MOUNT:
            continue
        candidate = os.path.join(folder, program)
        # The call's own PATH names host folders (a folder under /tmp too); one the
        # command set may name a folder of the sandbox's private /tmp.
        seen = {candidate, layout.host_path(candidate) if layout is not None else candidate}
        if any(os.path.isfile(p) and not os.access(p, os.X_OK) for p in seen):
            return CannotStart(f"{candidate} is not executable", CANNOT_RUN)
    return CannotStart("not found on PATH (not installed, or not on the call's PATH)", NOT_FOUND)


def _head(path: str) -> bytes | None:
    """The first bytes of a script (None for a binary or an unreadable file)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(512)
    except OSError:
        return None
    return data if data.startswith(b"#!") else None


def _exec_fd(real: str, python: str) -> tuple[int, bool]:
    """:func:`reals.exec_fd` of ``real`` for the sibling sandbox's exec helper run by
    ``python``, or :class:`CannotStart` saying why there is none."""
    if not os.access(python, os.X_OK):
        raise CannotStart(f"the guard's Python {python} is missing or not executable")
    try:
        return reals.exec_fd(real)
    except FileNotFoundError:
        raise CannotStart(f"{real} is gone (removed since the call started)", NOT_FOUND) from None
    except OSError as exc:
        raise CannotStart(f"{real}: {exc.strerror or exc}", CANNOT_RUN) from None
