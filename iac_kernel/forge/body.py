"""The body of a pull request a reviewer can act on, within the forge's limits.

In order: what changed and why (the model's summary), the plan (its counts line, then
the table with destroys and replacements first), the plan file's SHA-256 and the inputs
the binding fixes (folder, workspace, state, var files and their digests), checkov's
findings, the approval rule that applies, the files and the session notebook committed
beside the change.

With a plan and the commit it was made from, the body starts with :func:`plan_marker`, an
HTML comment (neither forge shows it) that binds the request to that plan's SHA-256 and
commit: an apply given the request reads it back (:func:`plan_markers`,
:mod:`iac_kernel.forge.review`), and so does a plan posted as a comment by ``%pr review``.

A body never exceeds :data:`MAX_BODY` characters (GitHub refuses more than 65,536; GitLab
accepts more, the same cap keeps both readable). What is cut is the table's tail, the
creates and updates before the destroys and replacements; each cut says how many rows
it left out and links the notebook, which holds the whole table.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.terraform.plan import Plan, ResourceChange, reason_text, summary_line
from iac_kernel.terraform.summary import SYMBOLS

#: GitHub's limit for a pull request body, in characters.
MAX_BODY = 65_536
#: Room kept for the sections after the table.
_TAIL_ROOM = 6_000
#: Files the body lists by name.
_FILES = 40
#: Room kept after the table for the line that counts and links the rows left out.
_TRAILER_ROOM = 600
DESTROYING = ("replace", "delete")
#: The plan a request carries, as the forge stores it (see the module doc).
_MARKER = re.compile(
    r"<!-- iac-kernel plan sha256=(?P<sha256>[0-9a-f]{64}) "
    r"commit=(?P<commit>[0-9a-f]{40}(?:[0-9a-f]{24})?) -->"
)


def plan_marker(sha256: str, commit: str) -> str:
    """The line that binds a request's text to a plan's SHA-256 and its commit."""
    return f"<!-- iac-kernel plan sha256={sha256} commit={commit} -->"


def plan_markers(text: str) -> list[tuple[str, str]]:
    """``(sha256, commit)`` of each plan marker in ``text``, in order."""
    return [(m["sha256"], m["commit"]) for m in _MARKER.finditer(text or "")]


@dataclass
class BodyParts:
    """What a body says; every text is already masked."""

    title: str
    summary: str
    files: Sequence[str] = ()
    plan: Plan | None = None
    #: ``(label, value)`` lines of what the binding fixes (folder, workspace, state, ...).
    bound: Sequence[tuple[str, str]] = ()
    #: The approval rule that applies, in words.
    rule: str = ""
    #: Link to (or path of) the committed session notebook.
    notebook: str | None = None
    notes: Sequence[str] = field(default_factory=list)
    #: The commit the plan was made from (the request's head): with a plan, the body
    #: starts with :func:`plan_marker`.
    commit: str = ""


def fenced(text: str, info: str = "") -> str:
    """``text`` in a code fence longer than any backtick run inside it."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{info}\n{text}\n{ticks}"


def cell(text: Any) -> str:
    """A Markdown table cell: no pipes or newlines break the row."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def counts_text(plan: Plan) -> str:
    """``2 to destroy (1 replaced), 3 to change, 5 to add``: destroys first."""
    counts = plan.counts
    replace = counts.get("replace", 0)
    destroy = counts.get("delete", 0) + replace
    text = f"**{destroy} to destroy**" if destroy else "0 to destroy"
    if replace:
        text += f" ({replace} replaced)"
    add = counts.get("create", 0) + replace
    return f"{text}, {counts.get('update', 0)} to change, {add} to add"


def plan_line(plan: Plan) -> str:
    """``Plan: 2 to destroy (1 replaced), 3 to change, 5 to add.``, or terraform's own line
    for a plan with nothing to count (failed, refresh-only, no changes)."""
    if plan.errored or plan.refresh_only or not plan.changed:
        return summary_line(plan)
    return f"Plan: {counts_text(plan)}."


def row(resource: ResourceChange) -> str:
    symbol = SYMBOLS.get(resource.action, resource.action)
    return (
        f"| `{symbol}` {resource.action} | `{cell(resource.address)}` "
        f"| {cell(reason_text(resource)) or ' '} |"
    )


def plan_section(plan: Plan, budget: int, notebook: str | None) -> list[str]:
    """The plan's lines within ``budget`` characters (see the module doc)."""
    sha = plan.file.sha256 if plan.file is not None else "(unknown)"
    shown = plan.file.path if plan.file is not None else "(plan)"
    lines = [
        "## Plan",
        "",
        plan_line(plan),
        "",
        f"- Plan file: `{cell(shown)}`, SHA-256 `{sha}`",
    ]
    if plan.errored:
        return [*lines, "", "The plan failed; nothing in it can be applied."]
    changed = plan.changed
    if not changed:
        return lines
    lines += ["", "| action | address | why |", "|---|---|---|"]
    used = sum(len(line) + 1 for line in lines) + _TRAILER_ROOM
    shown_rows = 0
    for resource in changed:
        text = row(resource)
        if used + len(text) + 1 > budget:
            break
        lines.append(text)
        used += len(text) + 1
        shown_rows += 1
    left = len(changed) - shown_rows
    if left:
        destroying = sum(1 for r in changed[shown_rows:] if r.action in DESTROYING)
        where = f" (the whole table: [session notebook]({notebook}))" if notebook else ""
        extra = f", {destroying} of them destroys or replacements" if destroying else ""
        lines += ["", f"… {left} more rows not shown here{extra}{where}."]
    return lines


def checks_section(plan: Plan | None) -> list[str]:
    if plan is None:
        return []
    lines = ["## Policy checks (checkov)", ""]
    if plan.checks:
        lines.append(f"{len(plan.checks)} failed check(s):")
        lines.append("")
        for check in plan.checks[:50]:
            lines.append(
                f"- `{cell(check.get('check_id'))}` {cell(check.get('name'))} on "
                f"`{cell(check.get('address'))}`"
            )
        if len(plan.checks) > 50:
            lines.append(f"- … {len(plan.checks) - 50} more")
    else:
        lines.append(plan.checks_note or "No failed checks.")
    return lines


def build(parts: BodyParts, limit: int = MAX_BODY) -> str:
    """The body (see the module doc); never longer than ``limit`` characters."""
    head = [parts.summary.strip() or parts.title, ""]
    if parts.plan is not None and parts.plan.file is not None and parts.commit:
        head.insert(0, plan_marker(parts.plan.file.sha256, parts.commit))
    tail: list[str] = []
    if parts.bound:
        tail += ["## What the apply is bound to", ""]
        tail += [f"- {label}: {value}" for label, value in parts.bound]
        tail.append("")
    tail += checks_section(parts.plan)
    if parts.plan is not None:
        tail.append("")
    tail += ["## Approval", "", parts.rule or "No approval rule applies to this change.", ""]
    if parts.files:
        tail += ["## Files", ""]
        tail += [f"- `{cell(path)}`" for path in parts.files[:_FILES]]
        if len(parts.files) > _FILES:
            tail.append(f"- … {len(parts.files) - _FILES} more (the commit has them all)")
        tail.append("")
    if parts.notebook:
        tail += [f"The session that made this change: [notebook]({parts.notebook}).", ""]
    tail += [f"_{note}_" for note in parts.notes]
    head_text = "\n".join(head)
    tail_text = "\n".join(tail)
    if len(head_text) > limit // 4:  # a summary never crowds out the plan (nor the marker)
        head_text = head_text[: limit // 4 - 2] + "…\n"
    budget = limit - len(head_text) - min(len(tail_text), _TAIL_ROOM) - 2
    middle = plan_section(parts.plan, budget, parts.notebook) if parts.plan else []
    body = "\n".join([head_text, *middle, "", tail_text]).rstrip() + "\n"
    if len(body) > limit:  # a tail longer than its room: cut it, say so
        body = body[: limit - 40].rstrip() + "\n\n… (cut to the forge's limit)\n"
    return body


def bound_lines(binding: Any, root: Path | None = None) -> list[tuple[str, str]]:
    """What a :class:`~iac_kernel.terraform.binding.Binding` fixes, as body lines; paths in
    the repository at ``root`` relative to it (what a reviewer on the forge knows)."""
    if binding is None:
        return []

    def shown(path: str | Path) -> str:
        if root is not None:
            with contextlib.suppress(ValueError):
                return str(Path(os.path.realpath(path)).relative_to(os.path.realpath(root)))
        return str(path)

    lines = [
        ("Folder", f"`{cell(shown(binding.host_workdir))}`"),
        ("Workspace", f"`{cell(binding.workspace)}`"),
        ("Data folder", f"`{cell(shown(binding.host_data_dir))}`"),
    ]
    state = binding.state or {}
    if state.get("path") is None:
        lines.append(("State", "a remote backend's (not read here)"))
    elif state.get("lineage") is None:  # no state file yet: the first apply makes it
        lines.append(("State", f"`{cell(state.get('path'))}`, none yet (the first apply)"))
    else:
        serial = state.get("serial")
        lineage = state.get("lineage")
        lines.append(
            ("State", f"`{cell(state.get('path'))}` lineage `{lineage}` serial `{serial}`")
        )
    if binding.cli_config:
        lines.append(("CLI configuration", f"`{cell(binding.cli_config)}`"))
    watched = set(binding.watched)  # the CLI configuration, the backend's settings
    for path, digest in sorted(binding.files.items()):
        if path not in watched:
            lines.append(("Input file", f"`{cell(shown(path))}` sha256 `{digest or '(absent)'}`"))
    return lines
