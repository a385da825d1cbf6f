"""Where a guarded program's real files are: every copy on PATH, its versioned siblings
and, for a pyenv shim, the programs it runs (launchers are mounted over each of them)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence

from iac_kernel.guard.sandbox import state_dir

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
