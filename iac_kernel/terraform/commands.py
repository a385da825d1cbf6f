"""Reading terraform / tofu command lines: which plan file a ``plan -out`` writes, which
one an ``apply`` applies, in which directory (``-chdir``).

Go's flag parser takes ``-flag=value`` and ``-flag value``; the flags that take a value
are listed so that their value is not mistaken for the plan file.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

PROGRAM_NAMES = ("terraform", "tofu")
VALUE_FLAGS = {
    "-var",
    "-var-file",
    "-target",
    "-replace",
    "-state",
    "-state-out",
    "-backup",
    "-lock-timeout",
    "-parallelism",
    "-out",
    "-exclude",
    "-chdir",
    "-generate-config-out",
}
_SPLIT = re.compile(r"&&|\|\||[;|&\n()]")


@dataclass
class TfCommand:
    """One terraform/tofu invocation found in a command line."""

    program: str
    subcommand: str
    args: list[str] = field(default_factory=list)
    chdir: str | None = None

    def option(self, name: str) -> str | None:
        """The value of ``-name=value`` or ``-name value`` (the last one given)."""
        found = None
        for i, arg in enumerate(self.args):
            if arg.startswith(name + "="):
                found = arg[len(name) + 1 :]
            elif arg == name and i + 1 < len(self.args):
                found = self.args[i + 1]
        return found

    def flag(self, name: str) -> bool:
        return any(a == name or a == name + "=true" for a in self.args)

    def positional(self) -> list[str]:
        out: list[str] = []
        skip = False
        for arg in self.args:
            if skip:
                skip = False
                continue
            if arg.startswith("-"):
                skip = arg.split("=", 1)[0] in VALUE_FLAGS and "=" not in arg
                continue
            out.append(arg)
        return out

    def workdir(self, cwd: Path) -> Path:
        return (cwd / self.chdir) if self.chdir else cwd


def split_argv(argv: list[str]) -> TfCommand | None:
    """A :class:`TfCommand` from an argv whose first element is the program."""
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if name not in PROGRAM_NAMES:
        return None
    chdir = None
    rest = list(argv[1:])
    while rest and rest[0].startswith("-"):  # global options come before the subcommand
        option = rest.pop(0)
        if option.startswith("-chdir="):
            chdir = option.split("=", 1)[1]
        elif option == "-chdir" and rest:
            chdir = rest.pop(0)
    if not rest:
        return TfCommand(name, "", [], chdir)
    return TfCommand(name, rest[0], rest[1:], chdir)


def find_commands(command: str) -> list[TfCommand]:
    """Every terraform/tofu invocation in a shell command line (best effort)."""
    found: list[TfCommand] = []
    for segment in _SPLIT.split(command.replace("\\\n", " ")):
        try:
            tokens = shlex.split(segment)
        except ValueError:
            tokens = segment.split()
        for i, token in enumerate(tokens):
            if os.path.basename(token) in PROGRAM_NAMES:
                parsed = split_argv(tokens[i:])
                if parsed is not None:
                    found.append(parsed)
                break
    return found


@dataclass
class PlanTarget:
    """A plan file a command writes (``plan -out``) or applies."""

    path: Path
    workdir: Path
    program: str
    refresh_only: bool = False


def plan_outputs(command: str, cwd: Path) -> list[PlanTarget]:
    """Plan files that ``terraform|tofu plan -out=FILE`` in ``command`` writes."""
    targets = []
    for tf in find_commands(command):
        out = tf.option("-out") if tf.subcommand == "plan" else None
        if out:
            workdir = tf.workdir(cwd)
            targets.append(
                PlanTarget((workdir / out).resolve(), workdir, tf.program, tf.flag("-refresh-only"))
            )
    return targets


def apply_plan_file(tf: TfCommand, cwd: Path) -> Path | None:
    """The saved plan an ``apply`` command applies, or None (it plans and applies at once)."""
    if tf.subcommand != "apply":
        return None
    positional = tf.positional()
    if not positional:
        return None
    candidate = tf.workdir(cwd) / positional[-1]
    return candidate if candidate.is_file() else None
