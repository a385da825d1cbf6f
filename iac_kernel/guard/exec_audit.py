"""The audit record of one reviewed guarded call: what was asked, answered and done."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from iac_kernel.guard import reviews
from iac_kernel.guard.exec_request import AuditSink, ExecRequest

log = logging.getLogger(__name__)


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
