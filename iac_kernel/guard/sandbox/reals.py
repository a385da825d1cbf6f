"""A guarded program's real files: where they are (every copy on PATH, its versioned
siblings and, for a pyenv shim, the programs it runs; launchers are mounted over each of
them), and descriptors to run them by without a path in the sandbox.

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
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from iac_kernel.guard.sandbox.bwrap import state_dir

#: Extra places a guarded program's real binary lives besides PATH.
EXTRA_COPIES = {"git": ("/usr/lib/git-core/git", "/usr/libexec/git-core/git")}


def find_real(programs: Iterable[str], path_env: str, skip: Sequence[str] = ()) -> dict:
    """Every real file of each program on ``path_env`` (realpaths, in PATH order), with
    its versioned siblings (``kubectl.1.33`` next to ``kubectl``) and, for a pyenv shim,
    the programs it runs (``<root>/versions/*/bin/aws``, listed before the shim)."""
    found: dict[str, list[str]] = {}
    ours = f"{state_dir()}{os.sep}"  # launcher folders of any of this user's processes
    dirs = [
        d
        for d in path_env.split(os.pathsep)
        if d and d not in skip and not os.path.realpath(d).startswith(ours)
    ]
    for program in programs:
        reals: list[str] = []
        candidates = [os.path.join(d, program) for d in dirs]
        candidates += list(EXTRA_COPIES.get(program, ()))
        for candidate in candidates:
            if not _executable(candidate):
                continue
            real = os.path.realpath(candidate)
            more = [*_shim_targets(real, program), real, *_siblings(real, program)]
            reals += [r for r in more if r not in reals]
        if reals:
            found[program] = reals
    return found


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _siblings(real: str, program: str) -> list[str]:
    """``<dir>/<program>.*`` executables (gcloud's ``kubectl.1.27`` ... ``kubectl.1.33``)."""
    directory = os.path.dirname(real)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    paths = [os.path.join(directory, n) for n in names if n.startswith(program + ".")]
    return [os.path.realpath(p) for p in paths if _executable(p)]


def _shim_targets(real: str, program: str) -> list[str]:
    """The programs a pyenv shim runs: ``<root>/versions/*/bin/<program>``, the running
    interpreter's version first (an approved call runs it, not the shim)."""
    shims = os.path.dirname(real)
    if not is_pyenv_shim(real):
        return []
    versions = os.path.join(os.path.dirname(shims), "versions")
    try:
        names = sorted(os.listdir(versions))
    except OSError:
        return []
    paths = [os.path.join(versions, n, "bin", program) for n in names]
    targets = [os.path.realpath(p) for p in paths if _executable(p)]
    own = os.path.realpath(os.path.join(os.path.dirname(sys.executable), program))
    return sorted(dict.fromkeys(targets), key=lambda t: t != own)


def is_pyenv_shim(path: str) -> bool:
    """A pyenv shim: a script in a ``shims`` directory that execs ``libexec/pyenv``."""
    if os.path.basename(os.path.dirname(path)) != "shims":
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(1024)
    except OSError:
        return False
    return head.startswith(b"#!") and b"libexec/pyenv" in head


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
