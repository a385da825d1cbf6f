"""Git configuration that turns a plain ``git push`` into a forced or mirror push.

``git push`` with no force flag is still forced when a remote's ``push`` refspec starts
with ``+`` (or deletes, ``:dst``) or ``remote.<name>.mirror`` is true - wherever git finds
it: repository, global, system and included files, ``-c``/``--config-env``,
``GIT_CONFIG_*``, another ``--git-dir``/``-C`` directory, any syntax git accepts. Parsing
all of that by hand misses forms, so the effective configuration is read from the real
git itself (``git config --get-regexp``) with the push's own global options, environment
and directory, in a read-only sibling sandbox, right before the push is asked about or
run. When it cannot be read, the push is asked about. An exec-time step: it catches the
plain push the rules let pass (they see only the argv).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from dataclasses import dataclass

from iac_kernel.guard.policy.rules import program_name
from iac_kernel.guard.sandbox.bwrap import Layout
from iac_kernel.guard.sandbox.reals import is_script
from iac_kernel.guard.sandbox.spawn import Refused, start_program

READ_TIMEOUT = 15.0
_KEY = re.compile(r"remote\..+\.(push|mirror)")
#: git global options that change which configuration is read (value in the next argv
#: when not given with ``=``); every other global option is left out of the read.
_VALUE_OPTS = {"-C", "-c", "--git-dir", "--work-tree", "--config-env"}
_EQ_OPTS = ("--git-dir=", "--work-tree=", "--config-env=")
#: Every git global option that takes a value in the next argument.
GLOBAL_VALUE = _VALUE_OPTS | {"--namespace", "--super-prefix", "--attr-source", "--list-cmds"}


def is_push(argv: list[str]) -> bool:
    """A (possibly) pushing git argv: ``push`` anywhere, or the dashed ``git-push``."""
    return "push" in argv[1:] or program_name(argv[0]) == "git-push"


def config_options(argv: list[str]) -> list[str]:
    """The global options of ``argv`` (before the subcommand) that pick configuration."""
    if program_name(argv[0]) != "git":
        return []
    kept: list[str] = []
    rest = list(argv[1:])
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option in _VALUE_OPTS and rest:
            kept += [option, rest.pop(0)]
        elif option.startswith(_EQ_OPTS) or option == "--bare":
            kept.append(option)
        elif option.startswith("-c") and len(option) > 2:
            kept += ["-c", option[2:]]
        elif option.startswith("-C") and len(option) > 2:
            kept += ["-C", option[2:]]
        elif option in GLOBAL_VALUE and rest:
            rest.pop(0)
    return kept


def read_argv(argv: list[str]) -> list[str]:
    """The git arguments that print the remotes' push refspecs and mirror settings."""
    regexp = r"^remote\..*\.(push|mirror)$"
    return ["--no-pager", *config_options(argv), "config", "-z", "--get-regexp", regexp]


def forcing_reason(returncode: int, output: bytes) -> str | None:
    """Why the configuration ``git config -z --get-regexp`` printed forces a push (or
    could not be read), or None when it does not."""
    if returncode == 1 and not output:
        return None  # no such keys
    if returncode != 0:
        return f"its configuration could not be read (git config exited {returncode})"
    records = output.decode(errors="replace").split("\0")
    if records[-1] != "":
        return "its configuration could not be read (unexpected output)"
    for record in records[:-1]:
        key, has_value, value = record.partition("\n")
        match = _KEY.fullmatch(key)
        if match is None:
            return "its configuration could not be read (unexpected output)"
        if match.group(1) == "push":
            if value.startswith("+") or (value.startswith(":") and len(value) > 1):
                return f"the git configuration pushes with a forced refspec ({key} = {value})"
        else:
            mirror = _git_bool(value) if has_value else True
            if mirror is None:
                return f"its configuration could not be read ({key} = {value!r})"
            if mirror:
                return f"the git configuration makes every push a mirror push ({key})"
    return None


def _git_bool(text: str) -> bool | None:
    """git's boolean: true/yes/on, false/no/off/empty, or an integer (k/m/g suffix)."""
    word = text.strip().lower()
    if word in ("true", "yes", "on"):
        return True
    if word in ("false", "no", "off", ""):
        return False
    number = re.fullmatch(r"([-+]?\d+)([kmg]?)", word)
    return None if number is None else int(number.group(1)) != 0


def config_git(real: str, reals: list[str]) -> str:
    """The git binary that reads the configuration: the one that will run, or (when that
    is a script wrapper) the first real binary."""
    if not is_script(real):
        return real
    return next((r for r in reals if not is_script(r)), real)


@dataclass
class GitConfigReader:
    """Runs ``git config`` read-only: in a sibling sandbox (cwd and every writable path
    remounted read-only, launchers in place) or, in reduced mode, directly."""

    git: str
    layout: Layout | None = None
    bwrap: str | None = None

    async def __call__(self, args: list[str], cwd: str, env: dict[str, str]) -> tuple[int, bytes]:
        env = {k: v for k, v in env.items() if not k.startswith(("GIT_TRACE", "GIT_PAGER"))}
        env["GIT_PAGER"] = "cat"
        pipe, null = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        try:
            proc = await start_program(
                self.git,
                ["git", *args],
                {"stdin": null, "stdout": pipe, "stderr": null},
                env,
                cwd,
                self.layout,
                self.bwrap,
                read_only=True,
            )
        except (OSError, Refused):
            return 127, b""
        try:
            output, _ = await asyncio.wait_for(proc.communicate(), READ_TIMEOUT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            return -1, b""
        return proc.returncode or 0, output


async def push_reason(
    argv: list[str], cwd: str, env: dict[str, str], reader: GitConfigReader
) -> str | None:
    """Why git's effective configuration forces a push argv (or cannot be read), or None."""
    returncode, output = await reader(read_argv(argv), cwd, env)
    return forcing_reason(returncode, output)
