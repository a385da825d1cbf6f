"""Terraform / tofu command lines: which plan file a ``plan -out`` writes, in which
directory (``-chdir``) (:func:`find_commands`, best effort over a shell line), and what
``apply|destroy|refresh`` will really do with an argv and an environment
(:func:`resolve`, exact).

Go's flag parser takes ``-flag=value`` and ``-flag value``; the flags that take a value
are listed so that their value is not mistaken for a positional argument.

For :func:`resolve`: terraform builds its arguments in steps, and each is replayed here:

1. ``-chdir=DIR`` is taken from the options before the subcommand (``-chdir DIR`` and
   any other option there are errors);
2. ``TF_CLI_ARGS`` and then ``TF_CLI_ARGS_<subcommand>`` (exact names) are split like a
   shell would and inserted right after the subcommand, so the final order is
   ``apply <TF_CLI_ARGS_apply> <TF_CLI_ARGS> <argv>``;
3. ``-no-color`` and ``-compact-warnings`` are removed wherever they are;
4. the rest is parsed with Go's ``flag`` rules: ``-x`` and ``--x`` are the same flag,
   ``-flag=value`` or ``-flag value`` for value flags, booleans take ``-b`` or
   ``-b=1|t|true|0|f|false`` (``-b 1`` makes ``1`` a positional argument), ``--`` ends
   the flags, the first non-flag ends them too; an unknown flag is an error.

``apply`` takes at most one positional argument, the saved plan file; with a plan file
the planning options (``-destroy``, ``-target``, ``-replace``, ``-refresh-only``) are
ignored: terraform applies the plan as saved. ``destroy`` takes none. ``refresh`` is
``apply -refresh-only -auto-approve`` (terraform's documentation): it takes no plan and
no ``-auto-approve``, and ignores ``-destroy`` and ``-replace``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROGRAMS = ("terraform", "tofu")
SUBCOMMANDS = ("apply", "destroy", "refresh")
BOOL_FLAGS = {"destroy", "refresh-only", "refresh", "lock", "auto-approve", "input", "json"}
BOOL_FLAGS |= {"allow-deferral"}
VALUE_FLAGS = {"lock-timeout", "state", "state-out", "backup", "parallelism", "target"}
VALUE_FLAGS |= {"replace", "var", "var-file"}
#: OpenTofu's additions (not installed here; from its documentation).
TOFU_BOOL_FLAGS = {"concise", "show-sensitive"}
TOFU_VALUE_FLAGS = {"exclude", "exclude-file", "target-file", "deprecation", "json-into"}
VIEW_TOKENS = ("-no-color", "-compact-warnings")
TOFU_VIEW_TOKENS = ("-consolidate-warnings", "-consolidate-errors")
HELP = ("-h", "-help", "--help")
VERSION = ("-v", "-version", "--version")
GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
#: Where go-shellwords stops or does something a POSIX split does not.
_UNSPLITTABLE = set(";&|<>`")
PLANNING = ("destroy", "target", "replace", "refresh-only")
_SPLIT = re.compile(r"&&|\|\||[;|&\n()]")


@dataclass
class TfCommand:
    """One terraform/tofu invocation found in a command line."""

    program: str
    subcommand: str
    args: list[str] = field(default_factory=list)
    chdir: str | None = None


def split_argv(argv: list[str]) -> TfCommand | None:
    """A :class:`TfCommand` from an argv whose first element is the program."""
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if name not in PROGRAMS:
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
            if os.path.basename(token) in PROGRAMS:
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
        out = flag_values(tf.args, "out")[-1:] if tf.subcommand == "plan" else []
        if out and out[0]:
            workdir = cwd / tf.chdir if tf.chdir else cwd
            fresh = any(a in ("-refresh-only", "-refresh-only=true") for a in tf.args)
            targets.append(PlanTarget((workdir / out[0]).resolve(), workdir, tf.program, fresh))
    return targets


@dataclass
class ApplyLine:
    """One apply/destroy as terraform will parse it (see the module docstring)."""

    program: str
    subcommand: str
    invoked: str
    chdir: str | None = None
    #: The subcommand's arguments after every step (environment inserted).
    args: list[str] = field(default_factory=list)
    #: The environment variables that added arguments: name -> value.
    env_args: dict[str, str] = field(default_factory=dict)
    #: The flag tokens in order, as given (kept when the plan argument is rewritten).
    flag_tokens: list[str] = field(default_factory=list)
    #: Flag name -> its values in order (booleans as "true"/"false").
    values: dict[str, list[str]] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)
    #: Terraform rejects this command line (it applies nothing): why.
    error: str | None = None
    #: ``-help`` or ``-version``: terraform prints that and applies nothing.
    no_op: str | None = None

    def _bool(self, name: str) -> bool:
        seen = self.values.get(name)
        return bool(seen) and seen[-1] == "true"

    @property
    def plan(self) -> str | None:
        """The saved plan file terraform will read, if any."""
        if self.subcommand == "apply" and self.positionals:
            return self.positionals[0]
        return None

    @property
    def destroy(self) -> bool:
        """True when this destroys (``destroy``, or ``apply -destroy`` without a plan)."""
        if self.subcommand == "destroy":
            return True
        return self.subcommand == "apply" and self.plan is None and self._bool("destroy")

    @property
    def auto_approve(self) -> bool:
        return self.subcommand == "refresh" or self._bool("auto-approve")

    @property
    def refresh_only(self) -> bool:
        return self.subcommand == "refresh" or (self.plan is None and self._bool("refresh-only"))

    def option(self, name: str) -> list[str]:
        return list(self.values.get(name, []))

    def ignored_with_plan(self) -> list[str]:
        """Planning options given with a saved plan (terraform ignores them)."""
        if self.plan is None:
            return []
        out = []
        for name in PLANNING:
            for value in self.values.get(name, []):
                if name in BOOL_FLAGS and value == "true":
                    out.append(f"-{name}")
                elif name not in BOOL_FLAGS:
                    out.append(f"-{name}={value}")
        return out

    def env_names(self) -> list[str]:
        return list(self.env_args)

    def shown(self) -> str:
        """The effective command line, as terraform sees it."""
        head = [self.program] + ([f"-chdir={self.chdir}"] if self.chdir else [])
        return shlex.join([*head, self.subcommand, *self.args])

    def run_argv(self, plan: str) -> list[str]:
        """The argv applying ``plan`` (an absolute path) with the same flags, for an
        environment without the variables of :meth:`env_names`."""
        head = [self.invoked] + ([f"-chdir={self.chdir}"] if self.chdir else [])
        return [*head, self.subcommand, *self.flag_tokens, plan]


def resolve(
    argv: list[str], env: Mapping[str, str], program: str | None = None
) -> ApplyLine | None:
    """The apply/destroy ``argv`` (``argv[0]`` is the program as invoked; ``program`` its
    name when that differs) runs with ``env``; None when it is not an apply or destroy of
    terraform/tofu."""
    if not argv:
        return None
    program = program or os.path.basename(argv[0])
    if program not in PROGRAMS:
        return None
    rest = list(argv[1:])
    chdir, rest, error = _chdir(rest)
    if error:  # terraform stops before reading anything else
        sub = next((a for a in rest if a in SUBCOMMANDS), None)
        return ApplyLine(program, sub, argv[0], error=error) if sub else None
    first = _subcommand(rest)
    env_args: dict[str, str] = {}
    for name in ("TF_CLI_ARGS", "TF_CLI_ARGS_" + first.replace("-", "_").replace(" ", "_")):
        value = env.get(name, "")
        if not value:
            continue
        env_args[name] = value
        words, problem = _split_env(name, value)
        error = error or problem
        index = rest.index(first) + 1 if first and first in rest else 0
        rest = [*rest[:index], *words, *rest[index:]]
    sub = _subcommand(rest)
    if sub not in SUBCOMMANDS:
        return None
    at = rest.index(sub)
    line = ApplyLine(program, sub, argv[0], chdir, rest[at + 1 :], env_args)
    if any(a in VERSION for a in rest):
        line.no_op = "version"
    elif any(a in HELP for a in (rest[: rest.index("--")] if "--" in rest else rest)):
        line.no_op = "help"
    if rest[:at]:
        error = error or f"invalid flags before the subcommand: {' '.join(rest[:at])}"
    line.error = error or _parse(line)
    return line


def var_assignments(words: Iterable[str]) -> list[str]:
    """Every ``NAME=VALUE`` given to ``-var`` among ``words`` (``-var X``, ``-var=X``,
    ``--var``), read without parsing the rest: also for a line terraform rejects."""
    return flag_values(words, "var")


def flag_values(words: Iterable[str], name: str) -> list[str]:
    """Every value given to ``-NAME`` among ``words`` (``-NAME X``, ``-NAME=X``,
    ``--NAME``), read without parsing the rest."""
    found: list[str] = []
    words = list(words)
    spellings = (f"-{name}", f"--{name}")
    for i, word in enumerate(words):
        if word in spellings and i + 1 < len(words):
            found.append(words[i + 1])
        elif word.startswith((f"-{name}=", f"--{name}=")):
            found.append(word.partition("=")[2])
    return found


def _chdir(args: list[str]) -> tuple[str | None, list[str], str | None]:
    chdir = None
    kept = []
    leading = True
    for arg in args:
        if leading and not arg.startswith("-"):
            leading = False
        if leading and arg in ("-chdir", "-chdir="):
            return None, args, "-chdir needs an equals sign and a directory (-chdir=DIR)"
        if leading and arg.startswith("-chdir="):
            chdir = arg[len("-chdir=") :]
            continue
        kept.append(arg)
    return chdir, kept, None


def _subcommand(args: list[str]) -> str:
    for arg in args:
        if arg == "--":
            return ""
        if arg and not arg.startswith("-"):
            return arg
    return ""


def _split_env(name: str, value: str) -> tuple[list[str], str | None]:
    if _UNSPLITTABLE & set(value) or "$(" in value:
        return [], f"{name} has shell characters terraform splits differently: {value!r}"
    try:
        return shlex.split(value), None
    except ValueError as exc:
        return [], f"{name} cannot be split ({exc}): {value!r}"


def _parse(line: ApplyLine) -> str | None:
    """Go's flag parsing of ``line.args`` into flags and positionals (None: no error)."""
    views = VIEW_TOKENS + (TOFU_VIEW_TOKENS if line.program == "tofu" else ())
    args = [a for a in line.args if a not in views]
    line.flag_tokens = [a for a in line.args if a in views]
    bools = BOOL_FLAGS | (TOFU_BOOL_FLAGS if line.program == "tofu" else set())
    if line.subcommand == "refresh":
        bools = bools - {"auto-approve"}
    valued = VALUE_FLAGS | (TOFU_VALUE_FLAGS if line.program == "tofu" else set())
    i = 0
    while i < len(args):
        arg = args[i]
        if len(arg) < 2 or arg[0] != "-":
            break
        if arg == "--":
            i += 1
            break
        body = arg[2:] if arg.startswith("--") else arg[1:]
        if not body or body[0] in "-=":
            return f"bad flag syntax: {arg}"
        name, eq, value = body.partition("=")
        if name in bools:
            if eq and value not in GO_TRUE | GO_FALSE:
                return f'invalid boolean value "{value}" for -{name}'
            line.values.setdefault(name, []).append("false" if value in GO_FALSE else "true")
            line.flag_tokens.append(arg)
        elif name in valued:
            if not eq:
                if i + 1 >= len(args):
                    return f"flag needs an argument: -{name}"
                i += 1
                value = args[i]
                line.flag_tokens += [arg, value]
            else:
                line.flag_tokens.append(arg)
            line.values.setdefault(name, []).append(value)
        else:
            return f"flag provided but not defined: -{name}"
        i += 1
    line.positionals = args[i:]
    if line.subcommand in ("destroy", "refresh") and line.positionals:
        return (
            f"{line.subcommand} takes no positional argument (a saved plan is applied with apply)"
        )
    if len(line.positionals) > 1:
        return "too many command line arguments (apply takes at most one saved plan)"
    return None
