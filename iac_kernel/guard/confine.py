"""Run a trusted program on workspace content inside the sandbox, with no approval channel.

Some host-side helpers run a real program on files a bash call could have written (the
apply review and the plan pick-up run ``terraform show -json PLANFILE``, which starts
the provider plugins of ``./.terraform/providers``). Run on the host, that is a sandbox
escape. :func:`confine` builds the bubblewrap command for such a run: the same layout as
a bash call (whole filesystem read-only, private /tmp, guard launchers over every copy
of the guarded programs, private binary copies masked), the working directory read-only
too unless ``writable``, and no approval socket, so a launcher refuses every guarded
program a plugin tries to start. The real program is started from a file descriptor
(:mod:`.exec_helper`), as the approval server does.

Returns None when bubblewrap is unusable (reduced mode): the caller must then run the
program so that it cannot start workspace code (for terraform: no plugin discovery).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from iac_kernel.guard.call import launchers_and_reals, private_tmp, writable_paths
from iac_kernel.guard.sandbox.bwrap import (
    LAUNCHER_MOUNT,
    SANDBOX_ENV,
    Layout,
    bwrap_path,
    state_dir,
    unusable_reason,
)
from iac_kernel.guard.sandbox.hidden import control_plane
from iac_kernel.guard.sandbox.launcher import SOCKET_ENV
from iac_kernel.guard.sandbox.reals import copies_dir, exec_fd
from iac_kernel.guard.sandbox.spawn import helper_command


@dataclass
class Confined:
    """A ready command: run ``argv`` with ``env``, passing ``pass_fds``; then :meth:`close`."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...]
    _dirs: list[Path] = field(default_factory=list)

    def close(self) -> None:
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()
        for directory in self._dirs:
            shutil.rmtree(directory, ignore_errors=True)
        self._dirs.clear()


def confine(
    executable: str,
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    share: Path | None = None,
    writable: bool = False,
    settings: object = None,
    egress_port: int | None = None,
) -> Confined | None:
    """The sandboxed command running the real ``executable`` (a host path) with
    ``args`` in ``cwd`` (see the module docstring). ``share`` is a host directory shown
    read-only at the guard folder's place (``GUARD_MOUNT``); ``writable`` leaves ``cwd``
    and the user's ``sandbox_writable_paths`` writable; ``egress_port``: the forwarder's
    port of a route whose relay socket is in ``share`` (else no network). None when
    bubblewrap is unusable."""
    bwrap = bwrap_path()
    if bwrap is None or unusable_reason() is not None:
        return None
    cwd = Path(os.path.realpath(cwd))
    path = env.get("PATH") or os.environ.get("PATH", os.defpath)
    launchers, reals = launchers_and_reals(settings, path)
    real = os.path.realpath(executable)
    dirs: list[Path] = []
    try:
        tmp_dir = private_tmp()
        dirs.append(tmp_dir)
        if share is None:
            share = Path(tempfile.mkdtemp(prefix="share-", dir=state_dir()))
            dirs.append(share)
            os.chmod(share, 0o755)
        layout = Layout(
            cwd=cwd,
            tmp_dir=tmp_dir,
            guard_dir=share,
            launcher_dir=launchers,
            reals=reals,
            writable=writable_paths(settings) if writable else [],
            masks=[copies_dir()],
            hidden=control_plane(settings, env),
            egress_port=egress_port,
        )
        extra = [] if writable else ["--remount-ro", str(cwd)]
        fd, script = exec_fd(real)
    except BaseException:
        for directory in dirs:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    argv = layout.bwrap_args(bwrap, extra=extra)
    argv += helper_command(fd, script, [os.path.basename(executable), *args])
    inner = {k: v for k, v in env.items() if k != SOCKET_ENV}
    inner["PATH"] = f"{LAUNCHER_MOUNT}{os.pathsep}{path}"
    inner.update(SANDBOX_ENV)
    return Confined(argv, inner, (fd,), dirs)
