"""File descriptors of real programs, for running them without a path in the sandbox.

A binary is run from a private copy that only has execute permission (mode 0111): the
process is then not dumpable, so nothing in the sandbox can read it back through
``/proc/PID/exe``, ``/proc/PID/fd`` or ``/proc/PID/mem``. The copies live in a host
directory the sandbox masks. Scripts (``#!``) are passed readable: their interpreter
reads them.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
from pathlib import Path

from iac_kernel.guard.sandbox import state_dir


def copies_dir() -> Path:
    """One folder per user, the same for every process whatever its TMPDIR, hidden in
    every sandbox (``Layout.masks``): copies under a TMPDIR would be visible - and
    runnable, with no question - from the sandbox of a process with another TMPDIR.
    Under the state folder when the home folder cannot hold it."""
    try:
        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
        path = home / ".cache" / "iac-kernel" / f"guard-real-{os.getuid()}"
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (KeyError, OSError):
        path = state_dir() / "real"
        path.mkdir(mode=0o700, exist_ok=True)
    return path


def is_script(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False


def private_copy(real: str) -> Path:
    """An execute-only copy of ``real``, made once per file version."""
    st = os.stat(real)
    name = os.path.basename(real)
    key = f"{name}-{st.st_dev:x}-{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"
    target = copies_dir() / key
    if target.exists():
        return target
    tmp = target.with_name(f".{key}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(real, tmp)
        os.chmod(tmp, 0o111)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


def exec_fd(real: str) -> tuple[int, bool]:
    """A close-on-exec descriptor to exec ``real`` through, and whether it is a script."""
    if is_script(real):
        return os.open(real, os.O_RDONLY | os.O_CLOEXEC), True
    return os.open(private_copy(real), os.O_PATH | os.O_CLOEXEC), False
