"""The bash tool's call-time question: what the permission gate asks before a command runs.

One function decides (:func:`judge`). A command is asked per call (no "allow always")
when its text shows it changing or destroying real infrastructure or data; an apply of
a program whose exec-time guard asks with its plan is left to that question (one
question, with the plan); anything else gets the routine question, whose "allow always"
remembers each simple command's program and subcommand.

The text is judged by the guard's own per-program rules (:func:`~iac_kernel.guard.policy.rules.
classify`, the table the exec-time guard judges the exact argv by) for the programs it
guards, and by :data:`RULES` for what those rules do not judge. The check errs on the
side of asking: nested shells, ``$(...)`` and runners (``ssh``, ``eval``) are read too,
and a command that merely mentions ``terraform destroy`` as words (``echo terraform
destroy``) is asked.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass

from iac_kernel.guard.policy.grammar import Rule, matches, rule
from iac_kernel.guard.policy.rules import DEFAULT_PROGRAMS, classify
from iac_kernel.terraform.commands import resolve, split_argv

#: Programs the text check judges with the exec-time rules of the guard.
GUARD_TABLE_PROGRAMS = frozenset(DEFAULT_PROGRAMS) | {"oc"}
#: Programs whose apply/destroy the guard reviews at exec time (``tools/tf_guard.py``).
REVIEWED_PROGRAMS = frozenset({"terraform", "tofu"})

#: What the guard's rules do not judge: programs it does not run, and what git destroys
#: locally (its rules judge what git does to remotes). Program name patterns and a rule:
#: its words are consecutive non-option arguments anywhere after the program (global
#: options do not hide them), and one of its flags is present (``-r`` also in ``-rf``).
RULES: tuple[tuple[str, Rule], ...] = (
    ("rm", rule("", "deletes a directory tree", "-r -R --recursive")),
    ("find", rule("", "deletes files", "-delete")),
    ("git", rule("reset", "discards local changes", "--hard")),
    ("git", rule("clean", "deletes untracked files", "-f --force")),
    ("dd", rule("of=/dev/*", "overwrites a device")),
    ("mkfs mkfs.*", rule("", "formats a filesystem")),
    ("cdk cdktf", rule("deploy", "applies infrastructure changes")),
    ("cdk cdktf", rule("destroy", "destroys infrastructure")),
    ("make just", rule("apply", "likely applies infrastructure changes")),
    ("make just", rule("destroy", "likely destroys infrastructure")),
)

_MAX_DEPTH = 4
_SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "su"}
#: The whole rest of the command line is itself a command for these.
_RUNNERS = {"eval", "ssh", "watch"}
_SCRIPT_FLAG = re.compile(r"^-[a-zA-Z]*c$")
#: Text that can make a bare ``terraform`` run something else than the launcher on PATH.
_REROUTE = re.compile(r"PATH|\bhash\b")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: Programs whose arguments are themselves commands or code: no "allow always" prefix.
_NO_PREFIX = (
    _SHELLS
    | _RUNNERS
    | set(
        "exec env sudo doas xargs nohup setsid timeout time nice ionice stdbuf command "
        "builtin source . find parallel busybox fish tcsh csh script unshare chroot flock "
        "strace expect".split()
    )
)
_PREFIX_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")
_PER_CALL = "This command changes real infrastructure or data; approve each call."


@dataclass(frozen=True)
class Question:
    """What the gate asks about one bash command before it runs."""

    #: Why it is asked per call, with no "allow always" (None: it is not).
    reason: str | None = None
    #: Everything it runs is an apply asked at exec time with its plan: no question now.
    at_exec: bool = False
    #: What "Allow always" remembers (and "reject always" looks up): each simple
    #: command's program and subcommand, else the exact text. None: nothing.
    prefixes: list[str] | None = None


def judge(command: str, reviewed: frozenset[str] = frozenset(), sandboxed: bool = True) -> Question:
    """The gate's question about ``command``: the one call-time decision.

    ``reviewed``: guarded programs of :data:`REVIEWED_PROGRAMS` whose apply the guard asks
    at exec time with its plan. Without a sandbox (``sandboxed`` False) a program can be
    started past the guard (a script calling it by path), so such an apply is left to it
    only when the whole command is applies by bare name: bash then finds the launcher
    first on PATH."""
    left = reviewed if sandboxed else frozenset()
    prefixes = command_prefixes(command, left) or [" ".join(command.split())]
    commands = [_after_assignments(words) for words in literal_commands(command)]
    if (
        commands
        and all(words and _left_to_exec(words[0], words, reviewed) for words in commands)
        and dangerous_reason(command, reviewed) is None
    ):
        return Question(at_exec=True, prefixes=prefixes)
    reason = dangerous_reason(command, left)
    return Question(f"{reason}. {_PER_CALL}" if reason else None, prefixes=prefixes)


def dangerous_reason(command: str, exec_reviewed: frozenset[str] = frozenset()) -> str | None:
    """Why ``command`` is dangerous (``terraform destroy: destroys infrastructure``), or None.

    ``exec_reviewed``: programs whose apply the exec-time guard asks with the plan; their
    applies by bare name are left to it."""
    if _REROUTE.search(command):
        exec_reviewed = frozenset()  # the name may not reach the guard's launcher
    return _check(command, 0, exec_reviewed)


def _left_to_exec(token: str, words: list[str], exec_reviewed: frozenset[str]) -> bool:
    """An apply/destroy (or ``test``) of a reviewed program called by its bare name
    (through PATH, so through the guard's launcher): asked once, at exec time, with its
    plan (:mod:`iac_kernel.tools.tf_guard`)."""
    if "/" in token or os.path.basename(token) not in exec_reviewed:
        return False
    command = split_argv(words)
    return resolve(words, {}) is not None or (command is not None and command.subcommand == "test")


def _after_assignments(words: list[str]) -> list[str]:
    """A simple command's words from its program on (``TF_LOG=1 terraform apply`` ->
    ``terraform apply``): the shell gives the assignments to the program's environment,
    where the exec-time guard reads them."""
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        i += 1
    return words[i:]


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
            if _left_to_exec(token, segment[i:], exec_reviewed):
                continue  # asked once, at exec time, with its plan
            if program in GUARD_TABLE_PROGRAMS:
                verdict = classify(program, segment[i:])
                # An unknown cloud verb is asked at exec time; the text alone (`echo
                # gcloud is slow`) is not worth a question.
                if verdict.changing and not verdict.by_default:
                    return verdict.reason
            for programs, row in RULES:
                if any(fnmatch.fnmatchcase(program, p) for p in programs.split()) and matches(
                    row, segment[i + 1 :]
                ):
                    return f"{' '.join([program, *row.words])}: {row.reason}"
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
    nested shells or interpreters running code, or variable assignments. Applies left
    to the exec-time question are no part of it: they are asked each time, with their
    plan."""
    if not command.strip() or _has_expansions(command):
        return None
    prefixes: list[str] = []
    for segment in _segments(command):
        program = segment[0]
        if _left_to_exec(program, segment, exec_reviewed):
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
