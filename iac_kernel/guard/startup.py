"""Why a guarded program cannot start, told before its exec: not on the call's PATH,
found but not executable, its file gone, or the guard's own Python missing.

Each is a :class:`CannotStart` with one line of reason and the shell's status for it (127
not found, 126 found but cannot run); the approval server sends both to the launcher,
which prints ``guard: cannot start PROGRAM: WHY`` and exits with that status. What only
the exec itself can tell (a ``#!`` interpreter, a dynamic loader, a format) is told by
:mod:`.exec_helper` in the program's sandbox, with the same wording.
"""

from __future__ import annotations

import os

from iac_kernel.guard import realbin
from iac_kernel.guard.exec_helper import CANNOT_RUN, NOT_FOUND, cannot_start
from iac_kernel.guard.sandbox import LAUNCHER_MOUNT, Layout


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


def head(path: str) -> bytes | None:
    """The first bytes of a script (None for a binary or an unreadable file)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(512)
    except OSError:
        return None
    return data if data.startswith(b"#!") else None


def exec_fd(real: str, python: str) -> tuple[int, bool]:
    """:func:`realbin.exec_fd` of ``real`` for the sibling sandbox's exec helper run by
    ``python``, or :class:`CannotStart` saying why there is none."""
    if not os.access(python, os.X_OK):
        raise CannotStart(f"the guard's Python {python} is missing or not executable")
    try:
        return realbin.exec_fd(real)
    except FileNotFoundError:
        raise CannotStart(f"{real} is gone (removed since the call started)", NOT_FOUND) from None
    except OSError as exc:
        raise CannotStart(f"{real}: {exc.strerror or exc}", CANNOT_RUN) from None


def direct_exec_error(real: str, exc: OSError) -> CannotStart:
    """Why running ``real`` directly (no sandbox) failed with ``exc``."""
    code, why = cannot_start(exc.errno or 0, head(real))
    return CannotStart(why, code)
