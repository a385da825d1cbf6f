"""A guarded program's request to run, as the permission gate and the audit see it: the
question's facts (:class:`ExecRequest`) and the audit record of a changing command (what
was asked, answered and done: :func:`record`): its review's record where it has one (a
terraform apply's plan and state), else :func:`command_record`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.guard.approval import reviews
from iac_kernel.guard.policy import target
from iac_kernel.guard.policy.grammar import Verdict
from iac_kernel.textsafe import printable

log = logging.getLogger(__name__)


@dataclass
class ExecRequest:
    """A guarded program asks to run: what the permission gate decides on."""

    program: str
    argv: list[str]
    cwd: str
    verdict: Verdict
    review: reviews.Review | None = None
    sandboxed: bool = True
    #: Filled by whoever asks: the question's exact text, the answer, who gave it, when.
    asked: dict[str, Any] = field(default_factory=dict)
    #: The environment that retargets the command (secret values as ``***``).
    env: dict[str, str] = field(default_factory=dict)
    #: What it resolves to: ``Target: terraform workspace prod``.
    target: list[str] = field(default_factory=list)
    #: The command changed that environment (an earlier question did not show it).
    retargeted: bool = False


#: ``ask_exec``: returns (allowed, message for the model when not allowed).
AskExec = Callable[[ExecRequest], Awaitable[tuple[bool, str]]]
#: Receives one audit record per reviewed call that asked for one (see ``Review.audit``).
AuditSink = Callable[[dict[str, Any]], None]


@dataclass
class Trail:
    """How far one call's approval got: its review, then the question put to the gate.
    ``command``: the record of a changing command (or a push), for when its review
    gives none."""

    review: reviews.Review | None = None
    request: ExecRequest | None = None
    command: dict[str, Any] | None = None

    @property
    def asked(self) -> dict:
        """The question's record (empty until the gate was asked)."""
        return self.request.asked if self.request is not None else {}


def command_record(
    program: str, argv: Sequence[str], cwd: str, env: Mapping[str, str], reason: str
) -> dict[str, Any]:
    """The record of one changing command: the exact argv, where it ran (``cwd`` on the
    host), what it resolves to (terraform workspace, kube context) and why it counts."""
    head = os.path.basename(argv[0]) if argv else program
    shown = head if head.startswith(program + "-") else program  # `git-receive-pack`
    return {
        "kind": "command",
        "form": "bash",
        "program": program,
        "command": printable(shlex.join([shown, *argv[1:]])),
        "workdir": cwd,
        "target": target.resolved(program, argv, cwd, env),
        "reason": reason,
    }


async def record(
    audit: AuditSink | None, trail: Trail, outcome: str, code: int | None, message: str | None
) -> None:
    """Send the call's record to ``audit``: its review's (with ``after()``, e.g. the
    state after an apply), else its :attr:`Trail.command`; nothing for other commands."""
    review = trail.review
    base = review.audit if review is not None else None
    if base is None and trail.command is not None:
        base = trail.command
        outcome = "ran" if outcome == "applied" else outcome
    if audit is None or base is None:
        return
    asked = trail.asked
    if outcome == "refused" and asked and not asked.get("allowed"):
        outcome = "cancelled" if asked.get("answer") == "cancelled" else "rejected"
    entry = {**base, **asked, "outcome": outcome, "exit": code}
    if message:
        entry["message"] = message
    after = review.after if review is not None and review.audit is not None else None
    if after is not None and outcome not in ("rejected", "cancelled"):
        with contextlib.suppress(Exception):
            entry.update(await asyncio.to_thread(after))
    if review is not None and review.scrub is not None:
        entry = review.scrub(entry)
    try:
        await asyncio.to_thread(audit, entry)
    except Exception:
        log.exception("could not write the audit record")
