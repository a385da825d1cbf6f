"""Approval rules: which changes need how many people other than the requester.

Rules are data in TOML (docs/approvals.md). The admin's file is named by the environment
(``IAC_KERNEL_APPROVAL_RULES``; on a hub the admin sets it, and it lives where no sandbox
writes); a workspace's ``.iac-kernel/approvals.toml`` may only ADD rules. Loosening is
impossible by construction, not by a check: a change needs the strongest requirement of
every rule that matches it, so a workspace rule (even one named like an admin rule, or
asking for fewer approvers) is one more rule in the maximum, never a replacement.

A file that cannot be read or validated blocks every change: :meth:`RuleSet.evaluate`
returns a requirement no approval meets, whose text names the file, the rule and the
field, in one line.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The actions a rule matches, as the plan summary counts them.
ACTIONS = ("delete", "replace", "update", "create")
#: Where a workspace keeps its own rules, under its folder.
WORKSPACE_FILE = Path(".iac-kernel") / "approvals.toml"
#: The admin's rules file (an environment variable: a session never changes it).
RULES_ENV = "IAC_KERNEL_APPROVAL_RULES"
#: A rules file larger than this is refused (it is a list of rules, not data).
MAX_BYTES = 1_000_000

_GLOB = r"*?\[\]!"
#: The characters each pattern field accepts (glob characters included).
_PATTERNS = {
    "workspace": re.compile(rf"^[A-Za-z0-9_.\-{_GLOB}]+$"),
    "resource_types": re.compile(rf"^[A-Za-z0-9_\-{_GLOB}]+$"),
    "failed_checks": re.compile(rf"^[A-Za-z0-9_.\-{_GLOB}]+$"),
    "operations": re.compile(rf"^[A-Za-z0-9_.\-{_GLOB}]+:[A-Za-z0-9_.\-{_GLOB}]+$"),
}
_RULE_KEYS = ("name", "when", "approvers", "group", "description")
_WHEN_KEYS = (
    "workspace",
    "actions",
    "resource_types",
    "min_changes",
    "failed_checks",
    "operations",
)
#: A group's name; ``/`` separates a GitLab subgroup's path (``infra/platform``).
_GROUP = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-]*(?:/[A-Za-z0-9_.][A-Za-z0-9_.\-]*)*$")


class RulesError(ValueError):
    """A rules file that cannot be used; the message is one line naming file, rule, field."""


@dataclass(frozen=True)
class Change:
    """What a change does, in plain data: the workspace, how many resources of each type
    each action touches, the failed policy checks and the cloud operations it calls."""

    workspace: str = ""
    #: ``(resource type, action) -> count``; actions are those of :data:`ACTIONS`.
    changes: Mapping[tuple[str, str], int] = field(default_factory=dict)
    failed_checks: frozenset[str] = frozenset()
    #: ``service:operation`` as the credential broker records them (``iam:CreateUser``).
    operations: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        workspace: str = "",
        rows: Iterable[tuple[str, str]] = (),
        failed_checks: Iterable[str] = (),
        operations: Iterable[str] = (),
    ) -> Change:
        """A change from one ``(resource type, action)`` row per changed resource."""
        return cls(workspace, dict(Counter(rows)), frozenset(failed_checks), frozenset(operations))


@dataclass(frozen=True)
class Rule:
    """One validated rule. Every condition given must hold; in a list, any item may."""

    name: str
    source: str
    approvers: int
    group: str | None = None
    workspace: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    resource_types: tuple[str, ...] = ()
    min_changes: int = 0
    failed_checks: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The name, and which file when it is the workspace's (it never replaces the admin's)."""
        return self.name if self.source == "admin" else f"{self.name} ({self.source})"

    def matches(self, change: Change) -> bool:
        if self.workspace and not _any(change.workspace, self.workspace, case=True):
            return False
        if self.actions or self.resource_types or self.min_changes:
            counted = sum(
                count
                for (rtype, action), count in change.changes.items()
                if (not self.actions or action in self.actions)
                and (not self.resource_types or _any(rtype, self.resource_types, case=True))
            )
            if counted < max(1, self.min_changes):
                return False
        if self.failed_checks and not any(
            _any(check, self.failed_checks) for check in change.failed_checks
        ):
            return False
        return not self.operations or any(_any(op, self.operations) for op in change.operations)


def _any(value: str, patterns: tuple[str, ...], case: bool = False) -> bool:
    if case:
        return any(fnmatch.fnmatchcase(value, p) for p in patterns)
    return any(fnmatch.fnmatchcase(value.lower(), p.lower()) for p in patterns)


@dataclass(frozen=True)
class Requirement:
    """What a change needs: ``approvers`` distinct people other than the requester, of
    whom ``groups[g]`` are members of group ``g``; or, when ``unreadable`` says why, a
    block no approval lifts."""

    approvers: int = 0
    groups: Mapping[str, int] = field(default_factory=dict)
    rules: tuple[str, ...] = ()
    unreadable: str | None = None

    @property
    def blocked(self) -> bool:
        return self.unreadable is not None

    @property
    def needed(self) -> bool:
        return self.blocked or self.approvers > 0

    def text(self) -> str:
        """``1 approval by platform``, ``2 approvals``, or why the rules block."""
        if self.unreadable:
            return f"rules unreadable: {self.unreadable}"
        return wanted_text(self.approvers, self.groups)


def wanted_text(approvers: int, groups: Mapping[str, int]) -> str:
    """``2 approvals (1 by platform)``: a count of approvals still wanted, in words."""
    words = f"{approvers} approval" + ("s" if approvers != 1 else "")
    if not groups:
        return words
    parts = [f"{n} by {g}" for g, n in sorted(groups.items())]
    if len(groups) == 1 and next(iter(groups.values())) == approvers:
        return f"{words} by {next(iter(groups))}"
    return f"{words} ({', '.join(parts)})"


@dataclass(frozen=True)
class RuleSet:
    """The rules in force for one workspace, and any file that could not be used."""

    rules: tuple[Rule, ...] = ()
    problems: tuple[str, ...] = ()

    def evaluate(self, change: Change) -> Requirement:
        """The strongest requirement of the rules that match ``change``."""
        if self.problems:
            return Requirement(unreadable="; ".join(self.problems))
        matched = [rule for rule in self.rules if rule.matches(change)]
        groups: dict[str, int] = {}
        for rule in matched:
            if rule.group:
                groups[rule.group] = max(groups.get(rule.group, 0), rule.approvers)
        return Requirement(
            approvers=max((rule.approvers for rule in matched), default=0),
            groups=groups,
            rules=tuple(rule.label for rule in matched),
        )


def rules_for(folder: Path | str | None, env: Mapping[str, str] | None = None) -> RuleSet:
    """The admin's rules (``IAC_KERNEL_APPROVAL_RULES``) plus those of the workspace
    in ``folder``; a file that cannot be used is a problem that blocks, never skipped."""
    env = os.environ if env is None else env
    admin = env.get(RULES_ENV, "").strip()
    return load(Path(admin).expanduser() if admin else None, folder)


def load(admin: Path | None, folder: Path | str | None = None) -> RuleSet:
    """Rules of the admin's file (``None``: none) and of ``folder``'s workspace file."""
    rules: list[Rule] = []
    problems: list[str] = []
    sources: list[tuple[Path, str, bool]] = []
    if admin is not None:
        sources.append((admin, "admin", True))
    if folder is not None:
        sources.append((Path(folder) / WORKSPACE_FILE, "workspace", False))
    for path, source, required in sources:
        try:
            text = _read(path, follow=source == "admin")
            if text is None:
                if required:
                    raise RulesError(f"approval rules {path}: the file is missing")
                continue
            rules += parse(text, str(path), source)
        except RulesError as exc:
            problems.append(str(exc))
    return RuleSet(tuple(rules), tuple(problems))


def _read(path: Path, follow: bool) -> str | None:
    """The file's text, ``None`` when absent. A workspace file (the sandbox may write it)
    is never followed through a link, and only a regular file of sane size is read."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RulesError(f"approval rules {path}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise RulesError(f"approval rules {path}: not a regular file")
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise RulesError(f"approval rules {path}: larger than {MAX_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RulesError(f"approval rules {path}: not UTF-8 text") from None


def parse(text: str, source: str = "<rules>", kind: str = "admin") -> list[Rule]:
    """The rules of one file's text; the first problem raises :class:`RulesError`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"approval rules {source}: not valid TOML ({exc})") from None
    unknown = sorted(set(data) - {"rule"})
    if unknown:
        raise RulesError(
            f"approval rules {source}: unknown key {unknown[0]!r} (rules are [[rule]] tables)"
        )
    tables = data.get("rule", [])
    if not isinstance(tables, list):
        raise RulesError(f"approval rules {source}: 'rule' must be an array of [[rule]] tables")
    rules: list[Rule] = []
    for number, table in enumerate(tables, 1):
        rule = _rule(table, f"approval rules {source}: rule #{number}", kind)
        if any(r.name == rule.name for r in rules):
            raise RulesError(
                f"approval rules {source}: rule #{number} {rule.name!r}: name used twice"
            )
        rules.append(rule)
    return rules


def _rule(table: Any, where: str, kind: str) -> Rule:
    if not isinstance(table, dict):
        raise RulesError(f"{where}: must be a table")
    name = table.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RulesError(f"{where}: name: expects a non-empty string")
    where = f"{where} {name!r}"
    for key in table:
        if key not in _RULE_KEYS:
            raise RulesError(f"{where}: unknown key {key!r} (known: {', '.join(_RULE_KEYS)})")
    approvers = table.get("approvers")
    if isinstance(approvers, bool) or not isinstance(approvers, int) or approvers < 1:
        raise RulesError(f"{where}: approvers: expects a whole number, 1 or more")
    group = table.get("group")
    if group is not None and (not isinstance(group, str) or not _GROUP.match(group)):
        raise RulesError(f"{where}: group: expects a group name")
    if not isinstance(table.get("description", ""), str):
        raise RulesError(f"{where}: description: expects a string")
    when = table.get("when", {})
    if not isinstance(when, dict):
        raise RulesError(f"{where}: when: expects a table")
    for key in when:
        if key not in _WHEN_KEYS:
            raise RulesError(
                f"{where}: when.{key}: unknown condition (known: {', '.join(_WHEN_KEYS)})"
            )
    min_changes = when.get("min_changes", 1)
    if isinstance(min_changes, bool) or not isinstance(min_changes, int) or min_changes < 1:
        raise RulesError(f"{where}: when.min_changes: expects a whole number, 1 or more")
    actions = _strings(when, "actions", where)
    for action in actions:
        if action not in ACTIONS:
            raise RulesError(
                f"{where}: when.actions: {action!r} is not one of {', '.join(ACTIONS)}"
            )
    return Rule(
        name=name.strip(),
        source=kind,
        approvers=approvers,
        group=group,
        actions=actions,
        min_changes=when.get("min_changes", 0),
        **{key: _patterns(when, key, where) for key in _PATTERNS},
    )


def _strings(when: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = when.get(key, [])
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise RulesError(f"{where}: when.{key}: expects a string or a list of strings")
    if key in when and not items:
        raise RulesError(f"{where}: when.{key}: an empty list matches nothing")
    return tuple(items)


def _patterns(when: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    patterns = _strings(when, key, where)
    for pattern in patterns:
        if not _PATTERNS[key].match(pattern) or not _balanced(pattern):
            shape = "service:operation (iam:Create*)" if key == "operations" else "a name pattern"
            raise RulesError(f"{where}: when.{key}: {pattern!r} is not {shape}")
    return patterns


def _balanced(pattern: str) -> bool:
    """Brackets that open a character class close it (fnmatch would match ``[`` literally)."""
    depth = 0
    for char in pattern:
        if char == "[":
            if depth:
                return False
            depth = 1
        elif char == "]":
            if not depth:
                return False
            depth = 0
    return depth == 0
