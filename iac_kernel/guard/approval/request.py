"""A guarded program's request to run, as the permission gate and the audit see it: the
question's facts (:class:`ExecRequest`) and the audit record of a reviewed call (what
was asked, answered and done: :func:`record`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.guard.approval import reviews
from iac_kernel.guard.policy.grammar import Verdict

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
    """How far one call's approval got: its review, then the question put to the gate."""

    review: reviews.Review | None = None
    request: ExecRequest | None = None

    @property
    def asked(self) -> dict:
        """The question's record (empty until the gate was asked)."""
        return self.request.asked if self.request is not None else {}


async def record(
    audit: AuditSink | None, trail: Trail, outcome: str, code: int | None, message: str | None
) -> None:
    """Send the call's record to ``audit`` (when its review asked for one)."""
    review = trail.review
    if audit is None or review is None or review.audit is None:
        return
    asked = trail.asked
    if outcome == "refused" and asked and not asked.get("allowed"):
        outcome = "cancelled" if asked.get("answer") == "cancelled" else "rejected"
    entry = {**review.audit, **asked, "outcome": outcome, "exit": code}
    if message:
        entry["message"] = message
    if review.after is not None and outcome not in ("rejected", "cancelled"):
        with contextlib.suppress(Exception):
            entry.update(await asyncio.to_thread(review.after))
    if review.scrub is not None:
        entry = review.scrub(entry)
    try:
        await asyncio.to_thread(audit, entry)
    except Exception:
        log.exception("could not write the audit record")
