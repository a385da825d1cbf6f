"""The building blocks of the guard's per-program rules: verdicts, rules, argv helpers."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

CHANGE = "change"
READ = "read"
OTHER = "other"


@dataclass(frozen=True)
class Verdict:
    """What an argv does: ``kind`` is change, read or other; ``reason`` says why."""

    kind: str
    reason: str = ""
    #: Changing only because the verb is not a known read (cloud CLIs ask by default).
    by_default: bool = False

    @property
    def changing(self) -> bool:
        return self.kind == CHANGE


@dataclass(frozen=True)
class Rule:
    """``words`` appear as consecutive positional arguments (fnmatch patterns), and at
    least one of ``flags`` is present when ``flags`` is not empty."""

    words: tuple[str, ...]
    reason: str
    flags: tuple[str, ...] = ()


def rule(words: str, reason: str, flags: str = "") -> Rule:
    return Rule(tuple(words.split()), reason, tuple(flags.split()))


def each_verb(verbs: str, reason: str) -> tuple[Rule, ...]:
    """One single-word rule per verb in ``verbs``."""
    return tuple(Rule((verb,), reason) for verb in verbs.split())


def program_name(path: str) -> str:
    """The program a path names: ``/usr/local/bin/terraform`` -> ``terraform``."""
    return os.path.basename(path.rstrip("/"))


def positionals(args: Sequence[str]) -> list[str]:
    """The arguments that are not options (``-x``, ``--x=y``)."""
    return [a for a in args if not a.startswith("-")]


def matches(rule: Rule, args: Sequence[str], positional: Sequence[str] | None = None) -> bool:
    """True when ``rule`` matches ``args`` (see :class:`Rule`)."""
    if positional is None:
        positional = positionals(args)
    if rule.words and not has_words(rule.words, positional):
        return False
    return not rule.flags or any(has_flag(args, flag) for flag in rule.flags)


def has_words(words: Sequence[str], positional: Sequence[str]) -> bool:
    """``words`` (fnmatch patterns) match consecutive items of ``positional``."""
    n = len(words)
    return any(
        all(fnmatch.fnmatchcase(positional[j + k], w) for k, w in enumerate(words))
        for j in range(len(positional) - n + 1)
    )


def has_flag(args: Sequence[str], flag: str) -> bool:
    """``flag`` is present: exactly, as ``--flag=value``, or inside a short cluster (``-rf``)."""
    letter = flag[1] if len(flag) == 2 and flag[0] == "-" and flag[1] != "-" else None
    # Go's flag package (terraform): `-long` is also `--long`, and `-long=value`.
    forms = (flag, "-" + flag) if len(flag) > 2 and flag[1] != "-" else (flag,)
    for arg in args:
        if arg == "--":
            return False
        if arg in forms or (len(flag) > 2 and any(arg.startswith(f + "=") for f in forms)):
            return True
        if letter and re.fullmatch(r"-[a-zA-Z]+", arg) and letter in arg[1:]:
            return True
    return False
