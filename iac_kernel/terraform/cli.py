"""Finding and running ``terraform`` / ``tofu`` (the same code path for both)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.guard.procs import signal_group
from iac_kernel.terraform.isolated import PreparedShow, prepared_show

PROGRAMS = ("terraform", "tofu")
#: Seconds terraform gets to release its state lock after SIGINT before it is killed.
INTERRUPT_GRACE = 10.0
UNSANDBOXED_SHOW = (
    " (bubblewrap is unusable here, so plans are shown with no provider plugins: the "
    "workspace's plugins never run outside a sandbox; only plans of built-in resources "
    "can be shown)"
)
#: Seconds a ``show -json`` of a plan file may take.
SHOW_TIMEOUT = 120.0

#: The document :func:`show_json_sync` last made, by how and what it showed (program,
#: folder, environment, the sha256 of the plan's bytes). The sensitive-value scan of a
#: running ``plan -out`` (the guard's output masker) shows the new plan file; the tool
#: that ran it then reads the same bytes with :func:`show_json`, which takes it from here
#: instead of showing them a second time. One slot, taken once.
_SHOWN: tuple[tuple[str, str, int, str], dict[str, Any]] | None = None
_SHOWN_LOCK = threading.Lock()


def _shown_key(executable: str, cwd: Path, env: Mapping[str, str], show: PreparedShow) -> tuple:
    return (executable, os.path.realpath(cwd), hash(frozenset(env.items())), show.sha256)


def _take_shown(key: tuple) -> dict[str, Any] | None:
    global _SHOWN
    with _SHOWN_LOCK:
        if _SHOWN is None or _SHOWN[0] != key:
            return None
        doc, _SHOWN = _SHOWN[1], None
        return doc


class TerraformError(Exception):
    """terraform could not be run, or its output could not be read."""


@dataclass
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).strip()


def find_program(program: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The executable for ``program`` (``terraform`` or ``tofu``); without one, the first
    of them on PATH. Raises :class:`TerraformError` when none is installed."""
    path = (env or os.environ).get("PATH")
    names = [program] if program else list(PROGRAMS)
    for name in names:
        if name not in PROGRAMS:
            raise TerraformError(f"unknown program {name!r}: use terraform or tofu")
        found = shutil.which(name, path=path)
        if found:
            return found
    raise TerraformError(f"{' or '.join(names)} is not installed (not found on PATH)")


def program_name(executable: str) -> str:
    """``terraform`` or ``tofu`` for an executable path."""
    name = os.path.basename(executable)
    return "tofu" if name.startswith("tofu") else "terraform"


def automation_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment terraform runs with: no prompts, no colour, no update checks."""
    env = {**os.environ, **(extra or {})}
    config = env.get("TF_CLI_CONFIG_FILE")
    if config and not os.path.exists(config):  # else every command warns about it
        env["TF_CLI_CONFIG_FILE"] = os.devnull
    env.setdefault("TF_IN_AUTOMATION", "1")
    env["TF_INPUT"] = "0"
    env.setdefault("CHECKPOINT_DISABLE", "1")
    return env


async def run(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    seconds: float = 600.0,
    pass_fds: tuple[int, ...] = (),
    exact_env: bool = False,
) -> Completed:
    """Run ``argv`` in its own process group; on cancel or timeout terraform gets SIGINT
    (so it releases a state lock), then SIGKILL. ``env`` is used as is with ``exact_env``,
    else on top of :func:`automation_env`."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=dict(env or {}) if exact_env else automation_env(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except FileNotFoundError as exc:
        raise TerraformError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    except OSError as exc:
        raise TerraformError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    try:
        async with asyncio.timeout(seconds):
            out, err = await proc.communicate()
    except (asyncio.CancelledError, TimeoutError) as exc:
        await _interrupt(proc, os.path.basename(argv[0]) == "bwrap")
        if isinstance(exc, TimeoutError):
            raise TerraformError(f"{_label(argv)} timed out after {seconds:g}s") from None
        raise
    return Completed(
        list(argv),
        proc.returncode if proc.returncode is not None else -1,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def _label(argv: list[str]) -> str:
    """The program and subcommand of ``argv``, also behind ``bwrap ... -- python -IS
    exec_helper.py FD SCRIPT`` (:mod:`iac_kernel.guard.confine`)."""
    tail = argv[argv.index("--") + 1 :] if argv and "--" in argv else argv
    if len(tail) > 5 and tail[2].endswith("exec_helper.py"):
        tail = tail[5:]
    return " ".join(tail[:2])


async def _interrupt(proc: asyncio.subprocess.Process, sandboxed: bool) -> None:
    """SIGINT (to terraform, not to a sandbox's bwrap: it would kill terraform), then
    SIGKILL to the whole group."""
    for sig, wait in ((signal.SIGINT, INTERRUPT_GRACE), (signal.SIGKILL, 5.0)):
        if proc.returncode is not None:
            return
        signal_group(proc.pid, sig, sandboxed and sig != signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await proc.wait()


async def show_json(
    executable: str, plan_file: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``terraform show -json PLANFILE`` as a dict, run so that no workspace code runs
    outside the sandbox (:mod:`iac_kernel.terraform.isolated`); the same bytes that
    :func:`show_json_sync` just showed the same way are not shown again."""
    full_env = automation_env(env)
    with prepared_show(executable, plan_file, cwd, full_env) as show:
        shown = _take_shown(_shown_key(executable, cwd, full_env, show))
        if shown is not None:
            return shown
        done = await run(show.argv, show.cwd, show.env, SHOW_TIMEOUT, show.pass_fds, True)
    return _shown_json(executable, done.returncode, done.stdout, done.output, show.sandboxed)


def show_json_sync(
    executable: str, plan_file: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """:func:`show_json` for threads (the guard's exec-time reviews run in one); the
    document is kept for one :func:`show_json` of the same bytes (:data:`_SHOWN`)."""
    global _SHOWN
    full_env = automation_env(env)
    try:
        with prepared_show(executable, plan_file, cwd, full_env) as show:
            done = subprocess.run(
                show.argv,
                cwd=str(show.cwd),
                env=show.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=SHOW_TIMEOUT,
                check=False,
                pass_fds=show.pass_fds,
            )
    except subprocess.TimeoutExpired:
        raise TerraformError(f"{program_name(executable)} show timed out") from None
    except OSError as exc:
        raise TerraformError(f"cannot run {executable}: {exc.strerror or exc}") from None
    output = (done.stdout + "\n" + done.stderr).strip()
    doc = _shown_json(executable, done.returncode, done.stdout, output, show.sandboxed)
    with _SHOWN_LOCK:
        _SHOWN = (_shown_key(executable, cwd, full_env, show), doc)
    return doc


def _shown_json(
    executable: str, returncode: int, stdout: str, output: str, sandboxed: bool
) -> dict[str, Any]:
    if returncode != 0:
        why = "" if sandboxed else UNSANDBOXED_SHOW
        raise TerraformError(f"{program_name(executable)} show failed: {first_error(output)}{why}")
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise TerraformError(f"{program_name(executable)} show printed no JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TerraformError(f"{program_name(executable)} show printed unexpected JSON")
    return data


def errors_of(output: str) -> list[str]:
    """The ``Error: ...`` diagnostics of terraform's text output, one string each."""
    errors: list[str] = []
    current: list[str] | None = None
    for raw in output.splitlines():
        line = raw.strip().lstrip("│╷╵").strip()
        if line.startswith("Error: "):
            if current:
                errors.append(" ".join(current))
            current = [line[len("Error: ") :]]
        elif current is not None:
            if not line:
                if len(current) > 1:
                    errors.append(" ".join(current))
                    current = None
                continue
            if len(current) < 6 and not line.startswith("on "):
                current.append(line)
    if current:
        errors.append(" ".join(current))
    return errors


def first_error(output: str) -> str:
    errors = errors_of(output)
    if errors:
        return errors[0]
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"
