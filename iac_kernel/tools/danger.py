"""Which shell commands are dangerous: they change or destroy real infrastructure or data.

A dangerous command always needs its own approval (no "allow always"). The check errs
on the side of asking: a command that merely mentions ``terraform destroy`` as words
(``echo terraform destroy``) is flagged too.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass

from iac_kernel.guard.rules import DEFAULT_PROGRAMS, classify
from iac_kernel.guard.ruleset import has_words, positionals
from iac_kernel.terraform.apply_args import resolve
from iac_kernel.terraform.commands import split_argv

#: Programs the text check also judges with the exec-time rules of the guard.
GUARD_TABLE_PROGRAMS = frozenset(DEFAULT_PROGRAMS) | {"oc"}
#: Programs whose apply/destroy the guard reviews at exec time (``tools/tf_guard.py``).
REVIEWED_PROGRAMS = ("terraform", "tofu")


@dataclass(frozen=True)
class Rule:
    """A command is dangerous when a program in ``programs`` runs with ``words`` and ``flags``.

    ``words`` must appear as consecutive non-option arguments (fnmatch patterns allowed),
    anywhere after the program, so global options (``terraform -chdir=x apply``,
    ``kubectl -n ns delete``) do not hide them. ``flags`` means at least one of these
    options is present (``-r`` also matches clusters such as ``-rf``).
    """

    programs: tuple[str, ...]
    words: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    reason: str = ""


_TF = ("terraform", "tofu", "terragrunt")
_K8S = ("kubectl", "oc")

#: The one table of dangerous commands.
RULES: tuple[Rule, ...] = (
    Rule(_TF, ("apply",), reason="applies infrastructure changes"),
    Rule(_TF, ("destroy",), reason="destroys infrastructure"),
    Rule(_TF, ("import",), reason="writes to the Terraform state"),
    Rule(_TF, ("state", "rm"), reason="removes resources from the state"),
    Rule(_TF, ("state", "mv"), reason="moves resources in the state"),
    Rule(_TF, ("state", "push"), reason="overwrites the remote state"),
    Rule(_TF, ("state", "replace-provider"), reason="rewrites providers in the state"),
    Rule(_TF, ("force-unlock",), reason="breaks a state lock"),
    Rule(_TF, ("taint",), reason="forces resources to be replaced"),
    Rule(_TF, ("workspace", "delete"), reason="deletes a workspace"),
    Rule(("terragrunt",), ("apply-all",), reason="applies infrastructure changes"),
    Rule(("terragrunt",), ("destroy-all",), reason="destroys infrastructure"),
    Rule(("pulumi",), ("up",), reason="applies infrastructure changes"),
    Rule(("pulumi",), ("destroy",), reason="destroys infrastructure"),
    Rule(("cdk", "cdktf"), ("deploy",), reason="applies infrastructure changes"),
    Rule(("cdk", "cdktf"), ("destroy",), reason="destroys infrastructure"),
    Rule(("make", "just"), ("apply",), reason="likely applies infrastructure changes"),
    Rule(("make", "just"), ("destroy",), reason="likely destroys infrastructure"),
    Rule(_K8S, ("delete",), reason="deletes Kubernetes resources"),
    Rule(_K8S, ("drain",), reason="evicts every pod from a node"),
    Rule(("helm",), ("uninstall",), reason="removes a Helm release"),
    Rule(("helm",), ("delete",), reason="removes a Helm release"),
    Rule(("aws",), ("delete-*",), reason="deletes AWS resources"),
    Rule(("aws",), ("terminate-*",), reason="terminates AWS resources"),
    Rule(("aws",), ("deregister-*",), reason="deregisters AWS resources"),
    Rule(("aws",), ("s3", "rm"), reason="deletes S3 objects"),
    Rule(("aws",), ("s3", "rb"), reason="deletes an S3 bucket"),
    Rule(("gcloud", "az"), ("delete",), reason="deletes cloud resources"),
    Rule(("rm",), flags=("-r", "-R", "--recursive"), reason="deletes a directory tree"),
    Rule(("find",), flags=("-delete",), reason="deletes files"),
    Rule(
        ("git",),
        ("push",),
        flags=("-f", "--force", "--force-with-lease", "--delete", "--mirror"),
        reason="rewrites or deletes remote history",
    ),
    Rule(("git",), ("reset",), flags=("--hard",), reason="discards local changes"),
    Rule(("git",), ("clean",), flags=("-f", "--force"), reason="deletes untracked files"),
    Rule(("dd",), ("of=/dev/*",), reason="overwrites a device"),
    Rule(("mkfs", "mkfs.*"), reason="formats a filesystem"),
)

_MAX_DEPTH = 4
_SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "su"}
#: The whole rest of the command line is itself a command for these.
_RUNNERS = {"eval", "ssh", "watch"}
_SCRIPT_FLAG = re.compile(r"^-[a-zA-Z]*c$")


def dangerous_reason(command: str, exec_reviewed: frozenset[str] = frozenset()) -> str | None:
    """Why ``command`` is dangerous (``terraform destroy: destroys infrastructure``), or None.

    ``exec_reviewed``: programs (of :data:`REVIEWED_PROGRAMS`) whose apply and destroy the
    exec-time guard reviews and asks with the plan; they are left to it (one question)."""
    if _REROUTE.search(command):
        exec_reviewed = frozenset()  # the name may not reach the guard's launcher
    return _check(command, 0, exec_reviewed)


#: Text that can make a bare ``terraform`` run something else than the launcher on PATH.
_REROUTE = re.compile(r"PATH|\bhash\b")


def left_to_exec(token: str, words: list[str], exec_reviewed: frozenset[str]) -> bool:
    """True for an apply/destroy (or ``test``) of a reviewed program called by its bare
    name (through PATH, so through the guard's launcher): asked once, at exec time, with
    its plan (:mod:`iac_kernel.tools.tf_guard`)."""
    if "/" in token or os.path.basename(token) not in exec_reviewed:
        return False
    command = split_argv(words)
    return resolve(words, {}) is not None or (command is not None and command.subcommand == "test")


def after_assignments(words: list[str]) -> list[str]:
    """A simple command's words from its program on (``TF_LOG=1 terraform apply`` ->
    ``terraform apply``): the shell gives the assignments to the program's environment,
    where the exec-time guard reads them."""
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        i += 1
    return words[i:]


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _check(command: str, depth: int, exec_reviewed: frozenset[str]) -> str | None:
    if depth > _MAX_DEPTH or not command.strip():
        return None
    for segment in _segments(command):
        for i, token in enumerate(segment):
            nested = _nested_script(segment, i)
            if nested is not None:
                reason = _check(nested, depth + 1, exec_reviewed)
                if reason:
                    return reason
            program = os.path.basename(token)
            if left_to_exec(token, segment[i:], exec_reviewed):
                continue  # asked once, at exec time, with its plan
            if program in GUARD_TABLE_PROGRAMS:
                verdict = classify(program, segment[i:])
                # An unknown cloud verb is asked at exec time; the text alone (`echo
                # gcloud is slow`) is not worth a question.
                if verdict.changing and not verdict.by_default:
                    return verdict.reason
            for rule in RULES:
                if any(fnmatch.fnmatchcase(program, p) for p in rule.programs) and _matches(
                    rule, segment[i + 1 :]
                ):
                    shown = " ".join([program, *rule.words]).strip()
                    return f"{shown}: {rule.reason}"
    return None


def _nested_script(segment: list[str], i: int) -> str | None:
    """Text at ``segment[i]`` that the shell will run as a command of its own."""
    token = segment[i]
    if "$(" in token:
        return token.replace("$(", " ; ").replace(")", " ; ")
    if i == 0:
        return None
    before = [os.path.basename(t) for t in segment[:i]]
    if _SCRIPT_FLAG.match(segment[i - 1]) and any(b in _SHELLS for b in before):
        return token
    if any(b in _RUNNERS for b in before) and " " in token:
        return token
    return None


def _matches(rule: Rule, args: list[str]) -> bool:
    if rule.words and not has_words(rule.words, positionals(args)):
        return False
    return not rule.flags or any(_has_flag(args, flag) for flag in rule.flags)


def _has_flag(args: list[str], flag: str) -> bool:
    short_letter = flag[1] if len(flag) == 2 and flag[0] == "-" and flag[1] != "-" else None
    for arg in args:
        if arg == "--":
            return False
        if arg == flag or (flag.startswith("--") and arg.startswith(flag + "=")):
            return True
        if short_letter and re.fullmatch(r"-[a-zA-Z]+", arg) and short_letter in arg[1:]:
            return True
    return False


def _segments(command: str) -> list[list[str]]:
    """Simple commands of ``command``: split on ``&& || ; | &``, newlines and parentheses."""
    # Backquoted commands become separate segments (even inside quotes: errs on asking).
    text = command.replace("\\\n", " ").replace("\n", " ; ").replace("`", " ; ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to a rough split
        tokens = re.findall(r"&&|\|\||[;|&()<>]+|[^\s;|&()<>]+", text)
        tokens = [t.strip("'\"") for t in tokens]
    segments: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            continue
        if token and set(token) <= set("();<>|&"):
            if "<" in token or ">" in token:
                # A redirection; its target is a file name, not an argument.
                skip_next = not token.endswith("&") or token in (">", ">>", "<")
                continue
            segments.append([])
            continue
        segments[-1].append(token)
    return [s for s in segments if s]


#: Programs whose arguments are themselves commands or code: no "allow always" prefix.
_NO_PREFIX = (
    _SHELLS
    | _RUNNERS
    | {
        "exec",
        "env",
        "sudo",
        "doas",
        "xargs",
        "nohup",
        "setsid",
        "timeout",
        "time",
        "nice",
        "ionice",
        "stdbuf",
        "command",
        "builtin",
        "source",
        ".",
        "find",
        "parallel",
        "busybox",
        "fish",
        "tcsh",
        "csh",
        "script",
        "unshare",
        "chroot",
        "flock",
        "strace",
        "expect",
    }
)
_PREFIX_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")


def _has_expansions(command: str) -> bool:
    return any(c in command for c in "$`\\") or "<(" in command or ">(" in command


def literal_commands(command: str) -> list[list[str]]:
    """The simple commands of ``command`` word by word, when it has no expansions
    (what the user read is exactly what runs); else []."""
    if not command.strip() or _has_expansions(command):
        return []
    return [list(segment) for segment in _segments(command)]


def command_prefixes(command: str, exec_reviewed: frozenset[str] = frozenset()) -> list[str] | None:
    """What "Allow always" remembers for ``command``: the program and its subcommand of
    each simple command (``terraform plan -out=x && terraform show`` ->
    ``["terraform plan", "terraform show"]``). None when the command has expansions,
    nested shells or interpreters running code, or variable assignments: then no
    "always" answer is offered. Applies left to the exec-time question
    (:func:`left_to_exec`) are no part of it: they are asked each time, with their plan."""
    if not command.strip() or _has_expansions(command):
        return None
    prefixes: list[str] = []
    for segment in _segments(command):
        program = segment[0]
        if left_to_exec(program, segment, exec_reviewed):
            continue
        if "=" in program or os.path.basename(program) in _NO_PREFIX:
            return None
        if any(_SCRIPT_FLAG.match(a) or a in ("-e", "--eval", "-m") for a in segment[1:]):
            return None
        words = [a for a in segment[1:] if not a.startswith("-")]
        prefix = program
        if words and _PREFIX_WORD.match(words[0]):
            prefix = f"{program} {words[0]}"
        if prefix not in prefixes:
            prefixes.append(prefix)
    return prefixes or None
