"""A team's approval rules at the apply: the one gate every apply of a saved plan goes
through, the ``terraform_apply`` tool's and ``terraform|tofu apply`` run through bash
(scripts included, reviewed at exec time by ``tools/tf_guard.py``).

:func:`requirement_of` evaluates the rules in force (``team/rules.py``: the admin's file
named by this process's environment, then the workspace's) on a reviewed plan. A plan
they hold back gets a :class:`Gate`: :meth:`Gate.wait` makes or finds the approval record
of the plan's hash and :meth:`~iac_kernel.terraform.binding.Binding.approval_inputs`,
asked by this process's user (:func:`~iac_kernel.team.store.process_identity`: on a hub,
the hub user its token belongs to; a new record is posted to the team's webhook), and
waits while it is pending, saying what it waits for through the caller's ``say`` (the
call's output) and :func:`waiting` (the notebook's status item); :meth:`Gate.spend`
spends the approval on this one apply once the caller re-checked the plan and binding.

An apply without a saved plan (terraform plans by itself) cannot be bound to a record:
:func:`unbound_refusal` refuses it wherever a rule could hold back a change of its
workspace.
"""

from __future__ import annotations

import asyncio
import fnmatch
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iac_kernel.team import rules
from iac_kernel.team.rules import Change, Requirement
from iac_kernel.terraform.plan import Plan
from iac_kernel.terraform.review import ApprovedPlan, counts_line

if TYPE_CHECKING:  # the team store's modules are imported only when a rule asks
    from iac_kernel.team.approvals import Approval, Approvals
    from iac_kernel.terraform.binding import Binding

log = logging.getLogger(__name__)

#: Seconds between two looks at the team store while an apply waits for its approvals.
POLL_SECONDS = 1.0
#: ``say(text)``: one line of the waiting call's status (its card, the ACP tool call).
Say = Callable[[str], None]
UNBOUND = (
    "Refused: the team's approval rules may hold back a change of workspace {workspace} "
    "(rule: {rules}), and an apply without a saved plan cannot be bound to an approval. "
    "Nothing was applied. Save a plan first (`{program} plan{flag} -out=tfplan`), then "
    "apply that file (`{program} apply tfplan`)."
)
BLOCKED = "{why}. No apply runs until the file is fixed."


def change_of(plan: Plan, workspace: str) -> Change:
    """What approval rules match on: the workspace, every changed resource's type and
    action (all of them, not the rows a card shows), and the failed policy checks."""
    rows = [(r.type, r.action) for r in plan.resources if r.action in rules.ACTIONS]
    checks = [c["check_id"] for c in plan.checks if isinstance(c.get("check_id"), str)]
    return Change.of(workspace, rows, checks)


def requirement_of(plan: Plan, binding: Binding) -> Requirement:
    """The approvals the rules in force (the admin's file, then the workspace's) ask of
    this plan in this folder and workspace. The admin's file is named by this process's
    environment, never by the command's."""
    ruleset = rules.rules_for(binding.host_workdir)
    return ruleset.evaluate(change_of(plan, binding.workspace))


def blocked_text(requirement: Requirement) -> str:
    """The one line that refuses every apply while a rules file cannot be used."""
    return BLOCKED.format(why=requirement.text())


def needs_text(requirement: Requirement) -> str:
    """What the question adds for a plan the rules hold back."""
    rule = "rule" if len(requirement.rules) == 1 else "rules"
    return (
        f"Needs {requirement.text()} from someone other than you "
        f"({rule}: {'; '.join(requirement.rules)}): once you allow it, the apply "
        "waits for them."
    )


def card_fields(requirement: Requirement) -> dict[str, Any]:
    """For the question's card (its ``approval``): what the apply needs, which rules ask."""
    return {"needs": requirement.text(), "rules": list(requirement.rules)}


def unbound_refusal(
    program: str, folder: Path, workspace: str, *, destroy: bool, refresh_only: bool
) -> str | None:
    """Why an apply without a saved plan in ``folder``'s ``workspace`` is refused: a
    rules file cannot be used, or a rule could match a change there (its workspace
    pattern matches, or it has none: what the plan would change is not known before
    terraform makes it). None: no rule could, it runs as without rules."""
    ruleset = rules.rules_for(folder)
    if ruleset.problems:
        return "Refused: " + blocked_text(Requirement(unreadable="; ".join(ruleset.problems)))
    could = [
        rule.label
        for rule in ruleset.rules
        if not rule.workspace or any(fnmatch.fnmatchcase(workspace, p) for p in rule.workspace)
    ]
    if not could:
        return None
    flag = " -destroy" if destroy else " -refresh-only" if refresh_only else ""
    return UNBOUND.format(workspace=workspace, rules="; ".join(could), program=program, flag=flag)


# -- what this process's applies wait for (the notebook's status item) --------------------

_waiting: dict[int, dict[str, str]] = {}
_keys = itertools.count()
#: Called (in the waiting call's event loop) whenever :func:`waiting` changes.
listeners: list[Callable[[], None]] = []


def waiting() -> list[dict[str, str]]:
    """The approvals this process's applies wait for now, oldest first: ``{"id",
    "waiting" (Approval.waiting_text), "rule"}``."""
    return [dict(entry) for entry in _waiting.values()]


def _show(key: int, record: Approval | None) -> None:
    if record is None:
        if _waiting.pop(key, None) is None:
            return
    else:
        entry = {"id": record.id, "waiting": record.waiting_text(), "rule": record.rule}
        if _waiting.get(key) == entry:
            return
        _waiting[key] = entry
    for listener in list(listeners):
        try:
            listener()
        except Exception:  # a front end's bug must not end the wait
            log.exception("approval status listener failed")


@dataclass
class Gate:
    """One apply of a plan the rules hold back: its record, the wait, the spend."""

    approved: ApprovedPlan
    requirement: Requirement
    #: The plan card the requester saw (masked as shown), for the approver's view.
    card: Mapping[str, Any] | None = None
    record: Approval | None = field(default=None, init=False)

    async def wait(self, say: Say) -> str | None:
        """Make or find the record of this plan and binding (asked by this process's
        user) and wait while it is pending; None once approved, else why not (one line).
        A cancel ends the wait and leaves the record: the same plan applied again finds it."""
        from iac_kernel.team.approvals import ApprovalError, Approvals
        from iac_kernel.team.store import TeamStoreError, now, open_store, process_identity

        inputs = self.approved.binding.approval_inputs()
        try:
            # Who runs this process (on a hub: its token's user, asked of the hub); never a
            # setting or the environment's word.
            requester = await asyncio.to_thread(process_identity)
            store = await asyncio.to_thread(open_store)
        except TeamStoreError as exc:
            return (
                f"Not applied: the approval rules need the team store, and {exc}. Nothing was run."
            )
        try:
            book = Approvals(store)
            summary = counts_line(self.approved.plan, self.approved.shown_path)
            asked_at = now()
            record = await asyncio.to_thread(
                book.request,
                requester,
                self.approved.sha256,
                inputs,
                summary.removeprefix("⚠️ "),
                self.requirement,
                self.card,
            )
            if record.created_at >= asked_at and not record.votes:
                _announce(record)  # made now, not found: the team hears of it once
            record = await self._wait(book, record, say, POLL_SECONDS)
        except (ApprovalError, TeamStoreError) as exc:
            return f"Not applied: {exc}. Nothing was run."
        finally:
            store.close()
        self.record = record
        if record.status != "approved":
            return f"Not applied: approval {record.id} {record.ended_text()}. Nothing was run."
        return None

    async def _wait(self, book: Approvals, record: Approval, say: Say, poll: float) -> Approval:
        """Look at the record every ``poll`` seconds while it is pending, saying what it
        waits for whenever that changes."""
        key = next(_keys)
        shown = ""
        try:
            while record.status == "pending":
                text = record.waiting_text()
                if not shown:
                    say(
                        f"Approval {record.id}: {text} (rule: {record.rule}). Another person "
                        f"approves it with `iac-kernel approvals approve {record.id}`; the "
                        "apply goes on when they have. Cancelling leaves the record: applying "
                        "the same plan again finds it.\n"
                    )
                elif text != shown:
                    say(f"Approval {record.id}: {text}.\n")
                shown = text
                _show(key, record)
                await asyncio.sleep(poll)
                record = await asyncio.to_thread(self.look, book, record.id)
        finally:
            _show(key, None)
        return record

    def look(self, book: Approvals, record_id: str) -> Approval:
        """The record as it is now, read while the apply waits (a gate bound to a pull
        request first adds the approvals given on it meanwhile)."""
        return book.get(record_id)

    def spend(self) -> str | None:
        """Spend the approval :meth:`wait` found on this apply (the caller re-checked the
        plan file and the binding right before); None, or why not (one line)."""
        from iac_kernel.team.approvals import ApprovalError, Approvals
        from iac_kernel.team.store import TeamStoreError, open_store, process_identity

        if self.record is None:
            return "Not applied: no approval was found for this plan. Nothing was run."
        inputs = self.approved.binding.approval_inputs()
        try:
            store = open_store()
            try:
                self.record = Approvals(store).spend(
                    self.record.id, process_identity(), self.approved.sha256, inputs
                )
            finally:
                store.close()
        except (ApprovalError, TeamStoreError) as exc:
            return f"Not applied: {exc}. Nothing was run."
        return None

    def audit(self) -> dict[str, Any]:
        """For the apply's audit record: the approval spent on it."""
        assert self.record is not None
        return {"id": self.record.id, "rule": self.record.rule, "approvers": self.approvers()}

    def approvers(self) -> list[str]:
        return [vote.approver for vote in self.record.approvals] if self.record else []

    def applying_text(self) -> str:
        assert self.record is not None
        return f"Approval {self.record.id}: approved by {', '.join(self.approvers())}; applying.\n"


def _announce(record: Approval) -> None:
    """Post a new pending record to the team's webhook (``team/webhook.py``), from this
    process's environment; it never waits and never raises."""
    try:
        from iac_kernel.team.webhook import notify_pending

        notify_pending(record)
    except Exception:  # the apply's wait does not depend on the announcement
        log.exception("approval %s: the webhook post failed", record.id)
