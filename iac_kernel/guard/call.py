"""One guarded bash call: set up the sandbox, launchers and approval server; tear down.

Usage (the bash tool)::

    async with GuardedCall(cwd, settings, env, ask_exec, sandbox=True) as call:
        argv = call.wrap(["bash", "-c", command])
        ... run argv with env=call.env ...
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from iac_kernel.config import path_list
from iac_kernel.egress import broker, inside
from iac_kernel.egress.broker import Brokered
from iac_kernel.egress.decide import AskEgress, GuardedRun
from iac_kernel.egress.proxy import Route, open_route
from iac_kernel.guard.approval.request import AskExec, AuditSink
from iac_kernel.guard.approval.server import ApprovalServer
from iac_kernel.guard.policy.rules import DEFAULT_PROGRAMS
from iac_kernel.guard.sandbox import hidden
from iac_kernel.guard.sandbox.bwrap import (
    LAUNCHER_MOUNT,
    RUN_FOLDER,
    SANDBOX_ENV,
    Layout,
    bwrap_path,
    process_dir,
    state_dir,
    unusable_reason,
)
from iac_kernel.guard.sandbox.launcher import SOCKET_ENV, write_launchers
from iac_kernel.guard.sandbox.reals import copies_dir, find_real
from iac_kernel.guard.tfcover.cover import Cover
from iac_kernel.interpreter import sandbox_python


class SandboxRequired(Exception):
    """``sandbox = required`` and bubblewrap cannot sandbox here."""


def guarded_programs(settings: Any) -> list[str]:
    raw = getattr(settings, "guarded_programs", None)
    if raw is None:
        return list(DEFAULT_PROGRAMS)
    items = raw if isinstance(raw, (list, tuple)) else str(raw).replace(",", " ").split()
    return [p for p in (str(i).strip() for i in items) if p and "/" not in p]


def writable_paths(settings: Any) -> list[Path]:
    """What the sandbox binds writable besides the cwd and /tmp: the user's
    ``sandbox_writable_paths`` and the session's ``additional_directories``."""
    return [
        *path_list(getattr(settings, "sandbox_writable_paths", "")),
        *path_list(getattr(settings, "additional_directories", "")),
    ]


_WRITTEN: set[tuple[Path, tuple[str, ...], str]] = set()


def _launchers(programs: tuple[str, ...], python: str) -> Path:
    """This process's launcher directory for ``programs`` (one per set of programs, so
    a launcher is never first on PATH for a program that is not guarded), written once
    and again only when something removed it."""
    name = hashlib.sha256("\0".join(programs).encode()).hexdigest()[:12]
    directory = process_dir() / f"bin-{name}"
    key = (directory, programs, python)
    if key not in _WRITTEN or not all((directory / p).is_file() for p in programs):
        write_launchers(directory, list(programs), python)
        _WRITTEN.add(key)
    return directory


def launchers_and_reals(settings: Any, path: str) -> tuple[Path, dict[str, list[str]]]:
    """This process's launcher directory for the guarded programs, and their real files
    on ``path`` (each program's copies, launchers left out)."""
    programs = guarded_programs(settings)
    launchers = _launchers(tuple(sorted(programs)), sandbox_python())
    return launchers, find_real(programs, path, skip=(str(launchers), LAUNCHER_MOUNT))


def private_tmp() -> Path:
    """A new host directory behind a sandbox's /tmp (sticky and world-writable)."""
    tmp_dir = Path(tempfile.mkdtemp(prefix="tmp-", dir=state_dir()))
    os.chmod(tmp_dir, 0o1777)
    return tmp_dir


class GuardedCall:
    """The guard around one bash call (sandboxed, or reduced: launchers first on PATH)."""

    def __init__(
        self,
        cwd: Path,
        settings: Any,
        env: dict[str, str],
        ask_exec: AskExec | None,
        sandbox: bool = True,
        audit: AuditSink | None = None,
        overlays: Callable[..., list[tuple[Path, Path]]] | None = None,
        ask_egress: AskEgress | None = None,
        brokered: Brokered | None = None,
    ) -> None:
        #: ``overlays(cwd, under=None)``: (masked copy, original) for the files under
        #: ``under`` (default: the cwd), mounted over the originals in the sandbox, at the
        #: start and after each guarded terraform (:mod:`.cover`).
        self.overlays = overlays
        self.cwd = Path(os.path.realpath(cwd))
        self.settings = settings
        self.base_env = dict(env)
        self.ask_exec = ask_exec
        self.want_sandbox = sandbox
        self.audit = audit
        self.ask_egress = ask_egress
        self.route: Route | None = None
        #: The credential broker (placeholders for guarded programs); by default the
        #: process's own (:func:`~iac_kernel.egress.broker.current`) for sandboxed calls.
        self.brokered = brokered
        self.env: dict[str, str] = dict(env)
        self.sandboxed = False
        self.server: ApprovalServer | None = None
        self._dirs: list[Path] = []
        self._prefix: list[str] = []

    async def __aenter__(self) -> GuardedCall:
        reason = unusable_reason()
        if getattr(self.settings, "sandbox", "auto") == "required" and (
            reason is not None or not self.want_sandbox
        ):
            raise SandboxRequired(
                "the sandbox setting is 'required' but "
                + (reason or "this call asked to run outside the sandbox")
            )
        path = self.env.get("PATH", os.defpath)
        launchers, reals = launchers_and_reals(self.settings, path)
        # The shell sees no secret-bearing variable; guarded programs get them back.
        self.env, secret_env = hidden.split_env(self.env)
        guard_dir = Path(tempfile.mkdtemp(prefix="call-", dir=state_dir()))
        self._dirs.append(guard_dir)
        os.chmod(guard_dir, 0o755)
        self.sandboxed = self.want_sandbox and reason is None
        if self.sandboxed:
            tmp_dir = private_tmp()
            self._dirs.append(tmp_dir)
            masked = await asyncio.to_thread(self.overlays, self.cwd) if self.overlays else []
            network = getattr(self.settings, "sandbox_network", "proxy")
            self.route = await open_route(
                guard_dir / inside.SOCKET_NAME, self.settings, self.ask_egress
            )
            if self.brokered is None:
                self.brokered = await asyncio.to_thread(broker.current)
            # Guarded programs get placeholders, not the values (the proxy swaps them in).
            brokered_env, other = self.brokered.env(secret_env)
            secret_env = {**other, **brokered_env}
            placeholders = self.brokered.guarded_mounts(self.base_env)
            layout = Layout(
                cwd=self.cwd,
                tmp_dir=tmp_dir,
                guard_dir=guard_dir,
                launcher_dir=launchers,
                reals=reals,
                writable=writable_paths(self.settings),
                masks=[copies_dir()],
                hidden=hidden.control_plane(self.settings, self.base_env),
                secrets=hidden.credential_paths(self.settings, self.base_env),
                overlays=masked,
                placeholders=placeholders,
                network=network != "none",
                egress_port=self.route.port if self.route else None,
            )
            bwrap = bwrap_path()
            assert bwrap is not None
            self._prefix = layout.bwrap_args(bwrap)
            self.env["PATH"] = f"{LAUNCHER_MOUNT}{os.pathsep}{path}"
            self.env.update(SANDBOX_ENV)
            self.env.update(layout.proxy_env())
            self.env.pop(SOCKET_ENV, None)
            self.server = ApprovalServer(
                reals, self.ask_exec, guard_dir, layout, bwrap, audit=self.audit
            )
            if self.overlays is not None:
                self.server.cover = Cover(layout, self.overlays)
            if self.route is not None:
                # Each guarded run gets a relay of its own (mounted over this empty folder
                # in its sandbox): the only connections the broker swaps credentials on.
                (guard_dir / RUN_FOLDER).mkdir()
                self.server.open_run_route = self._open_run_route
        else:
            self.env["PATH"] = f"{launchers}{os.pathsep}{path}"
            self.env[SOCKET_ENV] = str(guard_dir / "sock")
            self.server = ApprovalServer(reals, self.ask_exec, guard_dir, audit=self.audit)
        self.server.secret_env = secret_env
        # What the shell started with (its PATH and TMPDIR), secrets included.
        self.server.base_env = {**self.base_env, **self.env}
        await self.server.start(guard_dir / "sock")
        return self

    async def _open_run_route(self, run: GuardedRun, folder: Path) -> Route | None:
        return await open_route(
            folder / inside.SOCKET_NAME, self.settings, self.ask_egress, run=run, audit=self.audit
        )

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The argv that runs ``argv`` inside the sandbox (unchanged in reduced mode)."""
        return [*self._prefix, *argv]

    @property
    def waited(self) -> float:
        return self.server.paused() if self.server else 0.0

    async def __aexit__(self, *exc: object) -> None:
        if self.server is not None:
            await self.server.close()
        if self.route is not None:
            await self.route.close()
        for directory in self._dirs:
            shutil.rmtree(directory, ignore_errors=True)
